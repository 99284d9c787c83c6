"""Where a named detector finds its published model files: the registry's verified cache
(``reid models fetch NAME`` or ``reid models add NAME FILE`` puts them there), read through
:func:`reid.models.registry.cached_files` alone, so a file that fails its size or hash
check is never run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reid.detect.names import DETECTOR_ARTEFACTS
from reid.errors import ModelError
from reid.models.registry import cached_files, get_artefact


def how_to_get(name: str) -> str:
    """The command that puts artefact ``name`` in the cache: a fetch for a published file
    (or, without internet, ``reid models add`` with a copy of it), else ``reid models add``
    with the file the user brings; for a detector's artefact, then the ``--detector`` that
    runs it."""
    then = f", then --detector {DETECTOR_ARTEFACTS[name]}" if name in DETECTOR_ARTEFACTS else ""
    if get_artefact(name).published:
        return f"run `reid models fetch {name}` (offline: `reid models add {name} FILE` with a copy of its file){then}"
    return f"run `reid models add {name} FILE`{then}"


def _found(names: Sequence[str], suffix: str) -> Path | None:
    for name in names:
        found = [p for p in cached_files(name) or () if p.suffix == suffix]
        if len(found) == 1:
            return found[0]
    return None


def model_file(names: Sequence[str], suffix: str) -> Path:
    """The verified cached file ending in ``suffix`` (".onnx", ".xml") of the first of the
    artefacts ``names`` that is in the cache; ModelError naming the command that puts the
    first one there when none is."""
    found = _found(names, suffix)
    if found is None:
        raise ModelError(f"model {names[0]} is not in the cache; {how_to_get(names[0])}")
    return found


def has_model_file(names: Sequence[str], suffix: str) -> bool:
    """True when :func:`model_file` finds a file without raising."""
    return _found(names, suffix) is not None
