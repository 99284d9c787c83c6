"""A file lock (``fcntl.flock``) that serializes gallery writers across processes.

Writers hold it exclusively while they commit a batch; readers hold it shared while they
load the index and database, so that no writer deletes a file between the two reads.
``flock`` locks belong to the open file, so they also exclude two handles in one process,
and the kernel drops them when a process dies, so a killed writer never leaves a gallery
locked.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reid.errors import GalleryBusyError, GalleryError

LOCK_FILE = ".lock"


@contextmanager
def gallery_lock(folder: Path, exclusive: bool = True, timeout: float = 120.0) -> Iterator[None]:
    """Hold the gallery's lock for the ``with`` block; wait at most ``timeout`` seconds."""
    path = Path(folder) / LOCK_FILE
    try:
        # Never through a link: a link planted as the lock would make every opening create
        # or lock its target, wherever that is.
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except PermissionError:
            # A read-only gallery can still be locked shared through a read-only handle.
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if path.is_symlink():
            raise GalleryError(f"{path}: the gallery lock is a link; it must be a plain file in the gallery") from exc
        raise GalleryError(f"{path}: cannot open the gallery lock ({exc.strerror or exc})") from exc
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise GalleryBusyError(
                        f"{folder}: gallery is locked by another process (waited {timeout:g} s)"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)
