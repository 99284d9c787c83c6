"""Checks on output paths, made before any work so that a run never fails at its end
because of where it was told to write."""

from __future__ import annotations

from pathlib import Path

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
