"""Ranking metrics under the Market-1501 protocol: CMC Rank-k, mAP and mINP.

Protocol (see docs/evaluation.md):

* gallery items with the query's identity *and* camera are removed from that query's list
  (they are "junk" for it); distractors (pid 0) stay and count as false matches;
* a query with no true match left is skipped and counted (``num_valid_queries``);
* AP is the mean of the precision at the rank of each true match (the torchreid / fast-reid
  definition, i.e. the area under the non-interpolated precision-recall curve);
* mINP is the mean over queries of (number of true matches) / (rank of the last one),
  the inverse negative penalty of Ye et al. 2021;
* ties in distance are broken by gallery index: of two items at the same distance the one
  that comes first in the gallery ranks first (a stable sort by gallery index).

Only the ranks of each query's true matches are needed, never a whole ranked list: each
row is sorted by value alone (a vectorized sort, much faster than ``argsort``) and the
position of every true match is found by binary search in the sorted row, with exact
tie-breaking done only for the rare values that occur more than once in their row.
Queries are processed in chunks so that only ``chunk_size`` rows of distances exist at a
time.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reid.errors import ConfigError, DataError
from reid.evaluation.distances import distance_rows, prepare_features
from reid.evaluation.names import RANKING_METRICS
from reid.evaluation.rerank import reranked_distance_chunks

AP_DEFINITION = "mean of precision at each true match (torchreid / fast-reid)"

# Working memory aimed at per chunk of distance rows: large enough to keep BLAS and the sort
# efficient, small enough that a 100k x 100k evaluation runs on a laptop.
DEFAULT_CHUNK_BYTES = 256 * 1024 * 1024


@dataclass
class RankingResult:
    """Ranking metrics; rates are fractions in [0, 1].

    ``cmc[k - 1]`` is Rank-k for k up to ``max_rank``; ``average_precision`` holds each
    query's AP (NaN for skipped queries); ``peak_memory_bytes`` is the most memory the
    evaluation allocated beyond its inputs.
    """

    rank1: float
    rank5: float
    rank10: float
    mAP: float
    mINP: float
    cmc: np.ndarray
    num_valid_queries: int
    num_query: int
    num_gallery: int
    metric: str = "precomputed"
    reranked: bool = False
    peak_memory_bytes: int = 0
    seconds: float = 0.0
    ap_definition: str = AP_DEFINITION
    average_precision: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    @property
    def num_skipped_queries(self) -> int:
        return self.num_query - self.num_valid_queries

    def to_dict(self, include_cmc: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            **{key: float(getattr(self, key)) for key in RANKING_METRICS},
            "num_query": int(self.num_query),
            "num_gallery": int(self.num_gallery),
            "num_valid_queries": int(self.num_valid_queries),
            "num_skipped_queries": int(self.num_skipped_queries),
            "metric": self.metric,
            "reranked": self.reranked,
            "ap_definition": self.ap_definition,
            "peak_memory_mb": round(self.peak_memory_bytes / 2**20, 1),
            "seconds": round(self.seconds, 3),
        }
        if include_cmc:
            data["cmc"] = [float(v) for v in self.cmc]
        return data


@dataclass
class _Accumulator:
    """Per-query outcomes gathered chunk by chunk."""

    num_query: int
    first_rank: np.ndarray = field(init=False)
    ap: np.ndarray = field(init=False)
    inp: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        # first_rank 0 marks a query without a true match (ranks are 1-based).
        self.first_rank = np.zeros(self.num_query, dtype=np.int64)
        self.ap = np.full(self.num_query, np.nan)
        self.inp = np.full(self.num_query, np.nan)


class GalleryIndex:
    """Gallery items grouped by identity, so each query finds its same-pid items at once."""

    def __init__(self, g_pids: np.ndarray, g_camids: np.ndarray) -> None:
        self.g_pids = g_pids
        self.g_camids = g_camids
        self.order = np.argsort(g_pids, kind="stable")
        self.pids, self.starts, self.counts = np.unique(g_pids[self.order], return_index=True, return_counts=True)

    def same_pid(self, q_pids: np.ndarray, q_camids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat (query row, gallery column, is_junk) for every gallery item sharing a query's pid."""
        slot = np.searchsorted(self.pids, q_pids)
        slot = np.minimum(slot, len(self.pids) - 1)
        found = self.pids[slot] == q_pids if len(self.pids) else np.zeros(len(q_pids), bool)
        counts = np.where(found, self.counts[slot] if len(self.pids) else 0, 0)
        rows = np.repeat(np.arange(len(q_pids)), counts)
        # Offset of each item inside its query's block, then its position in the grouped order.
        block_start = np.cumsum(counts) - counts
        within = np.arange(rows.size) - np.repeat(block_start, counts)
        cols = self.order[np.repeat(self.starts[slot], counts) + within] if rows.size else rows
        junk = self.g_camids[cols] == q_camids[rows]
        return rows, cols, junk


def _positions(chunk: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """0-based position of item (row, col) in its row's ranking (ties broken by column)."""
    sorted_rows = np.sort(chunk, axis=1)
    values = chunk[rows, cols]
    width = chunk.shape[1]
    lo = np.zeros(rows.size, dtype=np.int64)
    hi = np.full(rows.size, width, dtype=np.int64)
    # Vectorized lower-bound binary search: lo ends at the number of values strictly smaller.
    while True:
        active = lo < hi
        if not active.any():
            break
        mid = (lo + hi) // 2
        smaller = sorted_rows[rows, np.minimum(mid, width - 1)] < values
        lo = np.where(active & smaller, mid + 1, lo)
        hi = np.where(active & ~smaller, mid, hi)
    following = np.minimum(lo + 1, width - 1)
    tied = (lo + 1 < width) & (sorted_rows[rows, following] == values)
    for i in np.flatnonzero(tied):
        lo[i] += np.count_nonzero(chunk[rows[i], : cols[i]] == values[i])
    return lo


def _score_chunk(
    chunk: np.ndarray,
    q_pids: np.ndarray,
    q_camids: np.ndarray,
    index: GalleryIndex,
    acc: _Accumulator,
    offset: int,
) -> None:
    if np.isnan(chunk).any():
        raise DataError("distance matrix contains NaN values; check the features for NaN or Inf")
    rows, cols, junk = index.same_pid(q_pids, q_camids)
    if rows.size == 0:
        return
    pos = _positions(chunk, rows, cols)
    order = np.lexsort((pos, rows))
    rows, pos, junk = rows[order], pos[order], junk[order]
    # Group boundaries of each query's items in the flat, row-sorted arrays.
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    sizes = np.diff(np.r_[starts, rows.size])
    junk_count = np.cumsum(junk)
    junk_before = junk_count - junk - np.repeat((junk_count - junk)[starts], sizes)
    keep = ~junk
    # Rank among the gallery items the protocol keeps for this query (1-based).
    rank = pos - junk_before + 1
    hit_count = np.cumsum(keep)
    hits_before_group = np.repeat(hit_count[starts] - keep[starts], sizes)
    hit = hit_count - hits_before_group
    r_rows, r_rank, r_hit = rows[keep], rank[keep], hit[keep]
    if r_rows.size == 0:
        return
    valid_rows, first_idx, num_true = np.unique(r_rows, return_index=True, return_counts=True)
    last_idx = first_idx + num_true - 1
    precision_sum = np.add.reduceat(r_hit / r_rank, first_idx)
    target = offset + valid_rows
    acc.first_rank[target] = r_rank[first_idx]
    acc.ap[target] = precision_sum / num_true
    acc.inp[target] = num_true / r_rank[last_idx]


def _summarize(acc: _Accumulator, num_gallery: int, max_rank: int) -> RankingResult:
    valid = acc.first_rank > 0
    num_valid = int(valid.sum())
    if num_valid == 0:
        raise DataError(
            f"none of the {acc.num_query} queries has a true match in the gallery "
            "(after removing same-identity same-camera items); nothing to evaluate"
        )
    first = acc.first_rank[valid]
    hist = np.bincount(np.minimum(first, max_rank + 1), minlength=max_rank + 2)[1 : max_rank + 1]
    cmc = np.cumsum(hist) / num_valid

    def rank_k(k: int) -> float:
        return float(np.count_nonzero(first <= k) / num_valid)

    return RankingResult(
        rank1=rank_k(1),
        rank5=rank_k(5),
        rank10=rank_k(10),
        mAP=float(acc.ap[valid].mean()),
        mINP=float(acc.inp[valid].mean()),
        cmc=cmc,
        num_valid_queries=num_valid,
        num_query=acc.num_query,
        num_gallery=num_gallery,
        average_precision=acc.ap,
    )


def _labels(
    num_query: int, num_gallery: int, q_pids: Any, g_pids: Any, q_camids: Any, g_camids: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    arrays = [np.asarray(a).reshape(-1) for a in (q_pids, g_pids, q_camids, g_camids)]
    expected = (num_query, num_gallery, num_query, num_gallery)
    names = ("q_pids", "g_pids", "q_camids", "g_camids")
    for name, array, size in zip(names, arrays, expected):
        if array.size != size:
            raise DataError(f"{name} has {array.size} entries, expected {size}")
        if not np.issubdtype(array.dtype, np.integer):
            raise DataError(f"{name} must hold integers, found {array.dtype}")
    return tuple(a.astype(np.int64) for a in arrays)  # type: ignore[return-value]


def _check_max_rank(max_rank: int) -> int:
    if max_rank < 1:
        raise ConfigError(f"max_rank must be at least 1, got {max_rank}")
    return int(max_rank)


def auto_chunk_size(num_gallery: int, bytes_per_value: int = 4, budget: int = DEFAULT_CHUNK_BYTES) -> int:
    """Rows per chunk so that the chunk's distances, sorted copy and temporaries fit ``budget``."""
    return max(1, budget // (3 * bytes_per_value * max(1, num_gallery)))


@contextmanager
def track_peak_memory() -> Iterator[Callable[[], int]]:
    """Measure the peak of memory newly allocated inside the block (NumPy buffers included).

    Uses tracemalloc; if the caller already traces, its trace is kept running.
    """
    already = tracemalloc.is_tracing()
    if not already:
        tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    peak = [0]
    try:
        yield lambda: peak[0]
    finally:
        peak[0] = max(0, tracemalloc.get_traced_memory()[1] - baseline)
        if not already:
            tracemalloc.stop()


def evaluate_distmat(
    distmat: np.ndarray,
    q_pids: Any,
    g_pids: Any,
    q_camids: Any,
    g_camids: Any,
    max_rank: int = 50,
    chunk_size: int | None = None,
) -> RankingResult:
    """CMC, mAP and mINP from a (num_query, num_gallery) distance matrix (smaller = closer).

    The matrix may be float32 or float64; values are compared in the given precision.
    Labels are integer arrays: pids and camids of the queries (num_query,) and of the
    gallery (num_gallery,). Market-1501 protocol: a gallery item of the query's identity
    and camera is not counted; queries left without a true match are skipped and counted.

    Raises:
        DataError: the matrix is not 2-D or holds NaN, or a label array has the wrong
            size or is not integer.
        ConfigError: ``max_rank`` is below 1.
    """
    started = time.perf_counter()
    distmat = np.asarray(distmat)
    if distmat.ndim != 2:
        raise DataError(f"distance matrix must be 2-D, found shape {distmat.shape}")
    if not np.issubdtype(distmat.dtype, np.floating):
        distmat = distmat.astype(np.float64)
    num_query, num_gallery = distmat.shape
    q_pids, g_pids, q_camids, g_camids = _labels(num_query, num_gallery, q_pids, g_pids, q_camids, g_camids)
    max_rank = _check_max_rank(max_rank)
    step = chunk_size or auto_chunk_size(num_gallery, distmat.dtype.itemsize)
    with track_peak_memory() as peak:
        index = GalleryIndex(g_pids, g_camids)
        acc = _Accumulator(num_query)
        for start in range(0, num_query, step):
            stop = min(start + step, num_query)
            _score_chunk(distmat[start:stop], q_pids[start:stop], q_camids[start:stop], index, acc, start)
        result = _summarize(acc, num_gallery, max_rank)
    result.peak_memory_bytes = peak()
    result.seconds = time.perf_counter() - started
    return result


def evaluate_features(
    q_feats: Any,
    g_feats: Any,
    q_pids: Any,
    g_pids: Any,
    q_camids: Any,
    g_camids: Any,
    metric: str = "euclidean",
    max_rank: int = 50,
    rerank: bool = False,
    chunk_size: int | None = None,
    k1: int = 20,
    k2: int = 6,
    lambda_value: float = 0.3,
) -> RankingResult:
    """CMC, mAP and mINP from query and gallery features, ``chunk_size`` query rows at a time.

    No full distance matrix is ever held: memory grows with ``chunk_size * num_gallery``
    (by default about 256 MB of working buffers), not with ``num_query * num_gallery``.
    With ``rerank`` the k-reciprocal re-ranking of Zhong et al. 2017 is applied (see
    :mod:`reid.evaluation.rerank`); it needs every item's neighbours among queries *and*
    gallery, so its time grows with (num_query + num_gallery)^2 although its memory stays
    bounded by the chunk size and the sparse neighbour sets.

    Features are (num_query, D) and (num_gallery, D) float arrays; ``metric`` is
    ``euclidean`` (the distance between unit embeddings, 0..2) or ``cosine`` (1 - cosine
    similarity, 0..2). Labels as in :func:`evaluate_distmat`.

    Raises:
        ConfigError: an unknown metric, or ``max_rank`` below 1.
        DataError: the two feature sets differ in dimension, a label array has the wrong
            size or is not integer, or a distance is NaN.
    """
    started = time.perf_counter()
    q, g, g_sq = prepare_features(q_feats, g_feats, metric)
    num_query, num_gallery = q.shape[0], g.shape[0]
    q_pids, g_pids, q_camids, g_camids = _labels(num_query, num_gallery, q_pids, g_pids, q_camids, g_camids)
    max_rank = _check_max_rank(max_rank)
    step = chunk_size or auto_chunk_size(num_gallery)
    with track_peak_memory() as peak:
        index = GalleryIndex(g_pids, g_camids)
        acc = _Accumulator(num_query)
        if rerank:
            chunks = reranked_distance_chunks(q, g, metric, step, k1=k1, k2=k2, lambda_value=lambda_value)
        else:
            chunks = (
                (start, distance_rows(q[start : start + step], g, g_sq, metric))
                for start in range(0, num_query, step)
            )
        for start, chunk in chunks:
            stop = start + chunk.shape[0]
            _score_chunk(chunk, q_pids[start:stop], q_camids[start:stop], index, acc, start)
            del chunk
        result = _summarize(acc, num_gallery, max_rank)
    result.peak_memory_bytes = peak()
    result.metric = metric
    result.reranked = rerank
    result.seconds = time.perf_counter() - started
    return result


@dataclass
class RankedList:
    """The top of one query's ranked list, junk (same identity and camera) removed."""

    query: int
    gallery: np.ndarray
    distances: np.ndarray
    matches: np.ndarray


def ranked_lists(
    q_feats: Any,
    g_feats: Any,
    q_pids: Any,
    g_pids: Any,
    q_camids: Any,
    g_camids: Any,
    queries: Any,
    top_k: int = 10,
    metric: str = "euclidean",
) -> list[RankedList]:
    """Top-``top_k`` gallery items of the chosen queries under the same protocol and tie rule.

    Distances are Euclidean (not squared) for ``euclidean``, 1 - cosine for ``cosine``.
    """
    q, g, g_sq = prepare_features(q_feats, g_feats, metric)
    q_pids, g_pids, q_camids, g_camids = _labels(q.shape[0], g.shape[0], q_pids, g_pids, q_camids, g_camids)
    lists = []
    for query in np.asarray(queries, dtype=np.int64).reshape(-1):
        row = distance_rows(q[query : query + 1], g, g_sq, metric)[0]
        order = np.argsort(row, kind="stable")
        junk = (g_pids[order] == q_pids[query]) & (g_camids[order] == q_camids[query])
        order = order[~junk][:top_k]
        lists.append(
            RankedList(
                query=int(query),
                gallery=order,
                distances=np.sqrt(row[order]) if metric == "euclidean" else row[order],
                matches=g_pids[order] == q_pids[query],
            )
        )
    return lists
