"""The gallery's files: FAISS snapshots, append-only segments and vector files, all checksummed.

A batch of new items is written as a small segment (ids and vectors) instead of rewriting
the whole index, so enrolling one person into a million-item gallery costs that person's
bytes.  Segments are folded into a new snapshot once they amount to a fair share of it.
Every file is written to a temporary name, fsynced and renamed, and the database records
its size and SHA-256, so a truncated or altered file is caught when the gallery opens.

An IVF-PQ index keeps codes, not embeddings, so beside each IVF-PQ snapshot lies a vector
file: the embeddings of its items as float16, sorted by id, memory-mapped when read.  Half
the bytes of float32 (1 KiB an item at 512 dimensions) and within 2**-11 relatively of
each value, far below the noise between two images of one person, it lets search re-rank
the codes' candidates exactly and lets export, reindex and recall checks use the
embeddings without holding a large gallery's float32 vectors in memory.
"""

from __future__ import annotations

import re
import secrets
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import faiss
import numpy as np

from reid.errors import GalleryError
from reid.paths import file_sha256, write_atomic
from reid.text import whole_number

SEGMENT_MAGIC = b"REIDSEG1"
SEGMENT_HEADER = struct.Struct("<8sQQ")
VECTORS_MAGIC = b"REIDVEC1"
VECTORS_HEADER = struct.Struct("<8sQQ")
VECTORS_DTYPE = np.dtype("<f2")


# The only file names a gallery writes: PREFIX-GENERATION-TOKEN.SUFFIX.  A gallery folder
# may come from someone else; a name read from its database that is anything else (a path
# such as ../x or /x, a link name) must never be opened, written or deleted.
FILE_NAME = re.compile(r"^(?:index|seg|vec|template)-\d{8}-[0-9a-f]{8}\.(?:faiss|bin|f16)$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class FileRecord:
    """A file of the gallery as the database remembers it."""

    name: str
    size: int
    sha256: str

    @classmethod
    def from_db(cls, name: Any, size: Any, sha256: Any) -> FileRecord:
        """A record read from a database, checked: GalleryError ("gallery corrupt or
        tampered") unless ``name`` is a plain file name of the gallery's own pattern,
        ``size`` a non-negative whole number and ``sha256`` 64 hex digits, so that no
        record read from a database can point outside its folder."""
        if not isinstance(name, str) or not FILE_NAME.match(name):
            raise GalleryError(f"gallery corrupt or tampered: file name {name!r} is not a gallery file name")
        if isinstance(size, bool) or not isinstance(size, (int, str)) or whole_number(str(size), 0) is None:
            raise GalleryError(f"gallery corrupt or tampered: size {size!r} of {name} is not a byte count")
        if not isinstance(sha256, str) or not SHA256_HEX.match(sha256):
            raise GalleryError(f"gallery corrupt or tampered: checksum of {name} is not a SHA-256")
        return cls(name, int(size), sha256)


def new_name(prefix: str, generation: int, suffix: str) -> str:
    # A random token keeps a file from an interrupted commit from ever being mistaken for,
    # or overwriting, the file of a later commit with the same generation number.
    return f"{prefix}-{generation:08d}-{secrets.token_hex(4)}{suffix}"


def write_file_atomic(path: Path, write: Callable[[BinaryIO], None]) -> FileRecord:
    """Write a gallery file atomically through ``write(handle)`` (:func:`reid.paths.write_atomic`)
    and return its record (name, size in bytes, SHA-256) for the database.

    The checksum is read back from the file as written; the gallery lock keeps every other
    writer away until the commit that records it.
    """
    path = Path(path)
    write_atomic(path, write)
    return FileRecord(path.name, path.stat().st_size, file_sha256(path))


def write_snapshot(index: faiss.Index, path: Path) -> FileRecord:
    def write(handle: BinaryIO) -> None:
        try:
            # FAISS writes through our handle: given a path it would follow a link planted there.
            faiss.write_index(index, faiss.PyCallbackIOWriter(handle.write))
        except RuntimeError as exc:
            # FAISS reports a failed write (a full disk, a read-only folder) as RuntimeError.
            # Its message is a C++ assertion; the part after "failed:" is what the user can act on.
            text = " ".join(str(exc).split())
            detail = text.rsplit("failed: ", 1)[-1] if text else "write failed"
            raise GalleryError(f"{path}: cannot write the index ({detail[:160]}); the gallery is unchanged") from None

    return write_file_atomic(path, write)


def write_segment(path: Path, ids: np.ndarray, vectors: np.ndarray) -> FileRecord:
    ids = np.ascontiguousarray(ids, dtype="<i8")
    vectors = np.ascontiguousarray(vectors, dtype="<f4")

    def write(handle: BinaryIO) -> None:
        handle.write(SEGMENT_HEADER.pack(SEGMENT_MAGIC, len(ids), vectors.shape[1]))
        handle.write(ids.tobytes())
        handle.write(vectors.tobytes())

    return write_file_atomic(path, write)


def verify_file(path: Path, record: FileRecord) -> None:
    """Raise GalleryError unless ``path`` has the size and checksum the database recorded."""
    if not path.is_file():
        raise GalleryError(f"{path}: gallery file is missing")
    size = path.stat().st_size
    if size != record.size:
        raise GalleryError(f"{path}: gallery file is truncated or altered ({size} bytes, expected {record.size})")
    try:
        digest = file_sha256(path)
    except OSError as exc:
        raise GalleryError(f"{path}: cannot read gallery file ({exc.strerror or exc})") from None
    if digest != record.sha256:
        raise GalleryError(f"{path}: gallery file is corrupt (checksum does not match the database)")


def read_snapshot(path: Path, record: FileRecord) -> faiss.Index:
    verify_file(path, record)
    try:
        index = faiss.read_index(str(path))
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
        raise GalleryError(f"{path}: not a readable FAISS index ({first})") from exc
    if not isinstance(index, (faiss.IndexIDMap2, faiss.IndexIVFPQ)):
        raise GalleryError(f"{path}: FAISS index is a {type(index).__name__}, expected an IndexIDMap2 or an IndexIVFPQ")
    return index


def read_segment(path: Path, record: FileRecord, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of a segment; the vectors stay memory-mapped, as IVF-PQ keeps them until compaction."""
    verify_file(path, record)
    count = _check_header(path, SEGMENT_HEADER, SEGMENT_MAGIC, dim, 4, "gallery segment")
    start = SEGMENT_HEADER.size
    ids = np.fromfile(path, dtype="<i8", count=count, offset=start).astype(np.int64)
    vectors = _map(path, np.dtype("<f4"), start + count * 8, count, dim)
    return ids, vectors


@dataclass
class VectorFile:
    """The float16 embeddings of an IVF-PQ shard: ``ids`` ascending, ``rows`` memory-mapped."""

    path: Path
    ids: np.ndarray
    rows: np.ndarray

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Row of each of ``ids``, or -1 where the file does not hold it."""
        pos = np.searchsorted(self.ids, ids)
        pos = np.clip(pos, 0, max(len(self.ids) - 1, 0))
        found = (self.ids[pos] == ids) if len(self.ids) else np.zeros(len(ids), bool)
        return np.where(found, pos, -1)


def write_vectors(path: Path, ids: np.ndarray, dim: int, chunks: Iterable[np.ndarray]) -> FileRecord:
    """Write the embeddings of ``ids`` (ascending) from ``chunks`` of rows in the same order."""
    ids = np.ascontiguousarray(ids, dtype="<i8")

    def write(handle: BinaryIO) -> None:
        handle.write(VECTORS_HEADER.pack(VECTORS_MAGIC, len(ids), dim))
        handle.write(ids.tobytes())
        written = 0
        for chunk in chunks:
            handle.write(np.ascontiguousarray(chunk, dtype=VECTORS_DTYPE).tobytes())
            written += len(chunk)
        if written != len(ids):
            raise GalleryError(f"{path}: {written} vectors written for {len(ids)} ids")

    return write_file_atomic(path, write)


def open_vectors(path: Path, dim: int) -> VectorFile:
    """Map a vector file this process has just written (and so need not verify)."""
    count = _check_header(path, VECTORS_HEADER, VECTORS_MAGIC, dim, VECTORS_DTYPE.itemsize, "gallery vector file")
    start = VECTORS_HEADER.size
    ids = np.fromfile(path, dtype="<i8", count=count, offset=start).astype(np.int64)
    if count > 1 and not (np.diff(ids) > 0).all():
        raise GalleryError(f"{path}: vector file ids are not ascending")
    return VectorFile(Path(path), ids, _map(path, VECTORS_DTYPE, start + count * 8, count, dim))


def read_vectors(path: Path, record: FileRecord, dim: int) -> VectorFile:
    verify_file(path, record)
    return open_vectors(path, dim)


def _check_header(path: Path, header: struct.Struct, magic: bytes, dim: int, itemsize: int, what: str) -> int:
    with open(path, "rb") as handle:
        raw = handle.read(header.size)
    size = path.stat().st_size
    if len(raw) < header.size:
        raise GalleryError(f"{path}: not a {what} of dimension {dim}")
    found, count, file_dim = header.unpack(raw)
    if found != magic or file_dim != dim or size != header.size + count * 8 + count * dim * itemsize:
        raise GalleryError(f"{path}: not a {what} of dimension {dim}")
    return int(count)


def _map(path: Path, dtype: np.dtype, offset: int, count: int, dim: int) -> np.ndarray:
    if count == 0:
        return np.zeros((0, dim), dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(count, dim))
