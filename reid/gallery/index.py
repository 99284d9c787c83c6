"""FAISS indexes of a gallery: exact (flat) or approximate (HNSW, IVF, IVF-PQ), all inner product.

Flat, HNSW and IVF indexes are ``IndexIDMap2`` wrappers whose ids are the SQLite row ids of
the items, so an item found by FAISS is looked up in the database directly.  IVF-PQ stores
the row ids in its inverted lists itself (``add_with_ids``): behind an id map its removals
would renumber FAISS's internal ids, which IVF does not do, so it removes in place by id.
Embeddings are unit length, so the inner product is the cosine similarity and the
Euclidean distance reid reports everywhere is ``sqrt(2 - 2 * similarity)``
(:func:`reid.decision.similarity_to_distance`).

IVF-PQ keeps only a short code per item (``pq_m`` bytes at 8 bits), so it cannot give back
the embeddings; a gallery keeps those in a float16 file beside each IVF-PQ index (see
:mod:`reid.gallery.files`), and re-ranks IVF-PQ's candidates with them (``refine``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import faiss
import numpy as np

from reid.errors import ConfigError
# The spec and its kinds live where the command line reads them without FAISS; named here too.
from reid.gallery.spec import (
    INDEX_KINDS as INDEX_KINDS,
    POINTS_PER_CENTROID,
    SAMPLE_PER_CENTROID,
    TRAINED_KINDS,
    IndexSpec,
)


def auto_nlist(count: int) -> int:
    """About sqrt(N) lists, with at least 39 training points per list (FAISS's minimum)."""
    return max(1, min(round(math.sqrt(count)), count // POINTS_PER_CENTROID))


def auto_nprobe(nlist: int) -> int:
    """About 1/32 of the lists, at least 8: recall@1 near 0.99 on clustered embeddings."""
    return min(nlist, max(8, round(nlist / 32)))


def _ivf_of(index: faiss.Index) -> faiss.IndexIVF | None:
    sub = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap2) else faiss.downcast_index(index)
    return sub if isinstance(sub, faiss.IndexIVF) else None


def ivf_nlist(index: faiss.Index) -> int:
    """Lists of an IVF or IVF-PQ index (0 for other kinds)."""
    ivf = _ivf_of(index)
    return int(ivf.nlist) if ivf is not None else 0


@dataclass(frozen=True)
class TrainingPlan:
    """How a trained index is built for ``count`` items: ``nlist`` lists from ``sample`` of them."""

    nlist: int
    sample: int


def plan_training(spec: IndexSpec, count: int) -> TrainingPlan | None:
    """Lists and training sample for ``count`` items, or None when there are too few to train."""
    if spec.kind not in TRAINED_KINDS or count < spec.training_items:
        return None
    nlist = spec.nlist or auto_nlist(count)
    wanted = spec.train_size or SAMPLE_PER_CENTROID * nlist
    if spec.kind == "ivfpq" and not spec.train_size:
        wanted = max(wanted, 256 * 2**spec.pq_bits)
    sample = min(count, max(wanted, spec.min_training))
    # An explicit train_size smaller than the lists need caps the lists, not the other way round.
    return TrainingPlan(max(1, min(nlist, sample // POINTS_PER_CENTROID)), sample)


def new_index(spec: IndexSpec, dim: int) -> faiss.Index:
    """An empty index for ``spec`` that needs no training: flat, or HNSW."""
    if spec.kind == "hnsw":
        sub = faiss.IndexHNSWFlat(dim, spec.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        sub.hnsw.efConstruction = spec.ef_construction
    else:
        sub = faiss.IndexFlatIP(dim)
    index = faiss.IndexIDMap2(sub)
    apply_search_params(index, spec)
    return index


def trained_index(spec: IndexSpec, dim: int, nlist: int, sample: np.ndarray) -> faiss.Index:
    """An empty IVF (behind an id map) or IVF-PQ index, trained on ``sample``."""
    quantizer = faiss.IndexFlatIP(dim)
    if spec.kind == "ivfpq":
        index = faiss.IndexIVFPQ(
            quantizer, dim, nlist, spec.sub_quantizers(dim), spec.pq_bits, faiss.METRIC_INNER_PRODUCT
        )
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
    elif spec.kind == "ivf":
        sub = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        sub.train(np.ascontiguousarray(sample, dtype=np.float32))
        index = faiss.IndexIDMap2(sub)
    else:
        raise ConfigError(f"a {spec.kind} index is not trained")
    apply_search_params(index, spec)
    return index


def built_kind(index: faiss.Index) -> str:
    """What the index really is: "flat", "hnsw", "ivf" or "ivfpq"."""
    sub = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap2) else faiss.downcast_index(index)
    if isinstance(sub, faiss.IndexHNSW):
        return "hnsw"
    if isinstance(sub, faiss.IndexIVFPQ):
        return "ivfpq"
    if isinstance(sub, faiss.IndexIVF):
        return "ivf"
    return "flat"


def stores_vectors(index: faiss.Index) -> bool:
    """Whether the index gives back the embeddings it holds exactly (all kinds but IVF-PQ)."""
    return built_kind(index) != "ivfpq"


def apply_search_params(index: faiss.Index, spec: IndexSpec) -> None:
    """Set the search parameters of ``spec``, and let IVF behind an id map reconstruct items."""
    if isinstance(index, faiss.IndexIDMap2):
        sub = faiss.downcast_index(index.index)
        if isinstance(sub, faiss.IndexHNSW):
            sub.hnsw.efSearch = spec.ef_search
            return
    ivf = _ivf_of(index)
    if ivf is None:
        return
    ivf.nprobe = min(spec.nprobe, ivf.nlist) if spec.nprobe else auto_nprobe(ivf.nlist)
    if isinstance(index, faiss.IndexIDMap2) and ivf.direct_map.type == faiss.DirectMap.NoMap:
        ivf.make_direct_map()


def supports_remove(index: faiss.Index) -> bool:
    """Flat and IVF-PQ remove in place; HNSW and IVF behind an id map are rebuilt."""
    return built_kind(index) in ("flat", "ivfpq")


def index_ids(index: faiss.Index) -> np.ndarray:
    """The item ids ``index`` holds (in no particular order for IVF-PQ)."""
    if isinstance(index, faiss.IndexIDMap2):
        return faiss.vector_to_array(index.id_map).astype(np.int64, copy=False)
    ivf = _ivf_of(index)
    if ivf is None:
        raise ConfigError(f"a {type(index).__name__} holds no item ids")
    lists = ivf.invlists
    parts = [np.zeros(0, np.int64)]
    for number in range(ivf.nlist):
        size = lists.list_size(number)
        if size:
            parts.append(faiss.rev_swig_ptr(lists.get_ids(number), size).astype(np.int64))
    return np.concatenate(parts)


def add_chunked(index: faiss.Index, ids: np.ndarray, vectors: np.ndarray, chunk: int = 65_536) -> None:
    for start in range(0, len(ids), chunk):
        index.add_with_ids(
            np.ascontiguousarray(vectors[start : start + chunk], dtype=np.float32),
            np.ascontiguousarray(ids[start : start + chunk], dtype=np.int64),
        )


# Below this many queries FAISS gains nothing from threads (flat, HNSW and IVF all split
# work by query), and waking its OpenMP pool can cost 20+ ms while PyTorch's own OpenMP
# pool (a separate libgomp) is still spinning after an embedding batch.
SINGLE_THREAD_QUERIES = 64
# From this many queries exact search multiplies them by the items with BLAS instead of
# scanning every item once per query.  FAISS's own switch has moved between versions
# (20 queries, then queries x dimension >= 128,000, i.e. 100 queries at 1280-d), and on
# one thread a scan of 10,000 1280-d items costs 5-6 ms a query against 0.6 ms batched,
# so the choice is made here, in terms every version reads the same way.
BLAS_FROM_QUERIES = 4
# distance_compute_blas_threshold values that mean "always" and "never" under every rule.
_BLAS_ALWAYS, _BLAS_NEVER = 1, 2**31 - 1
# Exact search multiplies queries by items in blocks; FAISS's default of 1024 items a
# block keeps the matrix multiply at about half its speed, 16384 (64 MB of scores for
# 1024 queries) brings flat search near the raw BLAS rate.
BLAS_BLOCKS = (1024, 16_384)


@contextmanager
def search_settings(queries: int) -> Iterator[None]:
    """FAISS settings for a search of ``queries`` rows, restored when the block ends.

    Few queries run single-threaded; from :data:`BLAS_FROM_QUERIES` exact distances come
    from one matrix multiply; many run with large BLAS blocks.
    """
    cvar = faiss.cvar
    saved = (
        faiss.omp_get_max_threads(),
        cvar.distance_compute_blas_threshold,
        cvar.distance_compute_blas_query_bs,
        cvar.distance_compute_blas_database_bs,
    )
    cvar.distance_compute_blas_threshold = _BLAS_ALWAYS if queries >= BLAS_FROM_QUERIES else _BLAS_NEVER
    if queries < SINGLE_THREAD_QUERIES:
        faiss.omp_set_num_threads(1)
    else:
        cvar.distance_compute_blas_query_bs, cvar.distance_compute_blas_database_bs = BLAS_BLOCKS
    try:
        yield
    finally:
        faiss.omp_set_num_threads(saved[0])
        cvar.distance_compute_blas_threshold = saved[1]
        cvar.distance_compute_blas_query_bs, cvar.distance_compute_blas_database_bs = saved[2], saved[3]
