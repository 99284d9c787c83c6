"""The Milvus gallery on milvus-lite: the same answers as the FAISS gallery, its commit rule
under kill -9, its guarantees, and the CLI over it.  Skipped when pymilvus or milvus-lite is
not installed (the ``milvus`` extra)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from gallery_helpers import clustered, make_card, metas
from PIL import Image
from typer.testing import CliRunner

pytest.importorskip("pymilvus", reason="the Milvus gallery needs pymilvus (pip install 'reid-toolkit[milvus]')")
pytest.importorskip("milvus_lite", reason="the Milvus gallery tests run on milvus-lite (pip install 'reid-toolkit[milvus]')")

from reid.cli.app import app  # noqa: E402
from reid.errors import ConfigError, GalleryError, NameTakenError  # noqa: E402
from reid.gallery import Gallery, IndexSpec, ItemMeta, destroy_gallery, open_gallery  # noqa: E402
from reid.gallery import opener  # noqa: E402
from reid.gallery.milvus import MilvusGallery, parse_location  # noqa: E402
from reid.models import stand_in_model  # noqa: E402

HERE = Path(__file__).parent


def location(tmp_path: Path, collection: str = "staff") -> str:
    return f"milvus:{tmp_path / 'g.db'}/{collection}"


def test_locations_name_a_lite_file_or_a_server_and_never_credentials() -> None:
    lite = parse_location("milvus:data/g.db/staff")
    assert (lite.uri, lite.collection, lite.server) == ("data/g.db", "staff", False)
    server = parse_location("milvus://db.example:19531/staff")
    assert (server.uri, server.collection, server.server) == ("http://db.example:19531", "staff", True)
    assert parse_location("milvus://db.example/staff").uri == "http://db.example:19530"
    for bad, message in [
        ("milvus://root:secret@db.example:19530/staff", "credentials do not belong"),
        ("milvus:data/g.sqlite/staff", "FILE.db"),
        ("milvus:data/g.db/bad-name", "not a collection name"),
        ("milvus://db.example:19530/staff?token=x", "takes no query"),
    ]:
        with pytest.raises(ConfigError, match=message) as caught:
            parse_location(bad)
        assert "\n" not in str(caught.value) and "secret" not in str(caught.value)


def test_distances_are_euclidean_on_the_unit_sphere_from_the_inner_product(tmp_path: Path) -> None:
    card = make_card(dim=4)
    axes = np.eye(4, dtype=np.float32)
    with open_gallery(location(tmp_path), card) as gallery:
        gallery.add(np.stack([axes[0], axes[1], -axes[0]]), [ItemMeta("same"), ItemMeta("right"), ItemMeta("opposite")])
        distances, ids = gallery.search_items(axes[:1], k=3)
        assert ids[0].tolist() == [1, 2, 3]
        np.testing.assert_allclose(distances[0], [0.0, np.sqrt(2.0), 2.0], atol=1e-6)
        found = {m.identity: m.distance for m in gallery.search(axes[:1], k=3)[0]}
        assert found == pytest.approx({"same": 0.0, "right": np.sqrt(2.0), "opposite": 2.0}, abs=1e-6)


def test_answers_equal_the_faiss_gallery_on_the_same_vectors(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(60, 5, seed=3)
    queries = np.random.default_rng(4).normal(size=(300, vectors.shape[1])).astype(np.float32)
    queries[:60] += 3 * centres
    with Gallery.open_or_create(tmp_path / "faiss", make_card()) as faiss_gallery, open_gallery(
        location(tmp_path), make_card()
    ) as milvus:
        assert isinstance(milvus, MilvusGallery) and milvus.created
        faiss_gallery.add(vectors, metas(labels))
        assert milvus.add(vectors, metas(labels)).ids == list(range(1, 301))
        for score in ("best", "mean"):
            want, got = faiss_gallery.search(queries, k=5, score=score), milvus.search(queries, k=5, score=score)
            assert [[m.identity for m in row] for row in got] == [[m.identity for m in row] for row in want]
            np.testing.assert_allclose(
                [[m.distance for m in row] for row in got], [[m.distance for m in row] for row in want], atol=1e-5
            )
        def columns(items: list) -> list[tuple]:
            return [(i.id, i.identity, i.source, i.camera, i.frame, i.time, i.box, i.image_hash) for i in items]

        assert columns(milvus.items()) == columns(faiss_gallery.items())
        assert [(s.identity, s.items) for s in milvus.identities()] == [(s.identity, s.items) for s in faiss_gallery.identities()]
        np.testing.assert_allclose(milvus.embeddings([1, 300]), faiss_gallery.embeddings([1, 300]), atol=1e-7)


def test_remove_rename_and_calibrate_and_reopen(tmp_path: Path) -> None:
    vectors, labels, centres = clustered(30, 4)
    with open_gallery(location(tmp_path), make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        assert gallery.remove_identity("id0001") == 4 and len(gallery) == 116 and gallery.identity_count == 29
        assert gallery.remove_item(1).identity == "id0000" and len(gallery) == 115
        with pytest.raises(GalleryError, match="no item 1"):
            gallery.remove_item(1)
        assert gallery.rename_identity("id0002", "zed") == 4
        assert gallery.search(centres[2:3], k=1)[0][0].identity == "zed"
        assert [i.identity for i in gallery.items("zed")] == ["zed"] * 4
        with pytest.raises(ConfigError, match="already exists"):
            gallery.rename_identity("zed", "id0003")
        with pytest.raises(NameTakenError, match="only in case"):
            gallery.rename_identity("zed", "ID0003")
        with pytest.raises(GalleryError, match="no identity 'id0001'"):
            gallery.remove_identity("id0001")
        stored = gallery.calibrate(far=0.01)
        assert stored.stored and gallery.calibration == stored
    with open_gallery(location(tmp_path)) as again:
        assert len(again) == 115 and again.identity_count == 29 and again.calibration == stored
        assert "id0001" not in {m.identity for m in again.search(centres[1:2], k=29)[0]}
        assert again.check().items == 115


def test_a_gallery_made_again_in_its_collection_has_another_uid_and_open_handles_see_it(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(2, 2)
    where = location(tmp_path)
    with open_gallery(where, make_card()) as first, open_gallery(where) as reader:
        first.add(vectors, metas(labels))
        uid = first.uid
        assert len(uid) == 32 and reader.uid == uid == opener.gallery_uid(where)
        assert reader.refresh() and len(reader) == 4
        assert opener.gallery_names(where) == ["staff"] and opener.gallery_name(where) == "staff"
        destroy_gallery(where)
        assert opener.gallery_uid(where) is None and opener.gallery_names(where) == []
        with pytest.raises(GalleryError) as caught:
            reader.refresh()
        assert "\n" not in str(caught.value)
        with open_gallery(where, make_card()) as again:
            assert again.uid != uid and again.uid == opener.gallery_uid(where)
            again.add(vectors[:1], metas(labels[:1]))
        with open_gallery(where) as reopened:
            assert reopened.uid != uid and len(reopened) == 1


def test_threads_of_one_process_writing_through_their_own_handles_take_turns(tmp_path: Path) -> None:
    """As a server's threads do: each its handle, enrolments at once; none overwrites another's."""
    vectors, labels, _ = clustered(8, 5, seed=3)
    where = location(tmp_path)
    open_gallery(where, make_card()).close()
    failures: list[BaseException] = []

    def enrol(part: int) -> None:
        try:
            with open_gallery(where) as gallery:
                for start in range(part * 20, part * 20 + 20, 5):
                    gallery.add(vectors[start : start + 5], metas(labels[start : start + 5], prefix=f"img{start}"))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)

    threads = [threading.Thread(target=enrol, args=(part,)) for part in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not failures, failures[0]
    with open_gallery(where) as gallery:
        assert len(gallery) == 40 and gallery.check(queries=10).items == 40
        stored = {item.id: item.identity for item in gallery.items()}
        assert sorted(stored.values()) == sorted(labels[:40])
        # Every item's embedding is the one enrolled under its identity.
        found = gallery.search(vectors[:40], k=1)
        assert [row[0].identity for row in found] == list(labels[:40])


def test_a_collection_made_by_another_model_is_refused_in_one_line(tmp_path: Path) -> None:
    open_gallery(location(tmp_path), make_card()).close()
    with pytest.raises(GalleryError, match=r"made with model 'alpha' .* not model 'beta'") as caught:
        open_gallery(location(tmp_path), make_card(name="beta", fingerprint="beef"))
    assert "\n" not in str(caught.value)


def test_duplicates_are_skipped_and_the_same_image_under_another_name_refused(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(5, 2)
    with open_gallery(location(tmp_path), make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        again = gallery.add(vectors, metas(labels))
        assert again.ids == [] and again.duplicates == list(range(10))
        resaved = [ItemMeta("mallory", source="a.png", image_hash="other-bytes")]
        refused = gallery.add(vectors[:1], resaved, same_image="skip")
        assert refused.ids == [] and refused.conflicts == [(0, "id0000")] and len(gallery) == 10


def test_upserts_are_idempotent_and_reads_after_writes_see_them(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(4, 2)
    with open_gallery(location(tmp_path), make_card()) as gallery:
        gallery.add(vectors[:4], metas(labels[:4]))
        other = open_gallery(location(tmp_path))
        try:
            # Strong consistency: another handle sees the commit at once, then refreshes past it.
            gallery.add(vectors[4:], metas(labels[4:], "later"))
            assert other.refresh() and len(other) == 8 and not other.refresh()
        finally:
            other.close()
        # The same rows written twice (an enrolment retried after a lost answer) stay one row each.
        rows = gallery.call("query", gallery.where.collection, ids=[1, 2], output_fields=["*"])
        gallery.call("upsert", gallery.where.collection, [dict(r) for r in rows])
        count = gallery.call("query", gallery.where.collection, filter="id >= 0", output_fields=["count(*)"])
        assert count[0]["count(*)"] == 8 and gallery.check().items == 8


@pytest.mark.parametrize("writes", [3, 10])
def test_kill_during_an_enrolment_leaves_no_half_enrolled_identity(tmp_path: Path, writes: int) -> None:
    """A 200-item enrolment written 20 rows at a time, killed after ``writes`` of its 10 writes."""
    where = location(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(HERE / "milvus_enrol_worker.py"), where]
    whole = subprocess.run([*command, "whole", "100", "50", "0"], capture_output=True, text=True, env=env)
    assert whole.stdout.splitlines()[-1] == "committed 100", whole.stderr[-2000:]
    worker = subprocess.Popen([*command, "half", "200", "20", str(writes)], stdout=subprocess.PIPE, text=True, env=env)
    assert worker.stdout is not None
    seen = 0
    while seen < writes:
        line = worker.stdout.readline()
        assert line, "the worker ended before it was killed"
        seen += line.startswith("wrote")
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    with open_gallery(where) as gallery:
        raw = gallery.call("query", gallery.where.collection, filter="id >= 0", output_fields=["count(*)"])
        assert raw[0]["count(*)"] == 100 + 20 * writes
        half = clustered(50, 4, seed=len("half"))[0]
        assert len(gallery) == 100 and gallery.identity_count == 25
        found = {m.identity for row in gallery.search(half, k=25) for m in row}
        assert len(found) == 25 and all(name.startswith("whole-") for name in found)
        report = gallery.check()
        assert report.items == 100 and report.leftovers == 20 * writes
        raw = gallery.call("query", gallery.where.collection, filter="id >= 0", output_fields=["count(*)"])
        assert raw[0]["count(*)"] == 100 and gallery.check().leftovers == 0
        assert gallery.add(half[:4], metas(["again"] * 4, "again")).ids == [101, 102, 103, 104]


def test_a_lite_file_another_process_holds_is_refused_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(HERE / "milvus_enrol_worker.py"), location(tmp_path), "held", "8", "4", "1"]
    worker = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert worker.stdout is not None and worker.stdout.readline().startswith("wrote")
        with pytest.raises(GalleryError, match="one process at a time") as caught:
            open_gallery(location(tmp_path))
        assert "\n" not in str(caught.value)
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.parametrize("kind", ["flat", "ivf", "hnsw", "ivfpq"])
def test_index_kinds_are_milvus_indexes_of_the_same_names(tmp_path: Path, kind: str) -> None:
    vectors, labels, centres = clustered(40, 4)
    spec = IndexSpec(kind=kind, nlist=8, nprobe=8, pq_m=8)
    with open_gallery(location(tmp_path), make_card(), spec) as gallery:
        gallery.add(vectors, metas(labels))
        info = gallery.info()
        assert info.index == kind and info.index_built == {"flat": "FLAT", "ivf": "IVF_FLAT", "hnsw": "HNSW", "ivfpq": "IVF_PQ"}[kind]
        assert [row[0].identity for row in gallery.search(centres, k=1)] == sorted(set(labels))
        gallery.reindex(IndexSpec())
        assert gallery.info().index_built == "FLAT" and gallery.check().recall.recall_at_1 == 1.0
    with pytest.raises(ConfigError, match="shard_size applies to FAISS galleries only") as caught:
        open_gallery(location(tmp_path, "other"), make_card(), IndexSpec(shard_size=1000))
    assert "\n" not in str(caught.value)


def test_thumbnails_and_export_and_destroy(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(3, 2)
    crops = [np.full((256, 128, 3), 40 * n, np.uint8) for n in range(6)]
    with open_gallery(location(tmp_path), make_card()) as gallery:
        ids = gallery.add(vectors, metas(labels), crops=crops).ids
        assert gallery.keeps_thumbnails and gallery.thumbnail(ids[0])[:2] == b"\xff\xd8"
        gallery.remove_item(ids[0])
        assert gallery.thumbnail(ids[0]) is None
        assert gallery.export(tmp_path / "g.npz") == 5 and gallery.export(tmp_path / "g.jsonl") == 5
    saved = np.load(tmp_path / "g.npz")
    assert saved["ids"].tolist() == ids[1:] and saved["embeddings"].shape == (5, vectors.shape[1])
    assert [json.loads(line)["identity"] for line in (tmp_path / "g.jsonl").read_text().splitlines()] == labels[1:]
    assert destroy_gallery(location(tmp_path)) == 5
    with pytest.raises(GalleryError, match="no gallery here"):
        open_gallery(location(tmp_path))


def invoke(*args: str | Path) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    return result.output


def test_the_cli_enrols_queries_and_checks_a_milvus_gallery(tmp_path: Path) -> None:
    model = stand_in_model(tmp_path / "model", "person", embedding_dim=32, threshold=1.0)
    rng = np.random.default_rng(0)
    for person in ("ann", "bob"):
        (tmp_path / "people" / person).mkdir(parents=True)
        base = rng.integers(0, 255, (128, 64, 3), dtype=np.uint8)
        for shot in range(2):
            noisy = np.clip(base.astype(int) + rng.integers(-8, 8, base.shape), 0, 255).astype(np.uint8)
            Image.fromarray(noisy).save(tmp_path / "people" / person / f"{shot}.png")
    where = location(tmp_path)
    invoke("enroll", tmp_path / "people", "-m", model, "-g", where, "--detect", "none", "--json", tmp_path / "e.json")
    assert json.loads((tmp_path / "e.json").read_text())["added"] == 4
    out = invoke("query", tmp_path / "people" / "ann" / "0.png", "-m", model, "-g", where, "--detect", "none", "--json", tmp_path / "q.json")
    assert "ann" in out
    info = json.loads(invoke("gallery", "info", where, "--check", "--json"))
    assert info["items"] == 4 and info["index_built"] == "FLAT"
    assert info["check"]["items"] == 4 and info["check"]["leftovers"] == 0 and info["check"]["recall"]["recall_at_1"] == 1.0
    table = " ".join(invoke("gallery", "info", where, "--check").split())
    assert "4 items of 2 identities" in table and "(this backend keeps no row checksums)" in table
    assert info["check"]["checksums"] is None and "older format" not in table
