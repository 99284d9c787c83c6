"""Paths: how a model or gallery the user names becomes a folder, checks of output paths
made before any work (so a run never fails at its end because of where it was told to
write), new files opened without following links, and the one atomic write.

An atomic write (:func:`write_atomic`, :func:`write_bytes_atomic`, :func:`replaced_atomically`)
puts the content in ``.NAME.tmp-PID`` beside the target, fsyncs it, renames it over the
target and fsyncs the folder: readers see the old file or the new one, never a mix, and
after a crash the rename has happened or not.  A temporary left by a process that died
is removed by :func:`remove_stale_temporaries`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


def make_own_folder(folder: Path) -> Path:
    """``folder`` made when missing and returned; an existing one is taken only when it is a
    real folder, never a link, so that files written inside cannot land elsewhere.

    Raises:
        ConfigError: a link or a file is at ``folder``; one line naming it.
    """
    folder = Path(folder)
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass
    if folder.is_symlink() or not folder.is_dir():
        raise ConfigError(f"{folder}: a link or a file is here, where a folder is to be written; remove it or choose another folder")
    return folder


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


TEMP_MARK = ".tmp-"


def temporary_path(path: Path) -> Path:
    """Where an atomic write of ``path`` puts its content first: ``.NAME.tmp-PID`` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}{TEMP_MARK}{os.getpid()}")


def fsync_dir(folder: Path) -> None:
    """Make a rename inside ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replaced_atomically(path: Path) -> Iterator[Path]:
    """Yield the temporary path (:func:`temporary_path`) to write ``path``'s new content to;
    on a clean exit it is fsynced and renamed over ``path``, on any error removed and
    ``path`` left as it was.

    For writers that need a file name (an exporter, a library that saves by path); code
    that writes bytes itself uses :func:`write_atomic`, which also refuses links.  An
    OSError is raised again naming ``path``, not the hidden temporary.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        # Name the file being written, not its hidden temporary (a full disk has no name).
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def write_atomic(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through ``write(handle)`` so that readers see the old file or the new one.

    The temporary is created anew, never through a link (:func:`open_new`), so a link planted
    at its name cannot redirect the write.  Raises what ``write`` raises (``path`` unchanged),
    and OSError naming ``path``.
    """
    with replaced_atomically(path) as tmp, open_new(tmp) as handle:
        write(handle)


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` atomically (:func:`write_atomic`)."""
    write_atomic(path, lambda handle: handle.write(payload))


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the ``.NAME.tmp-PID`` files an atomic write left in ``folder`` when its process
    died mid-write (PID no longer running); returns the paths deleted."""
    removed = []
    for path in Path(folder).glob(f".*{TEMP_MARK}*"):
        pid = path.name.rpartition(TEMP_MARK)[2]
        if pid.isdigit() and not process_running(int(pid)) and path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def process_running(pid: int) -> bool:
    """True when a process ``pid`` exists (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
