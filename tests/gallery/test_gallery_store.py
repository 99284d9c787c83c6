"""The gallery store on real FAISS indexes and real SQLite files."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import faiss
import numpy as np
import pytest
from gallery_helpers import DIM, clustered, make_card, metas

from reid.errors import ConfigError, GalleryError
from reid.gallery import DB_FILE, Gallery, IndexSpec, ItemMeta, open_gallery, resolve_gallery_path
from reid.gallery.files import FileRecord, read_snapshot
from reid.gallery.index import auto_nlist
from reid.gallery.lock import gallery_lock
from reid.gallery.maintenance import COMPACT_MIN_ITEMS


def snapshot_of(folder: Path) -> Path:
    (path,) = folder.glob("index-*.faiss")
    return path


@pytest.mark.parametrize(
    "spec",
    [IndexSpec("flat"), IndexSpec("hnsw"), IndexSpec("ivf", train_min=200)],
    ids=["flat", "hnsw", "ivf"],
)
def test_enrol_query_remove_reopen(tmp_path: Path, spec: IndexSpec) -> None:
    vectors, labels, centres = clustered(40, 8)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card(), spec) as gallery:
        for start in range(0, len(labels), 64):
            gallery.add(vectors[start : start + 64], metas(labels[start : start + 64], f"b{start}"))
        assert len(gallery) == 320 and gallery.identity_count == 40
        assert gallery.index_kind == spec.kind
        answers = gallery.search(centres, k=3)
        assert [a[0].identity for a in answers] == [f"id{i:04d}" for i in range(40)]
        assert all(len({m.identity for m in a}) == 3 for a in answers)
        assert all(a[0].distance < a[1].distance for a in answers)
        assert gallery.remove_identity("id0003") == 8
        assert len(gallery) == 312 and gallery.identity_count == 39
    with open_gallery(folder) as reopened:
        assert len(reopened) == 312
        assert reopened.index_kind == spec.kind
        answers = reopened.search(centres[[2, 3, 4]], k=2)
        assert answers[0][0].identity == "id0002" and answers[2][0].identity == "id0004"
        assert all(m.identity != "id0003" for m in answers[1])
        item = reopened.get_items([answers[0][0].item_id])[answers[0][0].item_id]
        assert item.identity == "id0002" and item.camera == "c1" and item.box == (0, 0, 64, 128)
        assert [s.identity for s in reopened.identities()][:3] == ["id0000", "id0001", "id0002"]


def test_identity_scores_best_and_mean(tmp_path: Path) -> None:
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        query = np.zeros(DIM, np.float32)
        query[0] = 1
        near = query.copy()
        near[1] = 0.2
        far = query.copy()
        far[1] = 1.5
        mid = query.copy()
        mid[2] = 0.5
        # "a": one very close item and one far one; "b": two moderately close ones.
        gallery.add(
            np.stack([near, far, mid, mid + 0.01]), [ItemMeta("a"), ItemMeta("a"), ItemMeta("b"), ItemMeta("b")]
        )
        best = gallery.search(query, k=2, score="best")[0]
        mean = gallery.search(query, k=2, score="mean")[0]
        assert [m.identity for m in best] == ["a", "b"]
        assert [m.identity for m in mean] == ["b", "a"]
        assert mean[1].distance > best[0].distance
        with pytest.raises(ConfigError):
            gallery.search(query, score="median")


def test_search_finds_identities_beyond_the_first_items(tmp_path: Path) -> None:
    # One identity owns the 200 nearest items; top-3 identities must still come back.
    vectors, labels, centres = clustered(3, 200, spread=0.05)
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        answer = gallery.search(centres[0], k=3)[0]
        assert [m.identity for m in answer][0] == "id0000" and len(answer) == 3
        distances, ids = gallery.search_items(centres[0], k=5)
        assert distances.shape == (1, 5) and (np.diff(distances[0]) >= 0).all()
        assert gallery.get_items(ids[0].tolist())[int(ids[0, 0])].identity == "id0000"


def test_empty_gallery_answers_nothing(tmp_path: Path) -> None:
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        assert gallery.search(np.ones((2, DIM), np.float32), k=5) == [[], []]
        assert gallery.info().items == 0


def test_duplicates_are_skipped(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(2, 3)
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        first = gallery.add(vectors, metas(labels))
        assert len(first.ids) == 6 and first.duplicates == []
        again = gallery.add(vectors[:4], metas(labels[:4]))
        assert again.ids == [] and again.duplicates == [0, 1, 2, 3]
        repeated = [ItemMeta("x", image_hash="same"), ItemMeta("x", image_hash="same")]
        result = gallery.add(vectors[:2], repeated)
        assert len(result.ids) == 1 and result.duplicates == [1]
        assert gallery.known_hashes(["same", "img-0", "nope"]) == {"same", "img-0"}


def test_bad_embeddings_are_refused(tmp_path: Path) -> None:
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        with pytest.raises(ConfigError, match="dimension"):
            gallery.add(np.ones((1, DIM + 1)), [ItemMeta("a")])
        with pytest.raises(ConfigError, match="NaN"):
            gallery.add(np.full((1, DIM), np.nan), [ItemMeta("a")])
        with pytest.raises(ConfigError, match="identity"):
            gallery.add(np.ones((1, DIM)), [ItemMeta(" ")])
        with pytest.raises(ConfigError, match="2 embeddings for 1 items"):
            gallery.add(np.ones((2, DIM)), [ItemMeta("a")])
        assert len(gallery) == 0


def test_segments_are_compacted_and_reopened(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(100, 50, seed=3)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        for start in range(0, len(labels), 500):
            gallery.add(vectors[start : start + 500], metas(labels[start : start + 500], f"b{start}"))
        info = gallery.info()
        assert info.items == 5000
        # The ninth batch crossed 4096 pending items and was folded into a snapshot;
        # the tenth is a segment again.
        assert COMPACT_MIN_ITEMS // 500 + 1 == 9
        assert info.segments == 1
        assert len(list(folder.glob("index-*.faiss"))) == 1
        assert len(list(folder.glob("seg-*.bin"))) == info.segments
    with open_gallery(folder) as reopened:
        assert len(reopened) == 5000
        assert reopened.search(centres[:5], k=1)[4][0].identity == "id0004"


def test_model_mismatch_names_both_models(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    Gallery.create(folder, make_card("alpha", "aaaa1111")).close()
    with pytest.raises(GalleryError) as caught:
        Gallery.open_or_create(folder, make_card("beta", "bbbb2222"))
    message = str(caught.value)
    assert "'alpha'" in message and "aaaa1111" in message and "'beta'" in message and "bbbb2222" in message
    assert "\n" not in message
    with open_gallery(folder) as gallery:
        with pytest.raises(GalleryError, match="beta"):
            gallery.check_model(make_card("beta", "bbbb2222"))
        gallery.check_model(make_card("alpha", "aaaa1111"))


def test_index_kind_of_existing_gallery_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    Gallery.create(folder, make_card()).close()
    with pytest.raises(ConfigError, match="reindex"):
        Gallery.open_or_create(folder, make_card(), IndexSpec("hnsw"))
    with pytest.raises(GalleryError, match="already exists"):
        Gallery.create(folder, make_card())
    Gallery.open_or_create(folder, make_card(), IndexSpec("flat")).close()


def test_corrupt_index_is_detected(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(5, 4)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        gallery.reindex(IndexSpec("flat"))  # folds the segment into the snapshot
    path = snapshot_of(folder)
    original = path.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0xFF
    path.write_bytes(bytes(flipped))
    with pytest.raises(GalleryError, match="corrupt"):
        Gallery.open(folder)
    path.write_bytes(original[: len(original) // 3])
    with pytest.raises(GalleryError, match="truncated"):
        Gallery.open(folder)
    path.unlink()
    with pytest.raises(GalleryError, match="missing"):
        Gallery.open(folder)
    path.write_bytes(original)
    with open_gallery(folder) as gallery:
        assert len(gallery) == 20


def test_corrupt_segment_is_detected(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(5, 4)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
    (segment,) = folder.glob("seg-*.bin")
    segment.write_bytes(segment.read_bytes()[:-7])
    with pytest.raises(GalleryError, match=r"seg-.*truncated"):
        Gallery.open(folder)


def test_unreadable_faiss_file_with_matching_record(tmp_path: Path) -> None:
    # A file whose checksum matches (as if the database had recorded garbage) still fails cleanly.
    path = tmp_path / "index-x.faiss"
    path.write_bytes(b"not a faiss index at all")
    record = FileRecord(path.name, path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    with pytest.raises(GalleryError, match="not a readable FAISS index"):
        read_snapshot(path, record)


def test_index_and_database_are_verified_against_each_other(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(5, 4)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
    with sqlite3.connect(folder / DB_FILE) as db:
        db.execute("DELETE FROM items WHERE id = 3")
    with pytest.raises(GalleryError, match=r"disagree \(0 items missing from the index, 1 index entries"):
        Gallery.open(folder)


def test_not_a_gallery(tmp_path: Path) -> None:
    with pytest.raises(GalleryError, match="no gallery here"):
        Gallery.open(tmp_path / "nothing")
    folder = tmp_path / "junk"
    folder.mkdir()
    (folder / DB_FILE).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(GalleryError, match="gallery.db: .*not a database"):
        Gallery.open(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    sqlite3.connect(empty / DB_FILE).close()
    with pytest.raises(GalleryError, match="empty gallery database"):
        Gallery.open(empty)


def test_leftovers_of_crashed_writers_are_removed(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(2, 2)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        stray = [
            folder / "seg-00000009-deadbeef.bin",
            folder / "index-00000009-deadbeef.faiss",
            folder / ".seg-x.bin.tmp-1",
        ]
        for path in stray:
            path.write_bytes(b"half written")
        gallery.add(vectors, metas(labels))
        assert not any(path.exists() for path in stray)
        assert len(gallery) == 4


def test_lock_timeout_is_a_clear_error(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(1, 2)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card(), lock_timeout=0.2) as gallery:
        # The lock is held through another handle, as another process would hold it.
        with gallery_lock(folder, exclusive=True), pytest.raises(GalleryError, match="locked by another process"):
            gallery.add(vectors, metas(labels))
        gallery.add(vectors, metas(labels))
        assert len(gallery) == 2


def test_refresh_sees_other_writers(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(4, 3)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as writer, open_gallery(folder) as reader:
        writer.add(vectors[:6], metas(labels[:6], "a"))
        assert len(reader) == 0
        assert reader.refresh() and len(reader) == 6
        assert not reader.refresh()
        writer.add(vectors[6:], metas(labels[6:], "b"))
        writer.remove_identity("id0000")
        assert reader.refresh() and len(reader) == 9
        assert reader.search(centres[3], k=1)[0][0].identity == "id0003"
        # A stale writer catches up before it writes, losing nothing.
        reader.add(vectors[:3], metas(labels[:3], "c"))
        assert writer.refresh() and len(writer) == 12


def test_export_npz_and_jsonl(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(3, 2)
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        assert gallery.export(tmp_path / "out.npz") == 6
        assert gallery.export(tmp_path / "out.jsonl") == 6
        with pytest.raises(ConfigError, match=".npz"):
            gallery.export(tmp_path / "out.csv")
    data = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(data["embeddings"], vectors, atol=1e-6)
    assert list(data["identity"]) == labels and data["box"].shape == (6, 4)
    assert json.loads(str(data["meta"]))["items"] == 6
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["identity"] for line in lines] == labels and lines[0]["box"] == [0, 0, 64, 128]


def test_check_reports_recall_of_approximate_indexes(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(300, 10, spread=0.4, seed=1)
    with Gallery.create(tmp_path / "g", make_card(), IndexSpec("hnsw")) as gallery:
        gallery.add(vectors, metas(labels))
        report = gallery.check(queries=300, k=5)
        assert report.database == "ok" and report.items == 3000
        assert report.recall is not None and report.recall.index == "hnsw"
        assert report.recall.recall_at_1 >= 0.95 and report.recall.recall_at_k >= 0.9
        gallery.reindex(IndexSpec("ivf", train_min=1000, nprobe=4))
        ivf = gallery.recall(queries=300, k=5)
        assert ivf.index == "ivf" and 0.5 <= ivf.recall_at_1 <= 1.0
        gallery.reindex(IndexSpec("flat"))
        assert gallery.recall(queries=100).recall_at_1 == 1.0


def test_ivf_trains_once_big_enough_and_retrains_as_it_grows(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(100, 25)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card(), IndexSpec("ivf", train_min=600)) as gallery:
        gallery.add(vectors[:500], metas(labels[:500], "a"))
        assert gallery.index_kind == "flat"
        gallery.add(vectors[500:1000], metas(labels[500:1000], "b"))
        assert gallery.index_kind == "ivf"
        stored = faiss.read_index(str(snapshot_of(folder)))
        assert faiss.downcast_index(stored.index).nlist == auto_nlist(1000) == 25
        gallery.add(vectors[1000:2400], metas(labels[1000:2400], "c"))
        assert faiss.downcast_index(faiss.read_index(str(snapshot_of(folder))).index).nlist == 25
        # At 2500 items sqrt(N) = 50 lists, twice those trained: the index is retrained.
        gallery.add(vectors[2400:], metas(labels[2400:], "d"))
        assert faiss.downcast_index(faiss.read_index(str(snapshot_of(folder))).index).nlist == auto_nlist(2500) == 50
    with open_gallery(folder) as reopened:
        assert reopened.index_kind == "ivf" and len(reopened) == 2500
        assert reopened.search(centres[7], k=1)[0][0].identity == "id0007"


def test_gallery_names_resolve_under_galleries(tmp_path: Path) -> None:
    assert resolve_gallery_path("staff") == Path("galleries/staff")
    assert resolve_gallery_path(tmp_path) == tmp_path
    assert resolve_gallery_path("some/where") == Path("some/where")


def test_unknown_index_kind() -> None:
    with pytest.raises(ConfigError, match="^index .*: not an index kind; choose one of flat"):
        IndexSpec("annoy")


def test_a_failed_creation_leaves_no_folder(tmp_path: Path) -> None:
    folder = tmp_path / "deep" / "new"
    with pytest.raises(ConfigError, match="pq"):
        Gallery.create(folder, make_card(), IndexSpec(kind="ivfpq", pq_m=7))
    assert not (tmp_path / "deep").exists()
    with pytest.raises(ConfigError, match="pq"):
        Gallery.open_or_create(folder, make_card(), IndexSpec(kind="ivfpq", pq_m=7))
    assert not (tmp_path / "deep").exists()
    # An existing folder keeps what it held; only the gallery's own files go.
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="pq"):
        Gallery.create(folder, make_card(), IndexSpec(kind="ivfpq", pq_m=7))
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


def test_an_empty_gallery_is_discarded_and_a_filled_one_kept(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(2, 2)
    Gallery.create(tmp_path / "empty", make_card()).close()
    assert Gallery.discard_if_empty(tmp_path / "empty") and not (tmp_path / "empty").exists()
    with Gallery.create(tmp_path / "full", make_card()) as gallery:
        gallery.add(vectors, metas(labels))
    assert not Gallery.discard_if_empty(tmp_path / "full")
    with Gallery.open(tmp_path / "full") as gallery:
        assert len(gallery) == 4


def test_links_planted_as_lock_database_or_temporary_file_are_not_followed(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(2, 2)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
    outside = tmp_path / "outside"
    (folder / ".lock").unlink()
    (folder / ".lock").symlink_to(outside / "planted.lock")
    outside.mkdir()
    with pytest.raises(GalleryError, match=r"\.lock: the gallery lock is a link"):
        Gallery.open(folder)
    assert list(outside.iterdir()) == [], "nothing is created where the link points"
    (folder / ".lock").unlink()

    victim = outside / "victim.txt"
    victim.write_text("keep")
    (folder / f".export.jsonl.tmp-{os.getpid()}").symlink_to(victim)
    with Gallery.open(folder) as gallery:
        assert gallery.export(folder / "export.jsonl") == 4
        (tmp_path / "taken.jsonl").mkdir()
        with pytest.raises(ConfigError, match="taken.jsonl: the export needs a file name"):
            gallery.export(tmp_path / "taken.jsonl")
    assert victim.read_text() == "keep" and len((folder / "export.jsonl").read_text().splitlines()) == 4

    journal = folder / f"{DB_FILE}-journal"
    journal.symlink_to(victim)
    with pytest.raises(GalleryError, match="gallery.db-journal: is a link"):
        Gallery.open(folder)
    assert victim.read_text() == "keep"
