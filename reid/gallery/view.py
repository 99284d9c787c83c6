"""The loaded view of a FAISS gallery: its shards in memory, their items' identity labels
and one searcher over them.

Search (:mod:`reid.gallery.search`), the self-check (:mod:`reid.gallery.check`) and
calibration only read a :class:`LoadedView`.  The store changes it only after a commit:
:meth:`LoadedView.extend` for an added batch, :meth:`LoadedView.use` for rewritten files,
:meth:`LoadedView.catch_up` for what other processes committed.  :func:`load_view` reads
one from the files the catalogue names and verifies them against each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from reid.errors import GalleryError
from reid.gallery.catalogue import Catalogue, DiskState
from reid.gallery.check import verify_ids
from reid.gallery.device import GPU_MAX_K, GpuSearch
from reid.gallery.files import FileRecord, read_segment, read_snapshot, read_vectors
from reid.gallery.index import IndexSpec, apply_search_params, search_settings
from reid.gallery.search import IdentityLabels, rerank
from reid.gallery.shards import Shard, ShardRecord, search_index


@dataclass
class Layout:
    """The shards in memory and the files they were last written to."""

    sealed: list[tuple[Shard, ShardRecord]]
    active: Shard
    active_record: ShardRecord
    template: FileRecord | None = None

    def shards(self) -> list[Shard]:
        return [shard for shard, _ in self.sealed] + [self.active]

    def names(self) -> set[str]:
        named = {name for _, record in self.sealed for name in record.names()}
        named |= set(self.active_record.names())
        return named | ({self.template.name} if self.template else set())


class LoadedView:
    """One committed state of a FAISS gallery in memory (:class:`reid.gallery.base.GalleryView`).

    Embeddings are float32 unit rows of ``dim`` columns; similarities are inner products.
    """

    def __init__(
        self,
        folder: Path,
        dim: int,
        spec: IndexSpec,
        layout: Layout,
        labels: IdentityLabels,
        generation: int,
        segments: list[int],
        gpu: GpuSearch | None,
    ) -> None:
        self.folder, self.dim, self.spec, self.labels, self._gpu = folder, dim, spec, labels, gpu
        self._template: tuple[str, faiss.Index] | None = None
        self.use(layout, generation, spec, segments)

    def __len__(self) -> int:
        return sum(len(shard) for shard in self.layout.shards())

    @property
    def kind(self) -> str:
        """What the index really is ("flat" while an IVF gallery is too small to train);
        kinds joined by "+" when shards differ."""
        return "+".join(dict.fromkeys(shard.kind for shard in self.layout.shards()))

    def nearest(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Similarities (Q, k) float32 and item ids (Q, k) int64 (-1 pads) of the ``k``
        nearest items of ``queries`` (Q, D); IVF-PQ candidates re-ranked exactly."""
        shards = self.layout.shards()
        refine = self.spec.refine if any(not s.exact for s in shards) else 0
        fetch = min(k * refine, len(self)) if refine else k
        searcher = self._searcher
        if self._gpu is not None and fetch <= GPU_MAX_K:
            copies = self._gpu.copies([shard.index for shard in shards])
            indexes = [copy if copy is not None else s.index for copy, s in zip(copies, shards, strict=True)]
            searcher = search_index(indexes, self.dim, threaded=True)
        with search_settings(len(queries)):
            sims, ids = searcher.search(queries, fetch)
        return rerank(queries, ids, k, self.originals) if refine else (sims, ids)

    def originals(self, ids: np.ndarray) -> np.ndarray:
        """Stored embeddings (N, D) float32 of ``ids``, from whichever shards hold them."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty((len(ids), self.dim), np.float32)
        left = np.ones(len(ids), bool)
        for shard in self.layout.shards():
            mine = np.flatnonzero(left & shard.holds(ids))
            if len(mine):
                out[mine] = shard.originals(ids[mine])
                left[mine] = False
        if left.any():
            raise GalleryError(f"{self.folder}: no item {int(ids[left][0])} in the gallery")
        return out

    def chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, embeddings) of every item, a chunk at a time."""
        return (chunk for shard in self.layout.shards() for chunk in shard.chunks())

    def device(self) -> str:
        if self._gpu is None:
            return "cpu"
        on_gpu = sum(copy is not None for copy in self._gpu.copies([s.index for s in self.layout.shards()]))
        return f"gpu ({on_gpu} of {len(self.layout.sealed) + 1} shards, {self._gpu.devices} GPUs)"

    def template_index(self) -> faiss.Index | None:
        """The trained, empty index new shards start from (read from its file when first needed)."""
        record = self.layout.template
        if record is None:
            return None
        if self._template is None or self._template[0] != record.name:
            self._template = (record.name, read_snapshot(self.folder / record.name, record))
        return self._template[1]

    def keep_template(self, name: str, index: faiss.Index) -> None:
        self._template = (name, index)

    # ----------------------------------------------------------------- after a commit

    def use(self, layout: Layout, generation: int, spec: IndexSpec, segments: list[int] | None = None) -> None:
        """The commit named ``layout``'s files (and dropped the segments unless ``segments``)."""
        self.layout, self.generation, self.spec, self.segments = layout, generation, spec, segments or []
        for shard in layout.shards():
            apply_search_params(shard.index, spec)
        self._searcher = search_index([shard.index for shard in layout.shards()], self.dim)

    def extend(
        self, ids: np.ndarray, vectors: np.ndarray, labels: list[tuple[int, str]], seq: int, generation: int,
        originals: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        """The commit ``generation`` added items ``ids`` with ``vectors`` in segment ``seq``;
        ``originals`` is where an IVF-PQ shard reads their embeddings later."""
        self.layout.active.add(ids, vectors, originals)
        if isinstance(self._searcher, faiss.IndexShards):
            self._searcher.syncWithSubIndexes()
        if self._gpu is not None:
            self._gpu.added(self.layout.active.index, ids, vectors)
        self.labels.extend(labels)
        self.segments.append(seq)
        self.generation = generation

    def catch_up(self, state: DiskState, catalogue: Catalogue) -> bool:
        """Add the segments and labels ``state`` holds beyond this view; False when its shard
        files changed instead (then a new view must be loaded)."""
        seqs = [seq for seq, _, _ in state.segments]
        same_files = state.active.index.name == self.layout.active_record.index.name and [
            r.index.name for r in state.sealed
        ] == [r.index.name for _, r in self.layout.sealed]
        if not same_files or seqs[: len(self.segments)] != self.segments:
            return False
        last = int(self.labels.ids[-1]) if len(self.labels.ids) else 0
        for seq, record, _ in state.segments[len(self.segments) :]:
            ids, vectors = read_segment(self.folder / record.name, record, self.dim)
            self.extend(ids, vectors, [], seq, state.generation)
        for rows in catalogue.label_rows(after=last):
            self.labels.extend(rows)
        self.generation = state.generation
        return len(self) == len(self.labels.ids)


def read_shard(folder: Path, record: ShardRecord, spec: IndexSpec, dim: int) -> Shard:
    """The shard ``record`` names, its files checked against the record and each other."""
    path = folder / record.index.name
    index = read_snapshot(path, record.index)
    if index.d != dim:
        raise GalleryError(f"{path}: index dimension {index.d}, gallery says {dim}")
    stored = None
    if record.vectors is not None:
        stored = read_vectors(folder / record.vectors.name, record.vectors, dim)
    shard = Shard(index, stored)
    if not shard.exact and stored is None:
        raise GalleryError(f"{path}: IVF-PQ index without its vector file in the database")
    if stored is not None and not np.array_equal(stored.ids, shard.ids):
        raise GalleryError(f"{stored.path}: vector file holds other items than its index {path.name}")
    apply_search_params(index, spec)
    return shard


def load_view(
    folder: Path, dim: int, state: DiskState, catalogue: Catalogue, gpu: GpuSearch | None, known: LoadedView | None
) -> LoadedView:
    """The view of ``state``: shards, segments and labels read from disk and verified against
    each other (index ids == item ids).  Sealed shards of ``known`` are kept: their files
    never change under one name."""
    kept = {} if known is None else {record.index.name: shard for shard, record in known.layout.sealed}
    sealed = [(kept.get(r.index.name) or read_shard(folder, r, state.spec, dim), r) for r in state.sealed]
    active = read_shard(folder, state.active, state.spec, dim)
    for _, record, _ in state.segments:
        active.add(*read_segment(folder / record.name, record, dim))
    labels = IdentityLabels()
    for rows in catalogue.label_rows():
        labels.extend(rows)
    layout = Layout(sealed, active, state.active, state.template)
    verify_ids(folder, layout.shards(), labels.ids)
    segments = [seq for seq, _, _ in state.segments]
    return LoadedView(folder, dim, state.spec, layout, labels, state.generation, segments, gpu)
