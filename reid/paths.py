"""Paths: how a model or gallery the user names becomes a folder, checks of output paths
made before any work (so a run never fails at its end because of where it was told to
write), and new files opened without following links."""

from __future__ import annotations

import hashlib
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


def has_folder_part(spec: str | Path) -> bool:
    """True when the user wrote a path (``./x``, ``../x``, ``a/b``, ``/abs``, ``~/x``), not a bare name.

    Path("./x") normalizes to "x", so the text as written is what counts.
    """
    text = os.fspath(spec)
    separators = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return any(sep in text for sep in separators) or text in (".", "..") or text.startswith("~")


def resolve_named(spec: str | Path, home: Path) -> Path:
    """A path as written when it has a folder part; a bare name is ``./NAME`` when that
    exists, else ``home/NAME`` (``models/`` or ``galleries/``)."""
    if has_folder_part(spec):
        return Path(os.path.expanduser(os.fspath(spec)))
    path = Path(spec)
    if path.exists():
        return path
    return home / path


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes as 64 hex digits, read in chunks (files may be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()
