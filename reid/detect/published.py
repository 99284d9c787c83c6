"""Where a named detector finds its published model files: the registry's cache folder of
its artefact (``reid models fetch NAME`` or ``reid models add NAME FILE`` puts them there).

:func:`model_files` is the one place the cache is looked into for them.
"""

from __future__ import annotations

from pathlib import Path

from reid.errors import ModelError
from reid.models.registry import cache_dir


def model_files(name: str) -> list[Path] | None:
    """The files of registry artefact ``name`` in the cache (``NAME/`` in
    :func:`reid.models.registry.cache_dir`), sorted by name; None when there are none."""
    folder = cache_dir() / name
    if not folder.is_dir():
        return None
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return files or None


def how_to_get(name: str, published: bool = True) -> str:
    """The command that puts artefact ``name`` in the cache: a fetch for a published file,
    else ``reid models add`` with the file the user brings."""
    return f"run `reid models fetch {name}`" if published else f"run `reid models add {name} FILE`"


def model_file(name: str, suffix: str, published: bool = True) -> Path:
    """The one file ending in ``suffix`` (".onnx", ".xml") among :func:`model_files`
    of ``name``; ModelError naming the command that puts it there when it is absent."""
    found = [p for p in model_files(name) or () if p.suffix == suffix]
    if len(found) != 1:
        raise ModelError(f"model {name} is not in the cache; {how_to_get(name, published)}")
    return found[0]


def has_model_file(name: str, suffix: str) -> bool:
    """True when :func:`model_file` finds ``name``'s file without raising."""
    return len([p for p in model_files(name) or () if p.suffix == suffix]) == 1
