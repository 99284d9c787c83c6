"""``reid enroll``, ``reid query`` and ``reid gallery ...`` through typer's test runner."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from reid.cli.app import app
from reid.detect import crop
from reid.models import ModelCard, build_network, save_model
from reid.pipeline.synthetic import street_frames, write_street_video

runner = CliRunner()


def make_model(folder: Path, name: str) -> Path:
    card = ModelCard(
        name=name, architecture="resnet18", embedding_dim=64, input_size=(64, 32), num_classes=0, threshold=0.5
    )
    save_model(build_network(card), card, folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("models")
    return make_model(root / "alpha", "alpha"), make_model(root / "beta", "beta")


@pytest.fixture(scope="module")
def street(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A video written by cv2.VideoWriter: two stick-figure walkers crossing a street."""
    path = tmp_path_factory.mktemp("video") / "street.mp4"
    write_street_video(path, count=10, fps=10)
    return path


def people(root: Path, frames: int = 2) -> Path:
    for n, (frame, boxes) in enumerate(street_frames(frames, seed=21)):
        for name, box in boxes.items():
            path = root / name / f"{n}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(path), cv2.cvtColor(crop(frame, box), cv2.COLOR_RGB2BGR))
    return root


def invoke(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def gallery_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name != ".lock"}


def test_enroll_info_list_query_remove_export(tmp_path: Path, models: tuple[Path, Path], street: Path) -> None:
    alpha, _ = models
    gallery = tmp_path / "g"
    code, out = invoke("enroll", "--model", alpha, "--gallery", gallery, people(tmp_path / "people"))
    assert code == 0, out
    assert "red" in out and "blue" in out and "gallery items" in out

    code, out = invoke("gallery", "info", gallery, "--json")
    assert code == 0, out
    info = json.loads(out)
    assert {"items", "identities", "dim", "index", "model_fingerprint"} <= set(info)
    assert (info["items"], info["identities"], info["dim"], info["index"]) == (4, 2, 64, "flat")
    assert info["model_name"] == "alpha" and info["threshold"] == 0.5

    code, out = invoke("gallery", "list", gallery, "--json")
    assert code == 0 and [row["identity"] for row in json.loads(out)] == ["blue", "red"]
    code, out = invoke("gallery", "list", gallery, "--id", "red", "--json")
    assert code == 0 and [Path(item["source"]).name for item in json.loads(out)] == ["0.png", "1.png"]
    code, out = invoke("gallery", "list", gallery, "--id", "red")
    assert code == 0 and "enrolled" in out
    # Every date a user reads in one form: ISO 8601 in UTC, to the second.
    iso = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00"
    assert len(re.findall(iso, out)) == 2, out
    code, out = invoke("gallery", "list", gallery)
    assert code == 0 and len(re.findall(iso, out)) == 4, out
    code, out = invoke("gallery", "info", gallery)
    assert code == 0 and re.search(rf"^created +{iso}$", out, re.MULTILINE), out

    events, video, crops = tmp_path / "ev.jsonl", tmp_path / "annotated.mp4", tmp_path / "crops"
    code, out = invoke(
        "query",
        "--model",
        alpha,
        "--gallery",
        gallery,
        street,
        "--top-k",
        "2",
        "--every",
        "2",
        "--jsonl",
        events,
        "--save-video",
        video,
        "--save-crops",
        crops,
        "--json",
        tmp_path / "summary.json",
        "--tracks",
        tmp_path / "tracks.jsonl",
    )
    assert code == 0, out
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert lines, "no detections in the street video"
    tracks = [json.loads(line) for line in (tmp_path / "tracks.jsonl").read_text().splitlines()]
    assert tracks and json.loads((tmp_path / "summary.json").read_text())["tracks"] == len(tracks)
    assert {t["track"] for t in tracks} <= {line["track"] for line in lines}
    for line in lines:
        assert {"source", "frame", "box", "identity", "distance", "top_k", "track"} <= set(line)
        assert line["frame"] % 2 == 0 and len(line["box"]) == 4 and 1 <= len(line["top_k"]) <= 2
        assert line["identity"] in ("red", "blue", None)
        assert line["identity"] is None or line["distance"] < 0.5
    capture = cv2.VideoCapture(str(video))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 5
    ok, frame = capture.read()
    capture.release()
    assert ok and frame.shape == (360, 480, 3)
    assert len(list(crops.rglob("*.jpg"))) == len(lines)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["frames"] == 5 and summary["detections"] == len(lines)
    assert summary["threshold"] == 0.5 and summary["threshold_source"].startswith("model card")
    assert "(from model card" in " ".join(out.split())
    # The threshold the summary names detections under, and the rate, in the one form of each.
    assert "named under 0.5000 (from model card" in " ".join(out.split()), out
    assert re.search(r"^5 frames at \d+\.\d frames/s; stages overlap$", out, re.MULTILINE), out
    assert set(summary["stage_seconds"]) == {"decode", "detect", "embed", "track", "search"}

    code, out = invoke("gallery", "export", gallery, tmp_path / "g.npz")
    assert code == 0 and np.load(tmp_path / "g.npz")["embeddings"].shape == (4, 64)

    code, out = invoke("gallery", "remove", gallery, "--id", "red")
    assert code == 0 and "removed 2 items" in out
    code, out = invoke("gallery", "info", gallery, "--json")
    assert json.loads(out)["items"] == 2 and json.loads(out)["identities"] == 1
    code, out = invoke("gallery", "remove", gallery, "--id", "red")
    assert code == 1 and len(error_lines(out)) == 1 and "no identity 'red'" in out


def test_query_images_as_crops(tmp_path: Path, models: tuple[Path, Path]) -> None:
    alpha, _ = models
    gallery = tmp_path / "g"
    folder = people(tmp_path / "people")
    assert invoke("enroll", "-m", alpha, "-g", gallery, folder)[0] == 0
    events = tmp_path / "ev.jsonl"
    code, out = invoke("query", "-m", alpha, "-g", gallery, folder / "red" / "1.png", "--jsonl", events)
    assert code == 0, out
    (line,) = [json.loads(x) for x in events.read_text().splitlines()]
    image = cv2.imread(str(folder / "red" / "1.png"))
    assert line["box"] == [0, 0, image.shape[1], image.shape[0]]
    assert line["identity"] == "red" and line["distance"] < 1e-3 and line["frame"] == 0


def test_query_without_model_uses_the_one_the_gallery_records(
    tmp_path: Path, models: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha, beta = models
    monkeypatch.chdir(tmp_path)
    folder = people(tmp_path / "people")
    assert invoke("enroll", "-m", alpha, "-g", "g", folder)[0] == 0
    photo = folder / "red" / "1.png"
    # Not under models/ nor at the name the gallery records: the gallery's model is named.
    code, out = invoke("query", "-g", "g", photo)
    assert code == 1 and error_lines(out) == [
        "error: g: give --model: the gallery was made with model 'alpha' (fingerprint "
        f"{json.loads((alpha / 'card.json').read_text())['fingerprint'][:12]}), in no folder under models/ nor in the cache"
    ], out
    # Under models/, by any folder name: found by its fingerprint; another model there is not taken.
    shutil.copytree(beta, tmp_path / "models" / "another")
    shutil.copytree(alpha, tmp_path / "models" / "copy-of-alpha")
    events = tmp_path / "ev.jsonl"
    code, out = invoke("query", "-g", "g", photo, "--jsonl", events)
    assert code == 0, out
    assert f"model {Path('models') / 'copy-of-alpha'}: the one gallery g records" in out.splitlines()
    (line,) = [json.loads(x) for x in events.read_text().splitlines()]
    assert line["identity"] == "red" and line["distance"] < 1e-3


def test_enroll_by_id_glob_and_detection(tmp_path: Path, models: tuple[Path, Path]) -> None:
    alpha, _ = models
    scenes = tmp_path / "scenes"
    scenes.mkdir()
    for n, (frame, _) in enumerate(street_frames(2, seed=5)):
        cv2.imwrite(str(scenes / f"{n}.jpg"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    gallery = tmp_path / "g"
    code, out = invoke(
        "enroll",
        "-m",
        alpha,
        "-g",
        gallery,
        "--id",
        "visitor",
        "--detect",
        "person",
        "--index",
        "hnsw",
        str(scenes / "*.jpg"),
        "--json",
        tmp_path / "report.json",
    )
    assert code == 0, out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["added"] == 2 and report["identities"] == {"visitor": 2}
    code, out = invoke("gallery", "info", gallery, "--json", "--check")
    info = json.loads(out)
    assert info["index"] == "hnsw" and info["check"]["database"] == "ok"
    assert info["check"]["recall"]["recall_at_1"] == 1.0


def test_reindex_and_check_table(tmp_path: Path, models: tuple[Path, Path]) -> None:
    alpha, _ = models
    gallery = tmp_path / "g"
    assert invoke("enroll", "-m", alpha, "-g", gallery, people(tmp_path / "people", frames=3))[0] == 0
    code, out = invoke("gallery", "reindex", gallery, "--index", "hnsw")
    assert code == 0 and "index is now hnsw (6 items)" in out
    code, out = invoke("gallery", "info", gallery, "--check")
    assert code == 0 and "Recall@1" in out and "hnsw" in out


def test_bad_input_gives_one_line_and_keeps_the_gallery(tmp_path: Path, models: tuple[Path, Path]) -> None:
    alpha, beta = models
    gallery = tmp_path / "g"
    assert invoke("enroll", "-m", alpha, "-g", gallery, people(tmp_path / "people"))[0] == 0
    before = gallery_files(gallery)

    broken = tmp_path / "broken" / "x.jpg"
    broken.parent.mkdir()
    broken.write_bytes(b"\xff\xd8 not really a jpeg")
    code, out = invoke("enroll", "-m", alpha, "-g", gallery, "--id", "x", broken)
    assert code == 1 and len(error_lines(out)) == 1 and "x.jpg: not a readable image" in out

    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = invoke("enroll", "-m", alpha, "-g", gallery, empty)
    assert code == 1 and len(error_lines(out)) == 1 and "empty" in error_lines(out)[0]

    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(tmp_path / "people" / "red" / "0.png", loose / "a.png")
    code, out = invoke("enroll", "-m", alpha, "-g", gallery, loose)
    assert code == 1 and "ROOT/<identity>/<image>" in error_lines(out)[0]

    code, out = invoke("enroll", "-m", beta, "-g", gallery, tmp_path / "people")
    assert code == 1 and len(error_lines(out)) == 1
    assert "'alpha'" in out and "'beta'" in out

    code, out = invoke("query", "-m", beta, "-g", gallery, tmp_path / "people")
    assert code == 1 and "'alpha'" in error_lines(out)[0]

    code, out = invoke("query", "-m", alpha, "-g", gallery, tmp_path / "nothing.mp4")
    assert code == 1 and "nothing.mp4: no such file" in error_lines(out)[0]

    code, out = invoke("query", "-m", alpha, "-g", gallery, tmp_path / "broken")
    assert code == 1 and "no readable image" in error_lines(out)[0]

    code, out = invoke("enroll", "-m", alpha, "-g", gallery, "--detect", "car", tmp_path / "people")
    assert code == 1 and "--detect 'car': choose one of auto, person, face, none" in error_lines(out)[0]

    assert gallery_files(gallery) == before
    code, out = invoke("gallery", "info", gallery, "--json")
    assert code == 0 and json.loads(out)["items"] == 4


def test_corrupt_gallery_is_reported(tmp_path: Path, models: tuple[Path, Path]) -> None:
    alpha, _ = models
    gallery = tmp_path / "g"
    assert invoke("enroll", "-m", alpha, "-g", gallery, people(tmp_path / "people"))[0] == 0
    (segment,) = gallery.glob("seg-*.bin")
    segment.write_bytes(segment.read_bytes()[:100])
    for args in (("gallery", "info", gallery), ("query", "-m", alpha, "-g", gallery, tmp_path / "people")):
        code, out = invoke(*args)
        assert code == 1 and len(error_lines(out)) == 1 and "truncated" in out
    code, out = invoke("gallery", "info", tmp_path / "missing")
    assert code == 1 and "no gallery here" in out


def test_real_pedestrian_video(tmp_path: Path, models: tuple[Path, Path], pedestrian_video: Path) -> None:
    alpha, _ = models
    gallery = tmp_path / "g"
    assert invoke("enroll", "-m", alpha, "-g", gallery, people(tmp_path / "people", frames=1))[0] == 0
    events = tmp_path / "ev.jsonl"
    code, out = invoke(
        "query",
        "-m",
        alpha,
        "-g",
        gallery,
        pedestrian_video,
        "--max-frames",
        "2",
        "--every",
        "10",
        "--jsonl",
        events,
        "--threshold",
        "0.3",
    )
    assert code == 0, out
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert lines and {line["frame"] for line in lines} <= {0, 10}
    assert all(line["source"] == str(pedestrian_video) for line in lines)


def test_index_flags_reach_the_gallery_spec(tmp_path: Path, models: tuple[Path, Path]) -> None:
    alpha, _ = models
    gallery = tmp_path / "g"
    folder = people(tmp_path / "people")
    flags = ["--index", "ivfpq", "--train-size", "20000", "--pq-m", "16", "--refine", "8", "--shard-size", "50000"]
    code, out = invoke("enroll", "-m", alpha, "-g", gallery, *flags, folder)
    assert code == 0, out
    code, out = invoke("gallery", "info", gallery, "--json")
    info = json.loads(out)
    params = info["index_params"]
    assert (params["kind"], params["train_size"], params["pq_m"], params["refine"], params["shard_size"]) == (
        "ivfpq",
        20000,
        16,
        8,
        50000,
    )
    assert params["pq_bits"] == 8 and info["shards"] == 1 and info["search_device"] == "cpu"
    # Too few items to train yet: the gallery searches exactly until it holds 10,000.
    assert info["index_built"] == "flat"
    assert invoke("enroll", "-m", alpha, "-g", gallery, *flags, folder)[0] == 0
    code, out = invoke("enroll", "-m", alpha, "-g", gallery, "--index", "ivfpq", "--train-size", "30000", folder)
    assert code == 1 and error_lines(out) == [
        f"error: {gallery}: gallery has a ivfpq (train_size=20000, pq_m=16, refine=8, shard_size=50000) index, "
        "not ivfpq (train_size=30000, pq_m=0, refine=16, shard_size=0); change it with reid gallery reindex"
    ]
    code, out = invoke("enroll", "-m", alpha, "-g", gallery, "--train-size", "30000", folder)
    assert code == 1 and error_lines(out) == ["error: --train-size needs --index"]
    code, out = invoke(
        "gallery", "reindex", gallery, "--index", "ivfpq", "--train-size", "30000", "--pq-bits", "6", "--nprobe", "4"
    )
    assert code == 0, out
    params = json.loads(invoke("gallery", "info", gallery, "--json")[1])["index_params"]
    assert (params["train_size"], params["pq_bits"], params["nprobe"], params["pq_m"]) == (30000, 6, 4, 0)
    code, out = invoke("gallery", "reindex", gallery, "--index", "ivfpq", "--shard-size", "10")
    assert code == 1 and "shard_size must be 0 (one shard) or at least 10000" in error_lines(out)[0]
    code, out = invoke("gallery", "info", gallery)
    # The index's own parameters only; no shards in one file.
    assert code == 0 and "ivfpq (a flat index until" in out and "pq_bits 6" in out and "nprobe 4" in out
    assert "shards" not in out and "hnsw" not in out


def test_check_reports_a_changed_row_and_remove_says_nothing_is_left(
    tmp_path: Path, models: tuple[Path, Path]
) -> None:
    import sqlite3

    alpha, _ = models
    gallery = tmp_path / "g"
    assert invoke("enroll", "-m", alpha, "-g", gallery, people(tmp_path / "people", frames=3))[0] == 0
    code, out = invoke("gallery", "info", gallery, "--json", "--check")
    check = json.loads(out)["check"]
    assert code == 0 and (check["items"], check["identities"], check["checksums"]) == (6, 2, True)

    code, out = invoke("gallery", "remove", gallery, "--id", "red")
    assert code == 0 and "removed 3 items of 'red' (verified: none left in the database or the index)" in " ".join(
        out.split()
    )

    with sqlite3.connect(gallery / "gallery.db") as db:
        db.execute("UPDATE items SET identity = 'red' WHERE id = (SELECT MIN(id) FROM items)")
    code, out = invoke("gallery", "info", gallery, "--check")
    assert code == 1 and len(error_lines(out)) == 1
    assert "database check failed: item" in out and "does not match its checksum" in out


def test_labels_never_leave_the_crop_folder(tmp_path: Path, models: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    alpha, _ = models
    gallery, crops = tmp_path / "g", tmp_path / "out" / "crops"
    root = people(tmp_path / "people")
    code, out = invoke("enroll", "-m", alpha, "-g", gallery, "--id", "..", root / "red")
    assert code == 1 and len(error_lines(out)) == 1 and "path syntax" in out and not gallery.exists()
    with monkeypatch.context() as old:
        # A label stored before the naming rule (reid.names): its crops still stay in the folder.
        for module in ("reid.gallery.store", "reid.pipeline.enrol"):
            old.setattr(sys.modules[module], "identity_name", lambda name, what="identity": name)
        assert invoke("enroll", "-m", alpha, "-g", gallery, "--id", "..", root / "red")[0] == 0
    assert invoke("enroll", "-m", alpha, "-g", gallery, "--id", "b" * 200, root / "blue")[0] == 0
    code, out = invoke("query", "-m", alpha, "-g", gallery, root, "--save-crops", crops, "--threshold", "2")
    assert code == 0, out
    assert len(list(crops.rglob("*.jpg"))) == 4
    assert list((tmp_path / "out").glob("*.jpg")) == [] and list(tmp_path.glob("*.jpg")) == []
    mapping = json.loads((crops / "identities.json").read_text())["folders"]
    assert set(mapping.values()) == {"..", "b" * 200}
    assert all(".." != name and len(name) < 100 for name in mapping)


def test_outputs_and_failed_creations_fail_early_and_leave_nothing(tmp_path: Path, models: tuple[Path, Path]) -> None:
    alpha, _ = models
    gallery = tmp_path / "g"
    root = people(tmp_path / "people")
    assert invoke("enroll", "-m", alpha, "-g", gallery, root)[0] == 0
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    code, out = invoke("query", "-m", alpha, "-g", gallery, root, "--save-crops", a_file)
    assert code == 1 and error_lines(out) == [f"error: {a_file}: --save-crops needs a folder here; this is a file"]
    code, out = invoke("query", "-m", alpha, "-g", gallery, root, "--jsonl", tmp_path, "--json", tmp_path / "s.json")
    assert code == 1 and len(error_lines(out)) == 1 and "--jsonl needs a file name" in out
    assert not (tmp_path / "s.json").exists()

    new = tmp_path / "deep" / "new"
    code, out = invoke("enroll", "-m", alpha, "-g", new, "--index", "ivfpq", "--pq-m", "7", root)
    assert code == 1 and len(error_lines(out)) == 1
    assert not (tmp_path / "deep").exists(), "a failed creation leaves no folder"

    broken = tmp_path / "broken" / "x.jpg"
    broken.parent.mkdir()
    broken.write_bytes(b"not an image")
    code, out = invoke("enroll", "-m", alpha, "-g", new, "--id", "x", broken)
    assert code == 1 and "nothing enrolled" in error_lines(out)[0]
    assert not new.exists(), "an enrolment that added nothing leaves no gallery"
    code, out = invoke("enroll", "-m", alpha, "-g", gallery, "--id", "x", broken)
    assert code == 1 and (gallery / "gallery.db").is_file(), "an existing gallery stays"


def test_query_trail_draws_each_tracks_recent_centres_into_the_video(
    tmp_path: Path, models: tuple[Path, Path], street: Path
) -> None:
    alpha, _ = models
    gallery = tmp_path / "g"
    assert invoke("enroll", "--model", alpha, "--gallery", gallery, people(tmp_path / "people"))[0] == 0
    frames = {}
    for trail in (0, 5):
        video = tmp_path / f"trail{trail}.avi"
        code, out = invoke("query", "-m", alpha, "-g", gallery, street, "--save-video", video, "--trail", str(trail))
        assert code == 0, out
        capture = cv2.VideoCapture(str(video))
        frames[trail] = [capture.read()[1] for _ in range(int(capture.get(cv2.CAP_PROP_FRAME_COUNT)))]
        capture.release()
    assert len(frames[0]) == len(frames[5]) == 10
    # The first frame has no past centres to draw; later ones do, wherever a track has gone on.
    assert np.array_equal(frames[0][0], frames[5][0])
    assert any(not np.array_equal(a, b) for a, b in zip(frames[0][1:], frames[5][1:]))

    code, out = invoke("query", "-m", alpha, "-g", gallery, street, "--trail", "-1")
    assert code != 0 and "--trail" in out


def test_the_enrol_summary_counts_every_file_given_once(tmp_path: Path, models: tuple[Path, Path]) -> None:
    alpha = models[0]
    folder = people(tmp_path / "people", frames=2)
    red = sorted((folder / "red").iterdir())
    shutil.copy(red[0], folder / "red" / "again.png")  # the same pixels: a duplicate
    (folder / "red" / "broken.png").write_bytes(b"\x89PNG not really")  # unreadable
    (folder / "red" / "notes.txt").write_text("not an image")  # not an image
    code, out = invoke("enroll", "-m", alpha, "-g", tmp_path / "g", folder)
    assert code == 0, out
    rows = {}
    for line in out.splitlines():
        label, _, value = line.rstrip().rpartition("  ")
        if value.strip().replace(",", "").isdigit():
            rows[label.rstrip()] = int(value.replace(",", ""))
    images = len([p for p in folder.rglob("*.png")])
    assert rows["files given"] == images + 1
    assert rows["  not images, skipped"] == 1 and rows["  images"] == images
    parts = ["    added", "    duplicates, skipped", "    of another identity, refused", "    unreadable, skipped",
             "    no detection, skipped"]  # fmt: skip
    assert sum(rows[p] for p in parts) == rows["  images"]
    assert rows["    duplicates, skipped"] == 1 and rows["    unreadable, skipped"] == 1
    # The progress label is the one word every command uses for embedding.
    assert "embedding to enrol" in out and "\nenrol " not in out
