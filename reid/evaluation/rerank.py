"""k-reciprocal re-ranking (Zhong et al., "Re-ranking Person Re-identification with
k-reciprocal Encoding", CVPR 2017), computed without any full distance matrix.

For every item p of the joint set (queries and gallery, N items):

* N(p, k) are the k + 1 nearest items of p including p itself (ties broken by index);
* R(p, k) = {g in N(p, k) : p in N(g, k)}, its k-reciprocal neighbours;
* R*(p, k1) adds R(q, k1/2) for each q in R(p, k1) that shares more than two thirds of
  its own set with R(p, k1) (the strict comparison of the authors' released code);
* V_p is a vector over all N items: exp(-d(p, g)) normalised to sum 1 on R*(p, k1), zero
  elsewhere, where d is the distance divided by the largest distance in p's row;
* local query expansion replaces V_p by the mean of V_g over the k2 nearest g of p (p included);
* the Jaccard distance is 1 - sum_j min(V_pj, V_gj) / sum_j max(V_pj, V_gj), and the final
  distance is (1 - lambda) * Jaccard + lambda * d.

d is the squared Euclidean distance for ``euclidean`` (the paper's Mahalanobis form with
the identity matrix) and 1 - cosine for ``cosine``.  Only the N x (k1 + 1) neighbour lists
and the sparse vectors V are kept; distances are recomputed in row chunks, so memory stays
bounded while time grows with N^2 (every item must find its neighbours among all others).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from reid.errors import ConfigError
from reid.evaluation.distances import distance_rows, prepare_features

# Entries of sparse products expanded at once; bounds the temporaries of the Jaccard step.
EXPANSION_BATCH = 4_000_000


@dataclass
class SparseRows:
    """A compressed sparse row matrix: row r holds columns indices[indptr[r]:indptr[r + 1]]."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @property
    def num_rows(self) -> int:
        return len(self.indptr) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.indptr)

    @classmethod
    def from_pairs(cls, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, num_rows: int) -> SparseRows:
        """Build from (row, col, value) triples, summing duplicates; columns sorted per row."""
        width = int(cols.max()) + 1 if cols.size else 1
        keys = rows.astype(np.int64) * width + cols
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        unique, first = np.unique(keys, return_index=True)
        sums = np.add.reduceat(values, first) if first.size else values[:0]
        out_rows = unique // width
        indptr = np.zeros(num_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(out_rows, minlength=num_rows), out=indptr[1:])
        return cls(indptr, (unique % width).astype(np.int64), sums.astype(np.float32))


def _expand(indptr: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the entries of rows ``which`` in a CSR layout, and each entry's owner slot."""
    lengths = indptr[which + 1] - indptr[which]
    owner = np.repeat(np.arange(which.size), lengths)
    block_start = np.cumsum(lengths) - lengths
    within = np.arange(owner.size) - np.repeat(block_start, lengths)
    return np.repeat(indptr[which], lengths) + within, owner


def smallest_sorted(distances: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the k smallest values of each row, ascending, ties by column index."""
    rows, width = distances.shape
    if k >= width:
        return np.argsort(distances, axis=1, kind="stable")
    part = np.argpartition(distances, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(distances, part, axis=1).max(axis=1, keepdims=True)
    selected = distances <= kth
    counts = selected.sum(axis=1)
    for row in np.flatnonzero(counts > k):
        # Several items tie with the k-th value: keep the ones with the smallest index.
        strict = np.flatnonzero(distances[row] < kth[row, 0])
        equal = np.flatnonzero(distances[row] == kth[row, 0])[: k - strict.size]
        selected[row] = False
        selected[row, strict] = True
        selected[row, equal] = True
    cols = np.nonzero(selected)[1].reshape(rows, k)
    values = np.take_along_axis(distances, cols, axis=1)
    return np.take_along_axis(cols, np.argsort(values, axis=1, kind="stable"), axis=1)


def _neighbours(features: np.ndarray, metric: str, width: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted nearest-neighbour lists (N x width) and each row's largest distance."""
    n = features.shape[0]
    sq = np.einsum("ij,ij->i", features, features)
    nbr = np.empty((n, width), dtype=np.int64)
    row_max = np.empty(n, dtype=np.float32)
    for start in range(0, n, step):
        block = distance_rows(features[start : start + step], features, sq, metric)
        row_max[start : start + block.shape[0]] = block.max(axis=1)
        nbr[start : start + block.shape[0]] = smallest_sorted(block, width)
    return nbr, np.maximum(row_max, np.finfo(np.float32).tiny)


def _reciprocal(nbr: np.ndarray, size: int, step: int) -> np.ndarray:
    """mask[i, m]: nbr[i, m] is in N(i, k) and i is in its N(., k); N has ``size`` entries."""
    n = nbr.shape[0]
    mask = np.empty((n, size), dtype=bool)
    for start in range(0, n, step):
        head = nbr[start : start + step, :size]
        back = nbr[head, :size]
        own = np.arange(start, start + head.shape[0])[:, None, None]
        mask[start : start + head.shape[0]] = (back == own).any(axis=2)
    return mask


def _expanded_sets(nbr: np.ndarray, full: int, half: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) pairs of R*(i, k1) for every i, deduplicated later."""
    n = nbr.shape[0]
    recip_full = _reciprocal(nbr, full, step)
    recip_half = _reciprocal(nbr, half, step)
    half_size = recip_half.sum(axis=1)
    rows_out, cols_out = [], []
    for start in range(0, n, step):
        stop = min(start + step, n)
        own = np.where(recip_full[start:stop], nbr[start:stop, :full], -1)
        cand = nbr[start:stop, :full]
        cand_sets = np.where(recip_half[cand], nbr[cand, :half], -2)
        shared = (cand_sets[:, :, :, None] == own[:, None, None, :]).any(axis=3).sum(axis=2)
        take = recip_full[start:stop] & (shared > (2.0 / 3.0) * half_size[cand])
        local = np.arange(start, stop)
        r, m = np.nonzero(recip_full[start:stop])
        rows_out += [local[r]]
        cols_out += [nbr[local[r], m]]
        r, m = np.nonzero(take)
        extra = cand_sets[r, m]
        valid = extra >= 0
        rows_out += [np.repeat(local[r], valid.sum(axis=1))]
        cols_out += [extra[valid]]
    return np.concatenate(rows_out), np.concatenate(cols_out)


def _pair_distances(features: np.ndarray, rows: np.ndarray, cols: np.ndarray, metric: str) -> np.ndarray:
    out = np.empty(rows.size, dtype=np.float32)
    step = max(1, EXPANSION_BATCH // max(1, features.shape[1]))
    for start in range(0, rows.size, step):
        a = features[rows[start : start + step]]
        b = features[cols[start : start + step]]
        if metric == "cosine":
            out[start : start + step] = 1.0 - np.einsum("ij,ij->i", a, b)
        else:
            diff = a - b
            out[start : start + step] = np.einsum("ij,ij->i", diff, diff)
    return out


def _encoding(features: np.ndarray, metric: str, k1: int, k2: int, step: int) -> tuple[SparseRows, np.ndarray]:
    """The query-expanded sparse vectors V of every item, and each row's largest distance."""
    n = features.shape[0]
    full = min(k1 + 1, n)
    half = min(int(round(k1 / 2)) + 1, n)
    k2 = min(k2, n)
    nbr, row_max = _neighbours(features, metric, max(full, k2), step)
    rows, cols = _expanded_sets(nbr, full, half, max(1, EXPANSION_BATCH // (full * full * half)))
    sets = SparseRows.from_pairs(rows, cols, np.zeros(rows.size, np.float32), n)
    owner = np.repeat(np.arange(n), sets.lengths())
    weight = np.exp(-_pair_distances(features, owner, sets.indices, metric) / row_max[owner])
    totals = np.bincount(owner, weights=weight, minlength=n)
    sets.data = (weight / totals[owner]).astype(np.float32)
    if k2 == 1:
        return sets, row_max
    # Local query expansion, a block of destination rows at a time to bound temporaries.
    parts_rows, parts_cols, parts_vals = [], [], []
    block = max(1, EXPANSION_BATCH // max(1, k2 * int(sets.lengths().max())))
    for start in range(0, n, block):
        dest = np.arange(start, min(start + block, n))
        src = nbr[dest, :k2].ravel()
        positions, slot = _expand(sets.indptr, src)
        merged = SparseRows.from_pairs(
            np.repeat(dest, k2)[slot] - start,
            sets.indices[positions],
            sets.data[positions] / np.float32(k2),
            dest.size,
        )
        parts_rows.append(np.repeat(dest, merged.lengths()))
        parts_cols.append(merged.indices)
        parts_vals.append(merged.data)
    expanded = SparseRows.from_pairs(
        np.concatenate(parts_rows), np.concatenate(parts_cols), np.concatenate(parts_vals), n
    )
    return expanded, row_max


def _column_index(vectors: SparseRows, first_row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For rows from ``first_row`` on, entries grouped by column: (colptr, row, value)."""
    owner = np.repeat(np.arange(vectors.num_rows), vectors.lengths())
    keep = owner >= first_row
    owner, cols, vals = owner[keep] - first_row, vectors.indices[keep], vectors.data[keep]
    order = np.argsort(cols, kind="stable")
    colptr = np.zeros(vectors.num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(cols, minlength=vectors.num_rows), out=colptr[1:])
    return colptr, owner[order], vals[order]


def _shared_mass(
    vectors: SparseRows, queries: np.ndarray, columns: tuple[np.ndarray, np.ndarray, np.ndarray], num_gallery: int
) -> np.ndarray:
    """sum_j min(V_qj, V_gj) for each query row in ``queries`` and every gallery row g."""
    colptr, g_rows, g_vals = columns
    out = np.zeros((queries.size, num_gallery), dtype=np.float32)
    q_pos, q_slot = _expand(vectors.indptr, queries)
    q_cols, q_vals = vectors.indices[q_pos], vectors.data[q_pos]
    cost = np.cumsum(colptr[q_cols + 1] - colptr[q_cols])
    start = 0
    while start < q_cols.size:
        base = cost[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(cost, base + EXPANSION_BATCH)))
        entries, which = _expand(colptr, q_cols[start:stop])
        mins = np.minimum(q_vals[start:stop][which], g_vals[entries])
        # Entries come in query order, so a batch touches one contiguous run of query rows.
        slots = q_slot[start:stop][which]
        first, last = int(q_slot[start]), int(q_slot[stop - 1])
        sums = np.bincount((slots - first) * num_gallery + g_rows[entries], weights=mins,
                           minlength=(last - first + 1) * num_gallery)
        out[first : last + 1] += sums.reshape(last - first + 1, num_gallery).astype(np.float32)
        start = stop
    return out


def reranked_distance_chunks(
    q: np.ndarray,
    g: np.ndarray,
    metric: str,
    chunk_size: int,
    k1: int = 20,
    k2: int = 6,
    lambda_value: float = 0.3,
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (first query row, re-ranked distances of a chunk of queries to the gallery).

    ``q`` and ``g`` are prepared features (see ``prepare_features``); distances follow the
    module docstring.
    """
    if k1 < 1 or k2 < 1:
        raise ConfigError(f"re-ranking needs k1 >= 1 and k2 >= 1, got k1={k1}, k2={k2}")
    if not 0.0 <= lambda_value <= 1.0:
        raise ConfigError(f"re-ranking lambda must lie in [0, 1], got {lambda_value}")
    features = np.concatenate([q, g]).astype(np.float32)
    num_query, num_gallery = q.shape[0], g.shape[0]
    vectors, row_max = _encoding(features, metric, k1, k2, chunk_size)
    columns = _column_index(vectors, num_query)
    g_sq = np.einsum("ij,ij->i", g, g)
    for start in range(0, num_query, chunk_size):
        rows = np.arange(start, min(start + chunk_size, num_query))
        final = distance_rows(q[rows], g, g_sq, metric)
        final *= (lambda_value / row_max[rows])[:, None]
        shared = _shared_mass(vectors, rows, columns, num_gallery)
        # Each V row sums to 1, so sum_j max(V_pj, V_gj) = 2 - sum_j min(V_pj, V_gj).
        np.divide(shared, 2.0 - shared, out=shared)
        final += (1.0 - lambda_value) * (1.0 - shared)
        yield start, final


def rerank_distances(
    q_feats: np.ndarray,
    g_feats: np.ndarray,
    metric: str = "euclidean",
    k1: int = 20,
    k2: int = 6,
    lambda_value: float = 0.3,
    chunk_size: int = 1024,
) -> np.ndarray:
    """The full (num_query, num_gallery) re-ranked distance matrix, for small problems and plots."""
    q, g, _ = prepare_features(q_feats, g_feats, metric)
    out = np.empty((q.shape[0], g.shape[0]), dtype=np.float32)
    for start, chunk in reranked_distance_chunks(q, g, metric, chunk_size, k1, k2, lambda_value):
        out[start : start + chunk.shape[0]] = chunk
    return out
