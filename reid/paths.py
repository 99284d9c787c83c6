"""Output paths: checks made before any work, so that a run never fails at its end because
of where it was told to write, and new files opened without following links."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from reid.errors import ConfigError


def check_output_folder(folder: Path, what: str) -> None:
    """Raise ConfigError naming ``folder`` and the option ``what`` unless ``folder`` is a
    folder or can be made (its nearest existing ancestor is a folder)."""
    for path in (Path(folder), *Path(folder).parents):
        if path.exists():
            if not path.is_dir():
                raise ConfigError(f"{path}: {what} needs a folder here; this is a file")
            return


def check_output_file(path: Path, what: str) -> None:
    """Raise ConfigError naming ``path`` and the option ``what`` unless a file can be written there."""
    if Path(path).is_dir():
        raise ConfigError(f"{path}: {what} needs a file name; this is a folder")
    check_output_folder(Path(path).parent, what)


def open_new(path: Path) -> BinaryIO:
    """``path`` opened for writing as a new, empty file of this process.

    Whatever is at ``path`` (a leftover, or a link planted there) is removed first, and the
    file is created exclusively (``O_EXCL | O_NOFOLLOW``), so a link is never followed to
    write elsewhere.
    """
    path = Path(path)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    return os.fdopen(fd, "wb")
