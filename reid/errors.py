"""Errors that the library raises for bad input.

Every error carries a one-line message naming the file (or option) and the problem; the
CLI prints that line and exits non-zero.  Library code raises these instead of printing.
"""

from __future__ import annotations


class ReidError(Exception):
    """Base class of every error caused by user input rather than a bug."""


class DataError(ReidError):
    """A dataset folder, image, list or pair file is missing, unreadable or malformed."""


class BatchError(ReidError, ValueError):
    """A batch given to a loss is malformed: wrong shapes or dtypes, labels outside the
    classes, or NaN/infinite values. Also a ValueError, as PyTorch's own losses raise."""


class ModelError(ReidError):
    """A model folder, checkpoint or model card is missing, corrupt or mismatched."""


class GalleryError(ReidError):
    """A gallery is missing, corrupt, locked or made with another model."""


class GalleryBusyError(GalleryError):
    """A gallery cannot be written or reached now, and may be later: another writer held its
    lock past the timeout, or its server cannot be reached."""


class ConfigError(ReidError):
    """An option or combination of options is invalid."""


class NameTakenError(ConfigError):
    """A new name equals one already taken, as names compare (:func:`reid.names.name_key`:
    case-folded): ``Alice`` where ``alice`` is."""


class ConfigValueError(ConfigError):
    """The value of one config key is wrong. The message names the key (``lr: must be
    positive``); ``key`` and ``problem`` let a caller name it the way the user gave it
    instead, such as the command line's option (:meth:`named`)."""

    def __init__(self, key: str, problem: str, sep: str = ": ") -> None:
        super().__init__(f"{key}{sep}{problem}")
        self.key = key
        self.problem = problem
        self.sep = sep

    def named(self, name: str) -> str:
        """The message with the key called ``name`` (``--lr: must be positive``)."""
        return f"{name}{self.sep}{self.problem}"
