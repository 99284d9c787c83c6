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

import ctypes
import errno
import glob
import hashlib
import json
import os
import shutil
import zipfile
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from reid.errors import ConfigError
from reid.text import MAX_NUMBER_TEXT, whole_number


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


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes by a :mod:`hashlib` algorithm (``sha256``,
    ``sha384`` ...), read in chunks (files may be large)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes as 64 hex digits (:func:`file_digest`)."""
    return file_digest(path, "sha256")


def check_file_size(path: Path, limit: int, what: str) -> int:
    """The size of ``path`` in bytes, checked before it is read.

    Raises:
        ConfigError: ``path`` is larger than ``limit`` bytes; one line naming it, ``what``
            it was to be and both sizes.
        OSError: ``path`` cannot be looked at.
    """
    size = os.stat(path).st_size
    if size > limit:
        raise ConfigError(f"{path}: {size:,} bytes, more than the {limit:,} a {what} may have; not read")
    return size


def read_text_bounded(path: Path, limit: int, what: str) -> str:
    """``path``'s text (UTF-8), refused unread when larger than ``limit`` bytes.

    Raises:
        ConfigError: too large, or not UTF-8 text; one line naming it.
        OSError: it cannot be read (FileNotFoundError when missing).
    """
    check_file_size(path, limit, what)
    with open(path, "rb") as handle:
        payload = handle.read(limit + 1)
    if len(payload) > limit:
        raise ConfigError(f"{path}: more than the {limit:,} bytes a {what} may have; not read")
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: a {what} must be UTF-8 text") from None


# Nesting deeper than any file of this program writes; a deeper one is refused before
# Python's recursion limit is reached.
MAX_NESTING = 32


def nesting_depth(value: object, limit: int = MAX_NESTING) -> int:
    """How deep lists and mappings nest in ``value`` (a scalar: 0), counted without
    recursion and only up to ``limit + 1``."""
    deepest = 0
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth > limit:
            break
        pending.extend((child, depth + 1) for child in children)
    return deepest


def load_json_bounded(path: Path, limit: int, what: str) -> object:
    """The JSON value in ``path``, read only when at most ``limit`` bytes and nested at most
    :data:`MAX_NESTING` deep.

    Raises:
        ConfigError: too large, not UTF-8, not JSON, or nested too deep; one line naming it.
        OSError: it cannot be read.
    """
    return parse_json_bounded(read_text_bounded(path, limit, what), f"{path}", what)


class LongNumber(ValueError):
    """A JSON number longer than any this program writes (:data:`JSON_NUMBERS`)."""


def _json_int(text: str) -> int:
    value = whole_number(text)
    if value is None:
        raise LongNumber(text[:20])
    return value


def _json_float(text: str) -> float:
    if len(text) > MAX_NUMBER_TEXT:
        raise LongNumber(text[:20])
    return float(text)


# json.loads' number hooks that refuse a number over MAX_NUMBER_TEXT characters (LongNumber).
JSON_NUMBERS = {"parse_int": _json_int, "parse_float": _json_float}


def parse_json_bounded(text: str, where: str, what: str) -> object:
    """``text`` parsed as JSON, nested at most :data:`MAX_NESTING` deep, each number at most
    :data:`reid.text.MAX_NUMBER_TEXT` characters long (Python would spend quadratic time on,
    or refuse with its own error, an integer of thousands of digits); ``where`` names it in
    the one-line ConfigError raised for anything else."""
    try:
        value = json.loads(text, **JSON_NUMBERS)
    except RecursionError:
        raise ConfigError(f"{where}: a {what} nested deeper than {MAX_NESTING} levels; not read") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: {what} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except LongNumber as exc:
        raise ConfigError(f"{where}: {what} holds a number longer than {MAX_NUMBER_TEXT} characters ({exc}...); not read") from None
    if nesting_depth(value) > MAX_NESTING:
        raise ConfigError(f"{where}: a {what} nested deeper than {MAX_NESTING} levels; not read")
    return value


def check_archive(path: Path, limit: int, members: int, what: str) -> None:
    """Refuse a zip archive (PyTorch's checkpoint format) whose content would unpack to more
    than ``limit`` bytes or that holds more than ``members`` files, before anything is
    unpacked (a deflate bomb of a few MB decompresses to gigabytes); the file itself must
    be within ``limit`` too.  A file that is not a zip archive is only size-checked.

    Raises:
        ConfigError: one line naming ``path``, ``what`` it was to be and the bound exceeded.
    """
    check_file_size(path, limit, what)
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    if len(infos) > members:
        raise ConfigError(f"{path}: {len(infos):,} entries, more than the {members:,} a {what} may have; not read")
    unpacked = sum(info.file_size for info in infos)
    if unpacked > limit:
        raise ConfigError(f"{path}: unpacks to {unpacked:,} bytes, more than the {limit:,} a {what} may have; not read")


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
    # A leftover or a link planted at the temporary's name would be written through by name.
    tmp.unlink(missing_ok=True)
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


# Inside a folder being built beside the one it replaces, until it is complete: the mark
# that lets a later run know a leftover of a killed one as its own.
STAGING_MARK = ".reid-incomplete"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the system cannot, with nothing changed."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(error, os.strerror(error), str(b))


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


def remove_stale_staging(folder: Path) -> list[Path]:
    """Delete the ``.NAME.tmp-PID`` folders that :func:`replaced_folder` left beside
    ``folder`` when its process died (PID no longer running, still marked incomplete)."""
    folder = Path(folder)
    removed = []
    if not folder.parent.is_dir():
        return removed
    for path in folder.parent.glob(f".{glob.escape(folder.name)}{TEMP_MARK}*"):
        pid = path.name.rpartition(TEMP_MARK)[2]
        stale = (number := whole_number(pid, 1)) is not None and not process_running(number)
        if stale and path.is_dir() and not path.is_symlink() and (path / STAGING_MARK).is_file():
            shutil.rmtree(path)
            removed.append(path)
    return removed


@contextmanager
def replaced_folder(folder: Path, replaces: Collection[str]) -> Iterator[Path]:
    """Yield a new folder beside ``folder`` to write the files named in ``replaces`` into;
    on a clean exit it becomes ``folder`` in one step, so readers see the old folder or the
    new one whole, never a mix, also after a crash.

    The other entries of an existing ``folder`` are carried over (hard links where the file
    system allows, else copies).  On any error the new folder is removed and ``folder`` left
    as it was.  Leftovers of a killed run are removed first (:func:`remove_stale_staging`).
    """
    folder = Path(folder)
    remove_stale_staging(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage = folder.with_name(f".{folder.name}{TEMP_MARK}{os.getpid()}")
    os.mkdir(stage)
    try:
        (stage / STAGING_MARK).touch()
        if folder.is_dir():
            for entry in os.scandir(folder):
                if entry.name in replaces:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.copytree(entry.path, stage / entry.name, symlinks=True, copy_function=_link_or_copy)
                else:
                    _link_or_copy(entry.path, str(stage / entry.name))
        yield stage
        (stage / STAGING_MARK).unlink()
        fsync_dir(stage)
        if not folder.exists():
            os.rename(stage, folder)
        elif _exchange(stage, folder):
            shutil.rmtree(stage)
        else:
            previous = folder.with_name(f".{folder.name}.previous-{os.getpid()}")
            os.rename(folder, previous)
            os.rename(stage, folder)
            shutil.rmtree(previous)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    fsync_dir(folder.parent)


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the ``.NAME.tmp-PID`` files (``.NAME.tmp-PID.SUFFIX`` where a writer needs its
    suffix, as a video's codec does) that a write left in ``folder`` when its process died
    before renaming it (PID no longer running); returns the paths deleted."""
    removed = []
    for path in Path(folder).glob(f".*{TEMP_MARK}*"):
        pid = path.name.rpartition(TEMP_MARK)[2].split(".", 1)[0]
        if (number := whole_number(pid, 1)) is not None and not process_running(number) and path.is_file():
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
