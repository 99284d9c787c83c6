"""Search and identity scoring over a gallery's shards.

FAISS answers with the nearest *items* by inner product; a user asks for the nearest
*identities* at a distance.  This module turns one into the other:

* :func:`rerank` re-scores approximate (IVF-PQ) candidates exactly with the stored
  embeddings;
* :func:`nearest_identities` groups items by identity, nearest first, and fetches more
  neighbours when too few identities came back;
* ``score="best"`` gives an identity the distance of its nearest item, ``"mean"`` the mean
  distance to all its items (:func:`mean_scores`).

Distances are Euclidean between unit embeddings, 0..2
(:func:`reid.decision.similarity_to_distance` of FAISS's inner product).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from reid.decision import similarity_to_distance
from reid.errors import ConfigError
from reid.gallery.records import IdentityMatch

SCORES = ("best", "mean")
# Candidates re-ranked at a time: bounds the float32 copies of their embeddings (128 MiB at 512-d).
RERANK_ROWS = 65_536

# item ids (N,) int64 -> their stored embeddings (N, D) float32
Originals = Callable[[np.ndarray], np.ndarray]


@dataclass
class IdentityLabels:
    """Item ids (ascending, as AUTOINCREMENT hands them out) and their identity codes."""

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    names: list[str] = field(default_factory=list)
    code_of: dict[str, int] = field(default_factory=dict)
    _count: int | None = None

    @property
    def identity_count(self) -> int:
        if self._count is None:
            self._count = len(np.unique(self.codes))
        return self._count

    def extend(self, rows: Sequence[tuple[int, str]]) -> None:
        """Add ``(id, identity)`` rows whose ids are above every id held."""
        if not rows:
            return
        codes = np.empty(len(rows), np.int32)
        for i, (_, name) in enumerate(rows):
            code = self.code_of.get(name)
            if code is None:
                code = self.code_of[name] = len(self.names)
                self.names.append(name)
            codes[i] = code
        self.ids = np.concatenate([self.ids, np.fromiter((r[0] for r in rows), np.int64, len(rows))])
        self.codes = np.concatenate([self.codes, codes])
        self._count = None

    def drop(self, identity: str) -> None:
        code = self.code_of.get(identity)
        if code is not None:
            keep = self.codes != code
            self.ids, self.codes = self.ids[keep], self.codes[keep]
            self._count = None

    def drop_ids(self, ids: np.ndarray) -> None:
        keep = ~np.isin(self.ids, ids)
        self.ids, self.codes = self.ids[keep], self.codes[keep]
        self._count = None

    def rename(self, identity: str, new_name: str) -> None:
        """Label ``identity``'s items ``new_name`` (a name no held item has)."""
        code = self.code_of.pop(identity)
        if new_name in self.code_of:
            # A name whose items were all removed keeps its code; the renamed items take it.
            self.codes[self.codes == code] = self.code_of[new_name]
        else:
            self.code_of[new_name] = code
            self.names[code] = new_name
        self._count = None

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Identity codes of item ``ids`` (every id must be held)."""
        pos = np.searchsorted(self.ids, ids)
        pos = np.clip(pos, 0, max(len(self.ids) - 1, 0))
        return self.codes[pos]

    def ids_of(self, identity: str) -> np.ndarray:
        return self.ids[self.codes == self.code_of[identity]]

    def present(self) -> set[str]:
        """The identities that have items (a removed identity's name keeps its code)."""
        return {self.names[int(code)] for code in np.unique(self.codes)}


class GalleryView(Protocol):
    """One committed state of a gallery, read only: ``labels`` of its items (ids ascending),
    ``dim``, the index ``kind``; embeddings are float32 unit rows, similarities inner products."""

    labels: IdentityLabels
    dim: int

    def __len__(self) -> int: ...

    @property
    def kind(self) -> str: ...

    def nearest(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(similarities (Q, k) float32, item ids (Q, k) int64, -1 pads) of queries (Q, D)."""
        ...

    def originals(self, ids: np.ndarray) -> np.ndarray:
        """Stored embeddings (N, D) float32 of item ``ids`` (N,) int64."""
        ...

    def chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, embeddings) of every item, a chunk at a time."""
        ...


def check_search(k: int, score: str = "best") -> None:
    """Raise ConfigError unless ``k`` >= 1 and ``score`` is one of :data:`SCORES`."""
    if score not in SCORES:
        raise ConfigError(f"unknown identity score {score!r}; choose one of {', '.join(SCORES)}")
    if k < 1:
        raise ConfigError(f"top-k must be at least 1, got {k}")


def rerank(queries: np.ndarray, ids: np.ndarray, k: int, originals: Originals) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of each row of candidate ``ids`` (Q, C) by exact inner product with the
    stored embeddings: (similarities (Q, k) float32, ids (Q, k) int64, -1 where none)."""
    sims = np.full(ids.shape, -np.inf, np.float32)
    step = max(1, RERANK_ROWS // max(ids.shape[1], 1))
    for start in range(0, len(ids), step):
        block = ids[start : start + step]
        rows, cols = np.nonzero(block >= 0)
        unique, inverse = np.unique(block[rows, cols], return_inverse=True)
        vectors = originals(unique)
        sims[start + rows, cols] = np.einsum("ij,ij->i", vectors[inverse], queries[start + rows])
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    ranked = np.take_along_axis(ids, order, axis=1)
    ranked_sims = np.take_along_axis(sims, order, axis=1)
    ranked[~np.isfinite(ranked_sims)] = -1
    return ranked_sims, ranked


def group_by_identity(sims: np.ndarray, ids: np.ndarray, labels: IdentityLabels) -> list[IdentityMatch]:
    """One match per identity among one query's neighbours, at the distance of its nearest
    item; nearest first, and at equal distances the identity of the lower item id first."""
    valid = ids >= 0
    sims, ids = sims[valid], ids[valid]
    # Nearest first; equal distances (to 6 decimals): the lower item id, enrolled first.
    order = np.lexsort((ids, -np.round(sims.astype(np.float64), 6)))
    sims, ids = sims[order], ids[order]
    codes = labels.lookup(ids)
    # Now an identity's first hit is its best.
    _, first = np.unique(codes, return_index=True)
    first = np.sort(first)
    distances = similarity_to_distance(sims[first])
    return [
        IdentityMatch(labels.names[codes[pos]], float(dist), int(ids[pos]))
        for pos, dist in zip(first, distances, strict=True)
    ]


def mean_scores(query: np.ndarray, found: list[IdentityMatch], k: int, view: GalleryView) -> list[IdentityMatch]:
    """``found`` re-scored by the mean distance to all items of each identity; the ``k`` nearest."""
    # Exact means over all items of each candidate identity; the candidates are the
    # identities among the nearest items, so an identity with no near item never wins.
    scored = []
    for match in found:
        vectors = view.originals(view.labels.ids_of(match.identity))
        mean = float(similarity_to_distance(vectors @ query).mean())
        scored.append(IdentityMatch(match.identity, mean, match.item_id))
    scored.sort(key=lambda m: (round(m.distance, 6), m.item_id))
    return scored[:k]


def nearest_identities(view: GalleryView, queries: np.ndarray, k: int, score: str) -> list[list[IdentityMatch]]:
    """The ``k`` nearest identities of each of ``queries`` (Q, D) in ``view``.

    Starts from the nearest ``max(4 k, 32)`` items and fetches four times more for the
    queries whose neighbours hold fewer than ``k`` identities, until all items are seen.
    """
    results: list[list[IdentityMatch]] = [[] for _ in range(len(queries))]
    total, labels = len(view), view.labels
    if total == 0 or len(queries) == 0:
        return results
    k = min(k, labels.identity_count)
    fetch = min(total, max(4 * k, 32))
    pending = np.arange(len(queries))
    while len(pending):
        sims, ids = view.nearest(queries[pending], fetch)
        short = []
        for row, query in enumerate(pending):
            found = group_by_identity(sims[row], ids[row], labels)
            results[query] = found if score == "mean" else found[:k]
            if len(found) < k and fetch < total:
                short.append(query)
        pending = np.asarray(short, dtype=np.int64)
        fetch = min(total, fetch * 4)
    if score == "mean":
        results = [mean_scores(queries[i], found, k, view) for i, found in enumerate(results)]
    return results


def nearest_items(view: GalleryView, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest items of each query: (distances (Q, k) float64, 0..2 and inf where
    none, item ids (Q, k) int64, -1 where none)."""
    if len(view) == 0:
        return np.full((len(queries), k), np.inf), np.full((len(queries), k), -1, np.int64)
    sims, ids = view.nearest(queries, min(k, len(view)))
    distances = similarity_to_distance(sims)
    distances[ids < 0] = np.inf
    return distances, ids
