"""Self-check of a gallery: its files against the database, and its index against exact search.

The exact ground truth is :func:`exact_knn`, a free function over chunks of stored
embeddings that keeps the best ``k`` per query in a FAISS result heap, as
faiss/contrib/exhaustive_search.py's ``knn_ground_truth`` does: memory stays bounded by
one chunk however large the gallery.  :func:`measure_recall` compares the index's answers
(approximate for IVF, IVF-PQ and HNSW) with it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import faiss
import numpy as np

from reid.decision import similarity_to_distance
from reid.errors import GalleryError
from reid.gallery.files import FileRecord, verify_file
from reid.gallery.records import ItemMeta, RecallReport
from reid.gallery.search import GalleryView
from reid.gallery.shards import CHUNK, Shard

# Distances (Euclidean between unit embeddings, 0..2) at which two items are the same image
# (the same pixels, saved as another file, embed alike up to float32 rounding, which the
# square root of 2 - 2 cos turns into up to a few thousandths), and near duplicates (a
# re-encoded or barely changed photo: counted, never refused).
SAME_IMAGE = 0.01
NEAR_DUPLICATE = 0.1
# Items the duplicate scan of a check takes as queries (a sample from its seed beyond that).
SCAN_ITEMS = 10_000


def verify_files(folder: Path, records: Iterable[FileRecord]) -> int:
    """Check each file's size and SHA-256 against its record; how many were checked.

    Raises GalleryError naming the first missing, truncated or altered file.
    """
    count = 0
    for record in records:
        verify_file(folder / record.name, record)
        count += 1
    return count


def verify_ids(folder: Path, shards: Sequence[Shard], db_ids: np.ndarray) -> None:
    """Raise GalleryError unless the ids in ``shards``, taken together, are exactly the
    database's item ids ``db_ids`` (int64, ascending), each once."""
    stored = np.sort(np.concatenate([np.zeros(0, np.int64)] + [shard.ids for shard in shards]))
    if len(stored) == len(db_ids) and np.array_equal(stored, db_ids):
        return
    missing = np.setdiff1d(db_ids, stored).size
    extra = np.setdiff1d(stored, db_ids).size
    repeated = len(stored) - len(np.unique(stored))
    raise GalleryError(
        f"{folder}: index and database disagree ({missing} items missing from the index, "
        f"{extra} index entries without an item, {repeated} repeated)"
    )


def exact_knn(
    queries: np.ndarray, chunks: Iterable[tuple[np.ndarray, np.ndarray]], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The exact ``k`` largest inner products of each of ``queries`` (Q, D) float32 over a
    database given as chunks of ``(ids (N,) int64, embeddings (N, D) float32)``.

    Returns (similarities (Q, k) float32, ids (Q, k) int64), best first; -1 pads a row when
    the database holds fewer than ``k`` items.  For unit embeddings the largest inner
    product is the smallest Euclidean distance.
    """
    heap = faiss.ResultHeap(len(queries), k, keep_max=True)
    for chunk_ids, vectors in chunks:
        sims, rows = faiss.knn(queries, vectors, min(k, len(chunk_ids)), metric=faiss.METRIC_INNER_PRODUCT)
        heap.add_result(sims, chunk_ids[rows])
    heap.finalize()
    return heap.D, heap.I


def measure_recall(view: GalleryView, queries: int, k: int, seed: int) -> RecallReport:
    """Recall@1 and @k of ``view``'s index against :func:`exact_knn` over its chunks, with up
    to ``queries`` stored items (drawn with ``seed``) as queries; each query's own item is
    left out of both answers.  Queries per second are measured for both."""
    kind, ids = view.kind, view.labels.ids
    if len(ids) < 2:
        return RecallReport(kind, 0, k, 1.0, 1.0, 0.0, 0.0)
    k = min(k, len(ids) - 1)
    own = np.sort(np.random.default_rng(seed).choice(ids, min(queries, len(ids)), replace=False))
    probe = view.originals(own)
    start = time.perf_counter()
    _, approx = view.nearest(probe, k + 1)
    index_time = time.perf_counter() - start
    start = time.perf_counter()
    _, exact = exact_knn(probe, view.chunks(), k + 1)
    exact_time = time.perf_counter() - start
    hits_1, hits_k = 0, 0.0
    for i, item in enumerate(own):
        got = [x for x in approx[i] if x != item and x >= 0][:k]
        want = [x for x in exact[i] if x != item and x >= 0][:k]
        hits_1 += int(bool(got) and got[0] == want[0])
        hits_k += len(set(got) & set(want)) / k
    return RecallReport(
        index=kind,
        queries=len(own),
        k=k,
        recall_at_1=hits_1 / len(own),
        recall_at_k=hits_k / len(own),
        index_qps=len(own) / max(index_time, 1e-9),
        exact_qps=len(own) / max(exact_time, 1e-9),
    )


def nearest_kept(
    view: GalleryView, items: Sequence[ItemMeta], vectors: np.ndarray, photos: Sequence[int]
) -> list[tuple[float, str]]:
    """For each position of ``photos`` (into ``items`` and their unit ``vectors`` (N, D)):
    the distance to, and the identity of, its nearest neighbour among ``view``'s items and
    the photos before it in the batch; (inf, "") where there is none."""
    if not photos:
        return []
    queries = np.ascontiguousarray(vectors[list(photos)], dtype=np.float32)
    found = [(math.inf, "")] * len(photos)
    if len(view):
        sims, ids = view.nearest(queries, 1)
        names = [view.labels.names[code] for code in view.labels.lookup(np.maximum(ids[:, 0], 0))]
        distances = similarity_to_distance(sims[:, 0])
        found = [(float(d), n) if i >= 0 else (math.inf, "") for d, n, i in zip(distances, names, ids[:, 0], strict=True)]
    # The batch's own neighbours, nearest first; the first one before a photo is its nearest earlier one.
    sims, rows = faiss.knn(queries, queries, min(len(photos), 8), metric=faiss.METRIC_INNER_PRODUCT)
    distances = similarity_to_distance(sims)
    for j in range(len(photos)):
        earlier = np.flatnonzero((rows[j] >= 0) & (rows[j] < j))
        if len(earlier) and distances[j, earlier[0]] < found[j][0]:
            found[j] = (float(distances[j, earlier[0]]), items[photos[rows[j, earlier[0]]]].identity)
    return found


def scan_duplicates(view: GalleryView, limit: int = SCAN_ITEMS, seed: int = 0) -> tuple[int, int, int]:
    """(items scanned, items within :data:`SAME_IMAGE` of an item of another identity, items
    within :data:`NEAR_DUPLICATE` of another item of their own): each item's nearest other
    items by the index, for every item or ``limit`` drawn with ``seed``."""
    ids = view.labels.ids
    if len(ids) > limit:
        ids = np.sort(np.random.default_rng(seed).choice(ids, limit, replace=False))
    other_identity, near = 0, 0
    for start in range(0, len(ids), CHUNK):
        own = ids[start : start + CHUNK]
        sims, found = view.nearest(view.originals(own), min(4, len(view)))
        distances = similarity_to_distance(sims)
        codes = view.labels.lookup(np.maximum(found, 0))
        own_codes = view.labels.lookup(own)[:, None]
        others = (found >= 0) & (found != own[:, None])
        other_identity += int((others & (distances <= SAME_IMAGE) & (codes != own_codes)).any(axis=1).sum())
        near += int((others & (distances <= NEAR_DUPLICATE) & (codes == own_codes)).any(axis=1).sum())
    return len(ids), other_identity, near
