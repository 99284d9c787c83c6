"""FAISS indexes of a gallery: exact (flat) or approximate (HNSW, IVF), all inner product.

Every index is an ``IndexIDMap2`` whose ids are the SQLite row ids of the items, so an item
found by FAISS is looked up in the database directly, and an item is removed by its id.
Embeddings are unit length, so the inner product is the cosine similarity and the
Euclidean distance reid reports everywhere is ``sqrt(2 - 2 * similarity)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any

import faiss
import numpy as np

from reid.errors import ConfigError

INDEX_KINDS = ("flat", "hnsw", "ivf")


@dataclass
class IndexSpec:
    """Which index a gallery keeps, and its build and search parameters.

    HNSW: ``hnsw_m`` links per node, ``ef_construction`` and ``ef_search`` beam widths.
    IVF: ``nlist`` inverted lists (0: about sqrt(items), re-chosen and retrained each time
    the gallery has grown enough to want twice as many), ``nprobe`` lists searched per
    query (0: about nlist / 32, at least 8).  IVF needs training data, so a gallery asking
    for IVF keeps an exact flat index until it holds ``train_min`` items.
    """

    kind: str = "flat"
    hnsw_m: int = 32
    ef_construction: int = 80
    ef_search: int = 128
    nlist: int = 0
    nprobe: int = 0
    train_min: int = 10_000

    def __post_init__(self) -> None:
        if self.kind not in INDEX_KINDS:
            raise ConfigError(f"unknown index {self.kind!r}; choose one of {', '.join(INDEX_KINDS)}")
        for name in ("hnsw_m", "ef_construction", "ef_search", "train_min"):
            if getattr(self, name) < 1:
                raise ConfigError(f"index option {name} must be at least 1, got {getattr(self, name)}")
        for name in ("nlist", "nprobe"):
            if getattr(self, name) < 0:
                raise ConfigError(f"index option {name} must be 0 (automatic) or positive, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IndexSpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def auto_nlist(count: int) -> int:
    """About sqrt(N) lists, with at least 39 training points per list (FAISS's minimum)."""
    return max(1, min(round(math.sqrt(count)), count // 39))


def auto_nprobe(nlist: int) -> int:
    """About 1/32 of the lists, at least 8: recall@1 near 0.99 on clustered embeddings."""
    return min(nlist, max(8, round(nlist / 32)))


def ivf_nlist(index: faiss.Index) -> int:
    """Lists of an IVF index (0 for other kinds)."""
    sub = faiss.downcast_index(index.index)
    return int(sub.nlist) if isinstance(sub, faiss.IndexIVF) else 0


def new_index(spec: IndexSpec, dim: int, training: np.ndarray | None = None) -> faiss.IndexIDMap2:
    """An empty index for ``spec``; IVF is trained on ``training`` when it holds enough rows.

    An IVF request with too little training data yields a flat index (see :func:`built_kind`).
    """
    if spec.kind == "hnsw":
        sub = faiss.IndexHNSWFlat(dim, spec.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        sub.hnsw.efConstruction = spec.ef_construction
    elif spec.kind == "ivf" and training is not None and len(training) >= spec.train_min:
        nlist = spec.nlist or auto_nlist(len(training))
        nlist = min(nlist, len(training))
        quantizer = faiss.IndexFlatIP(dim)
        sub = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        # k-means on a sample: 64 points a list pin the centroids as well as all points do.
        sample = training
        if len(training) > 64 * nlist:
            rows = np.random.default_rng(0).choice(len(training), 64 * nlist, replace=False)
            sample = training[np.sort(rows)]
        sub.train(np.ascontiguousarray(sample, dtype=np.float32))
    else:
        sub = faiss.IndexFlatIP(dim)
    index = faiss.IndexIDMap2(sub)
    apply_search_params(index, spec)
    return index


def built_kind(index: faiss.Index) -> str:
    """What the index really is: "flat", "hnsw" or "ivf"."""
    sub = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap2) else index
    if isinstance(sub, faiss.IndexHNSW):
        return "hnsw"
    if isinstance(sub, faiss.IndexIVF):
        return "ivf"
    return "flat"


def apply_search_params(index: faiss.Index, spec: IndexSpec) -> None:
    """Set the search parameters of ``spec``, and let IVF reconstruct items by id."""
    sub = faiss.downcast_index(index.index)
    if isinstance(sub, faiss.IndexHNSW):
        sub.hnsw.efSearch = spec.ef_search
    elif isinstance(sub, faiss.IndexIVF):
        sub.nprobe = min(spec.nprobe, sub.nlist) if spec.nprobe else auto_nprobe(sub.nlist)
        if sub.direct_map.type == faiss.DirectMap.NoMap:
            sub.make_direct_map()


def supports_remove(index: faiss.Index) -> bool:
    """Only the flat index removes in place; HNSW and IVF behind an id map are rebuilt."""
    return built_kind(index) == "flat"


def index_ids(index: faiss.IndexIDMap2) -> np.ndarray:
    return faiss.vector_to_array(index.id_map).astype(np.int64, copy=False)


def index_vectors(index: faiss.IndexIDMap2) -> tuple[np.ndarray, np.ndarray]:
    """All (ids, vectors) stored in ``index``, in insertion order."""
    ids = index_ids(index)
    if index.ntotal == 0:
        return ids, np.zeros((0, index.d), dtype=np.float32)
    sub = faiss.downcast_index(index.index)
    if isinstance(sub, faiss.IndexIVF) and sub.direct_map.type == faiss.DirectMap.NoMap:
        sub.make_direct_map()
    # Internal ids are 0..n-1 in insertion order: the id map only ever appends, and the
    # only in-place removal (flat) renumbers the rest.
    return ids, sub.reconstruct_n(0, index.ntotal)


def rebuild(spec: IndexSpec, dim: int, ids: np.ndarray, vectors: np.ndarray) -> faiss.IndexIDMap2:
    """A fresh index for ``spec`` holding ``vectors`` under ``ids`` (IVF trained on them)."""
    index = new_index(spec, dim, vectors if spec.kind == "ivf" else None)
    add_chunked(index, ids, vectors)
    apply_search_params(index, spec)
    return index


def add_chunked(index: faiss.IndexIDMap2, ids: np.ndarray, vectors: np.ndarray, chunk: int = 65_536) -> None:
    for start in range(0, len(ids), chunk):
        index.add_with_ids(
            np.ascontiguousarray(vectors[start : start + chunk], dtype=np.float32),
            np.ascontiguousarray(ids[start : start + chunk], dtype=np.int64),
        )


def similarity_to_distance(similarity: np.ndarray) -> np.ndarray:
    """Euclidean distance between unit vectors from their inner product."""
    return np.sqrt(np.clip(2.0 - 2.0 * np.asarray(similarity, dtype=np.float64), 0.0, 4.0))


# Below this many queries FAISS gains nothing from threads (flat, HNSW and IVF all split
# work by query), and waking its OpenMP pool can cost 20+ ms while PyTorch's own OpenMP
# pool (a separate libgomp) is still spinning after an embedding batch.
SINGLE_THREAD_QUERIES = 64
# Exact search multiplies queries by items in blocks; FAISS's default of 1024 items a
# block keeps the matrix multiply at about half its speed, 16384 (64 MB of scores for
# 1024 queries) brings flat search near the raw BLAS rate.
BLAS_BLOCKS = (1024, 16_384)


@contextmanager
def search_settings(queries: int) -> Iterator[None]:
    """FAISS settings for a search of ``queries`` rows, restored when the block ends.

    Few queries run single-threaded; many run with large BLAS blocks.
    """
    if queries < SINGLE_THREAD_QUERIES:
        previous = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            yield
        finally:
            faiss.omp_set_num_threads(previous)
        return
    blocks = (faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs)
    faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs = BLAS_BLOCKS
    try:
        yield
    finally:
        faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs = blocks
