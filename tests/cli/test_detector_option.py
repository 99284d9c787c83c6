"""``--detector`` on ``reid enroll``, ``reid query`` and ``reid verify``."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import pytest
from typer.testing import CliRunner

from reid.cli.app import app
from reid.models import ModelCard, build_network, save_model
from reid.pipeline.synthetic import street_frames, write_street_video

runner = CliRunner()


def invoke(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def only_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), output
    return lines[0]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    card = ModelCard(name="m", architecture="resnet18", embedding_dim=64, input_size=(64, 32), threshold=0.5)
    folder = tmp_path_factory.mktemp("models") / "m"
    save_model(build_network(card), card, folder)
    return folder


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Whole street frames, each with two walkers: enrolment crops the largest person."""
    root = tmp_path_factory.mktemp("scenes")
    for n, (frame, _) in enumerate(street_frames(3, seed=4)):
        cv2.imwrite(str(root / f"{n}.png"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    return root


def test_enroll_with_a_named_detector_and_a_wrong_one(tmp_path: Path, model: Path, scenes: Path) -> None:
    gallery, report = tmp_path / "g", tmp_path / "enrol.json"
    code, out = invoke("enroll", scenes, "--id", "walker", "--model", model, "--gallery", gallery,
                       "--detector", "hog", "--json", report)
    assert code == 0, out
    summary = json.loads(report.read_text())
    assert summary["added"] == 3 and summary["no_detection"] == 0

    other = tmp_path / "other"
    code, out = invoke("enroll", scenes, "--id", "walker", "--model", model, "--gallery", other,
                       "--detect", "person", "--detector", "haar")
    assert code == 1
    assert "haar finds faces, not persons" in only_error_line(out)
    assert not other.exists()  # a failed enrolment leaves no gallery behind


def test_the_person_default_falling_back_to_hog_is_said_in_one_line(tmp_path: Path, model: Path, scenes: Path) -> None:
    # This session's model cache holds no person detector's model, so hog runs by default.
    gallery = tmp_path / "g"
    code, out = invoke("enroll", scenes, "--id", "walker", "--detect", "person", "--model", model, "--gallery", gallery)
    assert code == 0, out
    notes = [line for line in out.splitlines() if line.startswith("note: person boxes come from hog")]
    assert len(notes) == 1 and "`reid models fetch yolox_nano.coco`" in notes[0], out
    video = tmp_path / "street.avi"
    write_street_video(video, count=3)
    code, out = invoke("query", video, "--model", model, "--gallery", gallery)
    assert code == 0 and "note: person boxes come from hog" in out, out
    code, out = invoke("query", video, "--model", model, "--gallery", gallery, "--detector", "hog")
    assert code == 0 and "note:" not in out, out


def test_query_refuses_unknown_missing_and_mismatched_detectors(tmp_path: Path, model: Path, scenes: Path) -> None:
    gallery = tmp_path / "g"
    assert invoke("enroll", scenes, "--id", "walker", "--model", model, "--gallery", gallery)[0] == 0
    before = {p.name: p.read_bytes() for p in gallery.iterdir() if p.is_file() and p.name != ".lock"}
    video = tmp_path / "street.avi"
    write_street_video(video, count=4)
    for detector, expected in (
        ("car", "--detector 'car': not a detector; choose one of bytetrack-nano, yolox-nano, yolox-tiny, yolox-s, person-dete"),
        (f"yolo:{tmp_path / 'missing.onnx'}", "missing.onnx: YOLO ONNX file not found"),
        ("yunet", "yunet finds faces, not persons"),
        ("yolo", "--detector yolo needs your ONNX file, as yolo:FILE.onnx"),
        # The registry's name of a detector's file names the detector: its file is the one missing.
        ("yolox_nano.coco", "`reid models fetch yolox_nano.coco` (offline: `reid models add yolox_nano.coco FILE` with a copy of its file), then --detector yolox-nano"),
    ):
        code, out = invoke("query", video, "--model", model, "--gallery", gallery, "--detector", detector)
        assert code == 1 and expected in only_error_line(out), out
    code, out = invoke("query", video, "--model", model, "--gallery", gallery, "--detector", "hog", "--min-height", "40")
    assert code == 1 and "--min-height works with the ssdlite detector, not hog" in only_error_line(out), out
    after = {p.name: p.read_bytes() for p in gallery.iterdir() if p.is_file() and p.name != ".lock"}
    assert after == before

    events = tmp_path / "events.jsonl"
    code, out = invoke("query", video, "--model", model, "--gallery", gallery, "--detector", "hog", "--jsonl", events)
    assert code == 0, out
    assert events.read_text().strip()


def test_verify_crops_faces_with_yunet(tmp_path: Path, orl_faces: Path) -> None:
    card = ModelCard(name="f", architecture="resnet18", embedding_dim=32, input_size=(64, 64), kind="face")
    folder = tmp_path / "f"
    save_model(build_network(card), card, folder)
    result = tmp_path / "verify.json"
    code, out = invoke("verify", orl_faces / "s1" / "1.pgm", orl_faces / "s1" / "2.pgm", "--model", folder,
                       "--detector", "yunet", "--threshold", "1.0", "--json", result)
    assert code == 0, out
    assert 0 <= json.loads(result.read_text())["distance"] <= 2
    code, out = invoke("verify", orl_faces / "s1" / "1.pgm", orl_faces / "s1" / "2.pgm", "--model", folder,
                       "--detector", "hog", "--threshold", "1.0")
    assert code == 1 and "hog finds persons, not faces" in only_error_line(out)


def test_query_runs_the_best_published_detector_present_and_one_named_with_its_file(
    tmp_path: Path, model: Path, scenes: Path, pedestrian_video: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.detect.conftest import published_file

    xml, onnx = published_file("pedestrian-detection-adas-0002"), published_file("yolox-nano")
    gallery = tmp_path / "g"
    assert invoke("enroll", scenes, "--id", "walker", "--model", model, "--gallery", gallery, "--detector", "hog")[0] == 0
    # The Open Model Zoo detector's files brought into the cache as `reid models add` does.
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "cache"))
    assert invoke("models", "add", "pedestrian-detection-adas-0002", xml.parent)[0] == 0
    for extra in ([], ["--detector", f"yolox-nano:{onnx}"]):
        mot = tmp_path / f"mot{len(extra)}.txt"
        code, out = invoke("query", pedestrian_video, "--model", model, "--gallery", gallery, "--max-frames", "5",
                           "--mot", mot, *extra)
        assert code == 0 and "note:" not in out, out
        # The street's first frames hold 3 to 4 people; HOG finds none of them.
        rows = [line.split(",") for line in mot.read_text().splitlines()]
        assert len(rows) >= 12 and {row[0] for row in rows} == {"1", "2", "3", "4", "5"}, rows
