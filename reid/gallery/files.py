"""The gallery's index files: a FAISS snapshot plus append-only segments, all checksummed.

A batch of new items is written as a small segment (ids and vectors) instead of rewriting
the whole index, so enrolling one person into a million-item gallery costs that person's
bytes.  Segments are folded into a new snapshot once they amount to a fair share of it.
Every file is written to a temporary name, fsynced and renamed, and the database records
its size and SHA-256, so a truncated or altered file is caught when the gallery opens.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import struct
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from reid.errors import GalleryError

SEGMENT_MAGIC = b"REIDSEG1"
SEGMENT_HEADER = struct.Struct("<8sQQ")


@dataclass(frozen=True)
class FileRecord:
    """A file of the gallery as the database remembers it."""

    name: str
    size: int
    sha256: str


def new_name(prefix: str, generation: int, suffix: str) -> str:
    # A random token keeps a file from an interrupted commit from ever being mistaken for,
    # or overwriting, the file of a later commit with the same generation number.
    return f"{prefix}-{generation:08d}-{secrets.token_hex(4)}{suffix}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fsync_dir(folder: Path) -> None:
    """Make a rename inside ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    """Write ``payload`` so that readers see the old file or the new one, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp(path)
    try:
        tmp.write_bytes(payload)
        _finish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _temp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _finish(tmp: Path, path: Path) -> FileRecord:
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    record = FileRecord(path.name, tmp.stat().st_size, _sha256(tmp))
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return record


def write_snapshot(index: faiss.Index, path: Path) -> FileRecord:
    tmp = _temp(path)
    try:
        faiss.write_index(index, str(tmp))
        return _finish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_segment(path: Path, ids: np.ndarray, vectors: np.ndarray) -> FileRecord:
    tmp = _temp(path)
    ids = np.ascontiguousarray(ids, dtype="<i8")
    vectors = np.ascontiguousarray(vectors, dtype="<f4")
    try:
        with open(tmp, "wb") as handle:
            handle.write(SEGMENT_HEADER.pack(SEGMENT_MAGIC, len(ids), vectors.shape[1]))
            handle.write(ids.tobytes())
            handle.write(vectors.tobytes())
        return _finish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def verify_file(path: Path, record: FileRecord) -> None:
    """Raise GalleryError unless ``path`` has the size and checksum the database recorded."""
    if not path.is_file():
        raise GalleryError(f"{path}: index file is missing")
    size = path.stat().st_size
    if size != record.size:
        raise GalleryError(f"{path}: index file is truncated or altered ({size} bytes, expected {record.size})")
    if _sha256(path) != record.sha256:
        raise GalleryError(f"{path}: index file is corrupt (checksum does not match the database)")


def read_snapshot(path: Path, record: FileRecord) -> faiss.IndexIDMap2:
    verify_file(path, record)
    try:
        index = faiss.read_index(str(path))
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
        raise GalleryError(f"{path}: not a readable FAISS index ({first})") from exc
    if not isinstance(index, faiss.IndexIDMap2):
        raise GalleryError(f"{path}: FAISS index is a {type(index).__name__}, expected an IndexIDMap2")
    return index


def read_segment(path: Path, record: FileRecord, dim: int) -> tuple[np.ndarray, np.ndarray]:
    verify_file(path, record)
    payload = path.read_bytes()
    magic, count, seg_dim = SEGMENT_HEADER.unpack_from(payload)
    expected = SEGMENT_HEADER.size + count * 8 + count * seg_dim * 4
    if magic != SEGMENT_MAGIC or seg_dim != dim or len(payload) != expected:
        raise GalleryError(f"{path}: not a gallery segment of dimension {dim}")
    start = SEGMENT_HEADER.size
    ids = np.frombuffer(payload, dtype="<i8", count=count, offset=start)
    vectors = np.frombuffer(payload, dtype="<f4", count=count * dim, offset=start + count * 8)
    return ids.astype(np.int64), vectors.reshape(count, dim).astype(np.float32)
