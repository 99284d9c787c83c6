"""A gallery's shards: index files searched together, each knowing the embeddings it holds.

A gallery is one or more shards.  The last, *active* shard takes new items (through
segments, see :mod:`reid.gallery.files`) and is rewritten when they are folded in; once it
holds ``shard_size`` items it is *sealed*, and a new active shard starts from the trained,
empty *template* index (so growth costs adding, never retraining or rewriting sealed
files).  Searches go to all shards at once through ``faiss.IndexShards`` with the item ids
kept as they are (``successive_ids=False``), since they are SQLite row ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

from reid.errors import GalleryError
from reid.gallery.files import (
    FileRecord,
    VectorFile,
    new_name,
    open_vectors,
    write_snapshot,
    write_vectors,
)
from reid.gallery.index import (
    IndexSpec,
    TrainingPlan,
    add_chunked,
    apply_search_params,
    built_kind,
    index_ids,
    new_index,
    stores_vectors,
    trained_index,
)

CHUNK = 65_536  # rows read, converted and added at a time: 128 MiB of float32 at 512 dimensions
Fetch = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ShardRecord:
    """A shard's files as the database names them: its index, and for IVF-PQ its vector file."""

    index: FileRecord
    count: int
    vectors: FileRecord | None = None

    def names(self) -> list[str]:
        return [self.index.name] + ([self.vectors.name] if self.vectors else [])


class Shard:
    """One index in memory, with the sorted ids it holds and, for IVF-PQ, its embeddings.

    IVF-PQ embeddings come from the shard's vector file and, for items added since that
    file was written, from their (memory-mapped) segments.
    """

    def __init__(self, index: faiss.Index, stored: VectorFile | None = None) -> None:
        self.index = index
        self.ids = np.sort(index_ids(index))
        self.stored = stored
        self._share_ids()
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        # (ids, which pending batch, row in it), sorted by id; rebuilt after an add
        self._pending_index: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def kind(self) -> str:
        return built_kind(self.index)

    @property
    def exact(self) -> bool:
        """Whether the index itself gives back the embeddings (all kinds but IVF-PQ)."""
        return stores_vectors(self.index)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    def add(self, ids: np.ndarray, vectors: np.ndarray, originals: np.ndarray | None = None) -> None:
        """Add items; ``originals`` (default ``vectors``) is where IVF-PQ finds their embeddings later."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        add_chunked(self.index, ids, vectors)
        ascending = not len(self.ids) or not len(ids) or ids[0] > self.ids[-1]
        self.ids = np.concatenate([self.ids, ids]) if ascending else np.sort(np.concatenate([self.ids, ids]))
        if not self.exact:
            self._pending.append((ids, vectors if originals is None else originals))
            self._pending_index = None

    def remove(self, ids: np.ndarray) -> None:
        """Remove items in place (flat and IVF-PQ only; see :func:`reid.gallery.index.supports_remove`)."""
        self.index.remove_ids(np.ascontiguousarray(ids, dtype=np.int64))
        self.ids = self.ids[~np.isin(self.ids, ids)]

    def holds(self, ids: np.ndarray) -> np.ndarray:
        """Mask of the ``ids`` this shard holds."""
        if not len(self.ids):
            return np.zeros(len(ids), bool)
        pos = np.clip(np.searchsorted(self.ids, ids), 0, len(self.ids) - 1)
        return self.ids[pos] == ids

    def attach(self, stored: VectorFile) -> None:
        """The vector file just written for this shard now holds every embedding."""
        self.stored = stored
        self._pending, self._pending_index = [], None
        self._share_ids()

    def _share_ids(self) -> None:
        # A sealed shard's ids and its vector file's are the same array: keep one copy.
        if self.stored is not None and np.array_equal(self.ids, self.stored.ids):
            self.ids = self.stored.ids

    def originals(self, ids: np.ndarray) -> np.ndarray:
        """The embeddings (float32) of ``ids``, all of which this shard holds."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if self.exact:
            if not len(ids):
                return np.zeros((0, self.dim), np.float32)
            return self.index.reconstruct_batch(ids)
        out = np.empty((len(ids), self.dim), np.float32)
        rows = self.stored.positions(ids) if self.stored is not None else np.full(len(ids), -1)
        found = np.flatnonzero(rows >= 0)
        if len(found):
            # Sorted rows read the memory-mapped file front to back.
            order = np.argsort(rows[found], kind="stable")
            out[found[order]] = self.stored.rows[rows[found[order]]]
        missing = np.flatnonzero(rows < 0)
        if len(missing):
            out[missing] = self._from_pending(ids[missing])
        return out

    def chunks(self, size: int = CHUNK) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, embeddings) of every item, ascending by id, ``size`` at a time."""
        for start in range(0, len(self.ids), size):
            ids = self.ids[start : start + size]
            yield ids, self.originals(ids)

    def _from_pending(self, ids: np.ndarray) -> np.ndarray:
        if self._pending_index is None:
            empty = np.zeros(0, np.int64)
            all_ids = np.concatenate([empty] + [p[0] for p in self._pending])
            batch = np.concatenate([empty] + [np.full(len(p[0]), n) for n, p in enumerate(self._pending)])
            row = np.concatenate([empty] + [np.arange(len(p[0])) for p in self._pending])
            order = np.argsort(all_ids, kind="stable")
            self._pending_index = (all_ids[order], batch[order], row[order])
        sorted_ids, batch, row = self._pending_index
        pos = np.clip(np.searchsorted(sorted_ids, ids), 0, max(len(sorted_ids) - 1, 0))
        if not len(sorted_ids) or not np.array_equal(sorted_ids[pos], ids):
            raise GalleryError(f"{self.stored.path if self.stored else 'shard'}: some items have no stored embedding")
        out = np.empty((len(ids), self.dim), np.float32)
        for n, (_, vectors) in enumerate(self._pending):
            mine = np.flatnonzero(batch[pos] == n)
            if len(mine):
                out[mine] = vectors[row[pos[mine]]]
        return out


@dataclass
class Written:
    """A shard whose files were just written (named by no commit yet)."""

    shard: Shard
    record: ShardRecord
    stored: VectorFile | None = None
    paths: list[Path] = field(default_factory=list)


def write_shard(shard: Shard, folder: Path, generation: int) -> Written:
    """Write ``shard``'s index and, for IVF-PQ, its vector file; attach that file after the commit."""
    paths: list[Path] = []
    try:
        vectors, stored = None, None
        if not shard.exact:
            path = folder / new_name("vec", generation, ".f16")
            paths.append(path)
            vectors = write_vectors(path, shard.ids, shard.dim, (v for _, v in shard.chunks()))
            stored = open_vectors(path, shard.dim)
        path = folder / new_name("index", generation, ".faiss")
        paths.append(path)
        record = ShardRecord(write_snapshot(shard.index, path), len(shard), vectors)
    except BaseException:
        for path in paths:
            path.unlink(missing_ok=True)
        raise
    return Written(shard, record, stored, paths)


def train_template(spec: IndexSpec, dim: int, plan: TrainingPlan, ids: np.ndarray, fetch: Fetch) -> faiss.Index:
    """An empty index of ``spec``'s trained kind, trained on ``plan.sample`` of ``ids`` drawn at random."""
    rows = np.sort(np.random.default_rng(0).choice(len(ids), plan.sample, replace=False))
    return trained_index(spec, dim, plan.nlist, _fetch_chunked(fetch, ids[rows], dim))


def build_shard(
    spec: IndexSpec,
    dim: int,
    ids: np.ndarray,
    fetch: Fetch,
    folder: Path,
    generation: int,
    template: faiss.Index | None = None,
) -> Written:
    """A shard of ``ids`` (ascending) whose embeddings ``fetch`` gives, written to ``folder``.

    It starts from a copy of the trained ``template``, or else from an untrained index
    (flat, or HNSW).  An IVF-PQ shard writes its vector file first and reads its
    embeddings back from there, so the source may be released once it is written.
    """
    index = faiss.clone_index(template) if template is not None else new_index(spec, dim)
    apply_search_params(index, spec)
    paths: list[Path] = []
    try:
        stored, vectors = None, None
        if stores_vectors(index):
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                index.add_with_ids(fetch(chunk), chunk)
        else:
            path = folder / new_name("vec", generation, ".f16")
            paths.append(path)
            vectors = write_vectors(path, ids, dim, (fetch(ids[s : s + CHUNK]) for s in range(0, len(ids), CHUNK)))
            stored = open_vectors(path, dim)
            for start in range(0, len(ids), CHUNK):
                rows = np.asarray(stored.rows[start : start + CHUNK], dtype=np.float32)
                index.add_with_ids(rows, stored.ids[start : start + CHUNK])
        path = folder / new_name("index", generation, ".faiss")
        paths.append(path)
        record = ShardRecord(write_snapshot(index, path), int(index.ntotal), vectors)
    except BaseException:
        for path in paths:
            path.unlink(missing_ok=True)
        raise
    return Written(Shard(index, stored), record, stored, paths)


def _fetch_chunked(fetch: Fetch, ids: np.ndarray, dim: int) -> np.ndarray:
    out = np.empty((len(ids), dim), np.float32)
    for start in range(0, len(ids), CHUNK):
        out[start : start + CHUNK] = fetch(ids[start : start + CHUNK])
    return out


def search_index(indexes: list[faiss.Index], dim: int, threaded: bool = False) -> faiss.Index:
    """One index searching all of ``indexes``: the index itself, or an ``IndexShards`` of them."""
    if len(indexes) == 1:
        return indexes[0]
    shards = faiss.IndexShards(dim, threaded, False)
    for index in indexes:
        shards.add_shard(index)
    return shards
