"""The gallery's parts on their own: the catalogue's upgrade steps, exact ground truth over
chunks, and identity scoring."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import faiss
import numpy as np
import pytest

from reid.decision import similarity_to_distance
from reid.gallery import DB_FILE, Gallery, open_gallery
from reid.gallery.catalogue import FORMAT, MIGRATIONS, Catalogue, facts_hash
from reid.gallery.check import exact_knn
from reid.gallery.index import BLAS_FROM_QUERIES, SINGLE_THREAD_QUERIES, search_settings
from reid.gallery.search import IdentityLabels, nearest_identities, rerank

from gallery_helpers import clustered, make_card, metas


def test_upgrade_steps_are_named_and_lead_to_the_current_format() -> None:
    assert [step.to_format for step in MIGRATIONS] == list(range(2, FORMAT + 1))
    assert all(step.name for step in MIGRATIONS)


def test_a_format_2_catalogue_gets_only_the_checksum_step(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(5, 4, seed=3)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
    with sqlite3.connect(folder / DB_FILE) as db:
        db.execute("ALTER TABLE items DROP COLUMN row_sha256")
        db.execute("DELETE FROM meta WHERE key = 'facts_sha256'")
        db.execute("UPDATE meta SET value = '2' WHERE key = 'format'")
    catalogue = Catalogue(folder)
    try:
        catalogue.upgrade(2)
        meta = catalogue.read_meta()
        assert meta["format"] == str(FORMAT) and meta["facts_sha256"] == facts_hash(meta)
        assert catalogue.problems(FORMAT) == []
    finally:
        catalogue.close()
    with open_gallery(folder) as upgraded:
        assert upgraded.check(queries=5).checksums is True and len(upgraded) == 20


def chunked(ids: np.ndarray, vectors: np.ndarray, size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(ids[s : s + size], vectors[s : s + size]) for s in range(0, len(ids), size)]


@pytest.mark.parametrize("size", [7, 64, 1000])
def test_exact_knn_over_chunks_equals_one_exhaustive_search(size: int) -> None:
    vectors, _, _ = clustered(30, 10, seed=5)
    ids = np.arange(100, 100 + len(vectors), dtype=np.int64)
    queries = vectors[::17]
    sims, found = exact_knn(queries, chunked(ids, vectors, size), 5)
    whole = faiss.IndexFlatIP(vectors.shape[1])
    whole.add(vectors)
    want_sims, want_rows = whole.search(queries, 5)
    np.testing.assert_array_equal(found, ids[want_rows])
    np.testing.assert_allclose(sims, want_sims, rtol=1e-6)
    assert found.dtype == np.int64 and sims.shape == (len(queries), 5)


def test_exact_knn_pads_when_the_database_is_small() -> None:
    vectors, _, _ = clustered(1, 3, seed=6)
    _, found = exact_knn(vectors[:1], chunked(np.arange(3, dtype=np.int64), vectors, 2), 5)
    assert sorted(found[0][:3]) == [0, 1, 2] and list(found[0][3:]) == [-1, -1]


def test_identities_by_nearest_item_and_by_mean_distance() -> None:
    vectors, labels, centres = clustered(6, 5, seed=7)
    ids = np.arange(1, len(vectors) + 1, dtype=np.int64)
    names = IdentityLabels()
    names.extend([(int(i), label) for i, label in zip(ids, labels, strict=True)])
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(vectors, ids)

    def originals(wanted: np.ndarray) -> np.ndarray:
        return vectors[np.asarray(wanted) - 1]

    class View:
        """The loaded view search reads (reid.gallery.search.GalleryView), over one flat index."""

        def __init__(self) -> None:
            self.labels, self.dim, self.kind = names, vectors.shape[1], "flat"
            self.nearest, self.originals = index.search, originals

        def __len__(self) -> int:
            return len(ids)

    query = centres[2:3]
    best = nearest_identities(View(), query, 3, "best")[0]
    mean = nearest_identities(View(), query, 3, "mean")[0]
    assert best[0].identity == mean[0].identity == "id0002" and len(best) == len(mean) == 3
    nearest = similarity_to_distance(vectors @ query[0])
    assert best[0].distance == pytest.approx(nearest[10:15].min(), abs=1e-5)
    assert mean[0].distance == pytest.approx(nearest[10:15].mean(), abs=1e-5)
    assert [m.distance for m in best] == sorted(m.distance for m in best)
    sims, ranked = rerank(query, np.array([[5, -1, 12, 11]]), 2, originals)
    assert list(ranked[0]) == sorted([5, 12, 11], key=lambda i: -float(vectors[i - 1] @ query[0]))[:2]
    assert sims[0, 0] >= sims[0, 1]


@pytest.mark.parametrize("queries", [1, 3, 4, 32, 200])
def test_search_settings_batch_small_query_sets_and_restore_faiss(queries: int) -> None:
    # FAISS 1.15 scans the items once per query below queries x dim = 128,000 (100 queries
    # at 1280-d), ten times slower than one matrix multiply for a video's batch of 32.
    cvar = faiss.cvar
    before = (faiss.omp_get_max_threads(), cvar.distance_compute_blas_threshold, cvar.distance_compute_blas_query_bs)
    with search_settings(queries):
        blas = queries >= cvar.distance_compute_blas_threshold and queries * 1280 >= cvar.distance_compute_blas_threshold
        assert blas == (queries >= BLAS_FROM_QUERIES)
        assert (faiss.omp_get_max_threads() == 1) == (queries < SINGLE_THREAD_QUERIES)
        rng = np.random.default_rng(queries)
        items = rng.standard_normal((500, 1280), dtype=np.float32)
        index = faiss.IndexFlatIP(1280)
        index.add(items)
        sims, ids = index.search(items[:queries], 3)
    expected = np.argsort(-(items[:queries] @ items.T), axis=1)[:, :3]
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_allclose(sims, np.take_along_axis(items[:queries] @ items.T, expected, axis=1), rtol=1e-4)
    assert (faiss.omp_get_max_threads(), cvar.distance_compute_blas_threshold, cvar.distance_compute_blas_query_bs) == before
