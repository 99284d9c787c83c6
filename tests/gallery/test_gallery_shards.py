"""Galleries split across several index files, searched together through faiss.IndexShards."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from gallery_helpers import clustered, make_card, metas

from reid.errors import GalleryError
from reid.gallery import DB_FILE, Gallery, IndexSpec, open_gallery


def enrol(folder: Path, spec: IndexSpec, vectors: np.ndarray, labels: list[str], batch: int = 250) -> Gallery:
    gallery = Gallery.create(folder, make_card(), spec)
    for start in range(0, len(labels), batch):
        gallery.add(vectors[start : start + batch], metas(labels[start : start + batch], f"b{start}"))
    return gallery


def shard_rows(folder: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(folder / DB_FILE) as db:
        return db.execute("SELECT name, count FROM shards ORDER BY position").fetchall()


# Distances come from the inner product in float32 as sqrt(2 - 2 s): near 0 the square root
# turns the rounding of s (a few 1e-8) into up to ~3.5e-4, so two exact searches that sum
# in another order may report a self-match as 0.0 or 0.00035.  Squared distances carry the
# rounding of s itself; this bound is a few float32 ulps of 2 - 2 s, however busy the machine.
SQUARED_BOUND = 1e-5


def exact_distances(queries: np.ndarray, vectors: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Euclidean distances of each query to the items ``ids`` (item n is ``vectors[n - 1]``), in float64."""
    rows = vectors.astype(np.float64)[ids - 1]
    return np.linalg.norm(rows - queries.astype(np.float64)[:, None, :], axis=2)


def assert_same_neighbours(queries: np.ndarray, vectors: np.ndarray, one: tuple, many: tuple) -> None:
    """Both answers are exact k-nearest lists: each reported distance is its item's true
    distance, both lists hold the same true distances, and the items agree except where
    two of them are equally near (a tie may come out in either order)."""
    (one_d, one_ids), (many_d, many_ids) = one, many
    truths = []
    for d, ids in ((one_d, one_ids), (many_d, many_ids)):
        truth = exact_distances(queries, vectors, ids)
        np.testing.assert_allclose(d**2, truth**2, atol=SQUARED_BOUND)
        truths.append(truth)
    np.testing.assert_allclose(truths[1] ** 2, truths[0] ** 2, atol=SQUARED_BOUND)
    differ = many_ids != one_ids
    if differ.any():
        gaps = np.abs(np.diff(truths[0] ** 2, axis=1))
        tied = np.zeros_like(differ)
        tied[:, 1:] |= gaps < SQUARED_BOUND
        tied[:, :-1] |= gaps < SQUARED_BOUND
        assert tied[differ].all(), "items differ where their distances are not tied"


def test_flat_shards_answer_exactly_as_one_flat_index(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(250, 8, spread=0.5, seed=2)
    queries = np.concatenate([centres, vectors[::7]])
    with (
        enrol(tmp_path / "one", IndexSpec("flat"), vectors, labels) as one,
        enrol(tmp_path / "many", IndexSpec("flat", shard_size=500), vectors, labels) as many,
    ):
        # 2000 items fill four shards; the fifth, active one starts empty.
        assert one.shard_count == 1 and many.shard_count == 5
        assert [count for _, count in shard_rows(tmp_path / "many")] == [500] * 4
        assert many.info().shards == 5 and many.index_kind == "flat"
        for k in (1, 10, 50):
            assert_same_neighbours(queries, vectors, one.search_items(queries, k), many.search_items(queries, k))
        for score, asked in (("best", queries), ("mean", centres[:30])):
            k = 5 if score == "best" else 3
            for a, b in zip(many.search(asked, k=k, score=score), one.search(asked, k=k, score=score)):
                assert [m.identity for m in a] == [m.identity for m in b]
                np.testing.assert_allclose([m.distance**2 for m in a], [m.distance**2 for m in b], atol=SQUARED_BOUND)
        assert many.recall(queries=200, k=5).recall_at_1 == 1.0


def test_removal_goes_to_the_right_shards_and_survives_reopening(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(250, 8, spread=0.5, seed=2)
    # "roamer" is enrolled in every batch, so its items lie in every shard.
    roamer = [f"roamer-{n}" for n in range(len(labels) // 250)]
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card(), IndexSpec("flat", shard_size=500)) as gallery:
        for n, start in enumerate(range(0, len(labels), 250)):
            batch = labels[start : start + 250]
            gallery.add(vectors[start : start + 250], metas(batch, f"b{start}"))
            gallery.add(centres[n : n + 1] * 0.5 + vectors[start : start + 1], metas(["roamer"], roamer[n]))
        assert gallery.shard_count == 5 and len(gallery) == 2008
        before = {name for name, _ in shard_rows(folder)}
        assert gallery.remove_identity("roamer") == 8
        # Every sealed shard held a roamer, so each was rewritten under a new name.
        after = {name for name, _ in shard_rows(folder)}
        assert len(after) == 4 and not before & after
        assert gallery.remove_identity("id0000") == 8
        # id0000 filled the first shard's first 8 slots; that shard shrank, no other changed.
        assert shard_rows(folder)[0][1] == 492
    with open_gallery(folder) as reopened:
        assert len(reopened) == 1992 and reopened.identity_count == 249
        assert {s.identity for s in reopened.identities()} == {f"id{i:04d}" for i in range(1, 250)}
        answers = reopened.search(centres[1:40], k=1)
        assert [a[0].identity for a in answers] == [f"id{i:04d}" for i in range(1, 40)]
        assert reopened.check(queries=50).database == "ok"
    with sqlite3.connect(folder / DB_FILE) as db:
        (active,) = db.execute("SELECT value FROM meta WHERE key = 'snapshot_name'").fetchone()
    # Files of replaced shards are gone; only those the database names are left.
    named = sorted([name for name, _ in shard_rows(folder)] + [active])
    assert sorted(p.name for p in folder.glob("index-*.faiss")) == named


def test_a_shard_emptied_by_removal_is_dropped(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(250, 8, seed=4)
    labels = ["early"] * 500 + labels[500:]
    folder = tmp_path / "g"
    with enrol(folder, IndexSpec("flat", shard_size=500), vectors, labels) as gallery:
        assert gallery.shard_count == 5
        assert gallery.remove_identity("early") == 500
        assert gallery.shard_count == 4 and len(gallery) == 1500
    with open_gallery(folder) as reopened:
        assert reopened.shard_count == 4 and len(reopened) == 1500


def test_a_damaged_shard_file_is_named(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(250, 8, seed=4)
    folder = tmp_path / "g"
    enrol(folder, IndexSpec("flat", shard_size=500), vectors, labels).close()
    name = shard_rows(folder)[1][0]
    path = folder / name
    damaged = bytearray(path.read_bytes())
    damaged[len(damaged) // 2] ^= 0x01
    path.write_bytes(bytes(damaged))
    with pytest.raises(GalleryError) as caught:
        Gallery.open(folder)
    assert str(caught.value) == f"{path}: gallery file is corrupt (checksum does not match the database)"
    path.unlink()
    with pytest.raises(GalleryError, match=rf"{name}: gallery file is missing"):
        Gallery.open(folder)


def test_ids_are_verified_across_shards(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(250, 8, seed=4)
    folder = tmp_path / "g"
    enrol(folder, IndexSpec("flat", shard_size=500), vectors, labels).close()
    with sqlite3.connect(folder / DB_FILE) as db:
        db.execute("DELETE FROM shards WHERE position = 2")
    with pytest.raises(GalleryError, match=r"disagree \(500 items missing from the index, 0 index entries"):
        Gallery.open(folder)


def test_reindex_into_and_out_of_shards(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(250, 8, spread=0.5, seed=6)
    folder = tmp_path / "g"
    with enrol(folder, IndexSpec("flat"), vectors, labels, batch=2000) as gallery:
        _, expected = gallery.search_items(centres, 10)
        gallery.reindex(IndexSpec("flat", shard_size=600))
        assert gallery.shard_count == 4 and [c for _, c in shard_rows(folder)] == [600, 600, 600]
        assert len(list(folder.glob("index-*.faiss"))) == 4
        np.testing.assert_array_equal(gallery.search_items(centres, 10)[1], expected)
        gallery.reindex(IndexSpec("hnsw", shard_size=1000))
        # 2000 items fill two shards exactly; the active one starts empty.
        assert gallery.shard_count == 3 and gallery.index_kind == "hnsw"
        assert gallery.recall(queries=200, k=5).recall_at_1 >= 0.95
        gallery.reindex(IndexSpec("flat"))
        assert gallery.shard_count == 1 and shard_rows(folder) == []
        np.testing.assert_array_equal(gallery.search_items(centres, 10)[1], expected)


def test_ivfpq_shards_start_from_the_trained_template(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(500, 8, spread=0.5, seed=7)
    spec = IndexSpec("ivfpq", train_min=1300, pq_bits=5, shard_size=1500)
    folder = tmp_path / "g"
    with enrol(folder, spec, vectors, labels, batch=500) as gallery:
        # Trained once, at 1500 items; sealed shards and the new active one share its lists.
        assert gallery.shard_count == 3 and gallery.index_kind == "ivfpq"
        assert len(list(folder.glob("template-*.faiss"))) == 1
        assert len(list(folder.glob("vec-*.f16"))) == 3
        assert gallery.remove_identity("id0200") == 8
        assert gallery.recall(queries=300, k=5).recall_at_1 >= 0.95
    with open_gallery(folder) as reopened:
        assert len(reopened) == 3992 and reopened.shard_count == 3
        found = [a[0].identity for a in reopened.search(centres[190:210], k=1)]
        assert found[:10] + found[11:] == [f"id{i:04d}" for i in range(190, 210) if i != 200]
        assert found[10] != "id0200"


def test_readers_follow_a_writer_across_new_shards(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(250, 8, seed=8)
    folder = tmp_path / "g"
    writer = Gallery.create(folder, make_card(), IndexSpec("flat", shard_size=500))
    with writer, open_gallery(folder) as reader:
        writer.add(vectors[:400], metas(labels[:400], "a"))
        assert reader.refresh() and len(reader) == 400 and reader.shard_count == 1
        # A batch is never split: this one overfills the shard, which is then sealed.
        writer.add(vectors[400:1200], metas(labels[400:1200], "b"))
        assert reader.refresh() and len(reader) == 1200 and reader.shard_count == 2
        reader.add(vectors[1200:], metas(labels[1200:], "c"))
        assert writer.refresh() and len(writer) == 2000 and writer.shard_count == 3
        assert writer.search(centres[249], k=1)[0][0].identity == "id0249"


def test_format_1_gallery_is_read_and_upgraded_by_its_first_write(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(20, 4, seed=9)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        gallery.add(vectors[:40], metas(labels[:40], "a"))
    # What reid wrote before shards: no shards table, no vector or template keys, format 1.
    with sqlite3.connect(folder / DB_FILE) as db:
        db.execute("DROP TABLE shards")
        db.execute("ALTER TABLE items DROP COLUMN row_sha256")
        db.execute(
            "DELETE FROM meta WHERE key LIKE 'snapshot_vectors_%' OR key LIKE 'template_%' OR key = 'facts_sha256'"
        )
        db.execute("UPDATE meta SET value = '1' WHERE key = 'format'")
    with open_gallery(folder) as old:
        assert len(old) == 40 and old.meta.format == 1 and old.shard_count == 1
        old.add(vectors[40:], metas(labels[40:], "b"))
        assert old.meta.format == 3
    with open_gallery(folder) as upgraded:
        assert len(upgraded) == 80 and upgraded.meta.format == 3
        assert upgraded.check(queries=10).checksums is True
        assert upgraded.search(centres[19], k=1)[0][0].identity == "id0019"
