"""apps/face_checkin end to end: generated face folders (1:N, 1:1, videos, re-enrolment,
errors), the calibration tool, the real ORL faces, and the app's imports."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import typer
from app_helpers import ROOT, private_imports, tiny_model
from typer.testing import CliRunner

from apps.face_checkin.calibrate import app as calibrate_app
from apps.face_checkin.checkin import CheckinConfig, source_faces
from apps.face_checkin.cli import app
from apps.face_checkin.faces import write_people
from reid.data import read_image
from reid.detect.ssdlite import model_available
from reid.gallery import Gallery
from reid.models import ModelCard, load_card
from reid.models.registry import SFACE
from reid.pipeline import open_source


def _sface_missing() -> str | None:
    """Why sface cannot run here without the network, or None."""
    for package in ("onnxruntime", "yuface"):
        if importlib.util.find_spec(package) is None:
            return f'sface needs {package} (pip install -e ".[faces]")'
    if not model_available(SFACE):
        return f"the sface model file is not cached here (reid models fetch {SFACE})"
    return None


needs_sface = pytest.mark.skipif(_sface_missing() is not None, reason=_sface_missing() or "")

DECISION_KEYS = {
    "source", "frame", "time", "box", "face", "mode", "claim", "identity", "distance", "threshold",
    "decision", "top_k", "at",
}


def invoke(*args: str, command: typer.Typer = app) -> tuple[int, str]:
    result = CliRunner().invoke(command, list(args))
    return result.exit_code, result.output


def read_decisions(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """people/<name>/1..3.png for four people; incoming/: new photos of two of them and a stranger."""
    root = tmp_path_factory.mktemp("faces")
    written = write_people(root / "people", ["ada", "ben", "cleo", "dev"], 5, seed=3)
    incoming = root / "incoming"
    incoming.mkdir()
    for name in ("ada", "ben"):
        for photo in written[name][3:]:
            photo.replace(incoming / f"{name}-{photo.name}")
    for name in ("cleo", "dev"):
        for photo in written[name][3:]:
            photo.unlink()
    stranger = write_people(root / "strangers", ["eve"], 1, seed=4)["eve"][0]
    single = root / "eve.png"
    stranger.replace(single)
    return {"people": root / "people", "incoming": incoming, "single": single}


def check_decision(d: dict) -> None:
    assert set(d) == DECISION_KEYS
    if d["decision"] in ("identified", "accepted"):
        assert d["identity"] is not None and d["distance"] <= d["threshold"]
    elif d["decision"] in ("unknown", "rejected"):
        assert d["identity"] is None
        assert d["distance"] is None or d["distance"] > d["threshold"]
    else:
        assert d["decision"] == "no_face" and d["distance"] is None


def test_one_to_n_end_to_end(faces: dict[str, Path], face_model: Path, tmp_path: Path) -> None:
    """The app run as users run it: ``python -m apps.face_checkin`` in a fresh process."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [
        sys.executable, "-m", "apps.face_checkin", "--model", str(face_model), "--people", str(faces["people"]),
        "--out", str(out), str(faces["incoming"]), str(faces["single"]),
    ]
    env.pop("COLUMNS", None)  # piped at rich's default 80 columns
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout
    # Piped, a message is one line however long, as reid's are: never cut at 80 columns.
    enrolled = [line for line in done.stdout.splitlines() if line.startswith("enrolled ")]
    assert enrolled and f"gallery {out / 'gallery'} holds" in enrolled[0] and len(enrolled[0]) > 80, done.stdout
    decisions = read_decisions(out)
    photos = sorted(str(p) for p in faces["incoming"].iterdir()) + [str(faces["single"])]
    assert sorted(d["source"] for d in decisions) == sorted(photos)
    # A photo's frame is its place among its source's photos, as reid query writes it.
    frames = {d["source"]: d["frame"] for d in decisions}
    assert [frames[p] for p in photos] == [*range(len(photos) - 1), 0]
    for d in decisions:
        check_decision(d)
        assert d["mode"] == "1:N" and d["claim"] is None and d["time"] is None
        assert d["threshold"] == load_card(face_model).threshold == 0.5
        assert d["face"] == "whole"
        assert 1 <= len(d["top_k"]) <= CheckinConfig.top_k
        assert d["distance"] == d["top_k"][0]["distance"]
        image = read_image(d["source"])
        assert d["box"] == [0, 0, image.shape[1], image.shape[0]]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["enrolment"]["added"] == 12 and summary["faces"] == len(photos)
    with Gallery.open(out / "gallery") as gallery:
        assert len(gallery) == 12 and gallery.identity_count == 4


def test_enrolling_again_adds_nothing_and_append_keeps_the_log(
    faces: dict[str, Path], face_model: Path, tmp_path: Path
) -> None:
    args = ["--model", str(face_model), "--people", str(faces["people"]), "--out", str(tmp_path), "-q"]
    assert invoke(*args, str(faces["single"]))[0] == 0
    code, output = invoke(*args, "--append", str(faces["single"]))
    assert code == 0, output
    assert "enrolled 0 new photos" in output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["enrolment"]["duplicates"] == 12
    assert len(read_decisions(tmp_path)) == 2


def test_one_to_one_claims(faces: dict[str, Path], face_model: Path, tmp_path: Path) -> None:
    code, output = invoke(
        "--model", str(face_model), "--people", str(faces["people"]), "--out", str(tmp_path),
        "--claim", "ada", str(faces["incoming"]),
    )
    assert code == 0, output
    decisions = read_decisions(tmp_path)
    assert len(decisions) == 4
    for d in decisions:
        check_decision(d)
        assert d["mode"] == "1:1" and d["claim"] == "ada"
        assert d["decision"] in ("accepted", "rejected")
        assert d["identity"] in ("ada", None)
    # The distance is to the claimed person even when someone else is nearer.
    code, output = invoke(
        "--model", str(face_model), "--gallery", str(tmp_path / "gallery"), "--out", str(tmp_path / "n"),
        "--top-k", "4", str(faces["incoming"]),
    )
    assert code == 0, output
    for one, many in zip(decisions, read_decisions(tmp_path / "n"), strict=True):
        to_ada = next(m["distance"] for m in many["top_k"] if m["identity"] == "ada")
        assert one["distance"] == pytest.approx(to_ada, abs=1e-5)


def test_threshold_option_overrides_the_card(faces: dict[str, Path], face_model: Path, tmp_path: Path) -> None:
    code, output = invoke(
        "--model", str(face_model), "--people", str(faces["people"]), "--out", str(tmp_path),
        "--threshold", "2.0", str(faces["incoming"]),
    )
    assert code == 0, output
    decisions = read_decisions(tmp_path)
    assert {d["threshold"] for d in decisions} == {2.0}
    assert {d["decision"] for d in decisions} == {"identified"}


def test_video_frames_are_decided_one_by_one(faces: dict[str, Path], face_model: Path, tmp_path: Path) -> None:
    video = tmp_path / "desk.avi"
    photo = cv2.imread(str(next(faces["incoming"].iterdir())))
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 5.0, (photo.shape[1], photo.shape[0]))
    for _ in range(5):
        writer.write(photo)
    writer.release()
    code, output = invoke(
        "--model", str(face_model), "--people", str(faces["people"]), "--out", str(tmp_path / "out"),
        "--detect", "none", "--every", "2", str(video),
    )
    assert code == 0, output
    decisions = read_decisions(tmp_path / "out")
    assert [d["frame"] for d in decisions] == [0, 2, 4]
    assert [d["time"] for d in decisions] == [0.0, 0.4, 0.8]
    assert all(d["source"] == str(video) and d["face"] == "whole" for d in decisions)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--claim", "zed"], "--claim 'zed'"),
        (["--detect", "eyes"], "--detect 'eyes': choose one of auto, person, face, none"),
        (["--detect", "person"], "--detect person: check-in finds faces"),
        (["--no-face", "maybe"], "--no-face 'maybe': choose one of whole, skip, error"),
        (["--detector", "hog"], "hog finds persons, not faces"),
        (["--detect", "none", "--detector", "haar"], "--detector haar: detect none takes everything whole"),
        (["--threshold", "3"], "--threshold"),
    ],
)
def test_bad_options_are_one_line_errors(
    extra: list[str], message: str, faces: dict[str, Path], face_model: Path, tmp_path: Path
) -> None:
    code, output = invoke(
        "--model", str(face_model), "--people", str(faces["people"]), "--out", str(tmp_path),
        *extra, str(faces["single"]),
    )
    assert code == 1
    assert message in " ".join(output.split()) and output.count("error:") == 1


def test_missing_gallery_without_people_is_an_error(face_model: Path, faces: dict[str, Path], tmp_path: Path) -> None:
    code, output = invoke("--model", str(face_model), "--out", str(tmp_path), str(faces["single"]))
    assert code == 1
    assert "no gallery here" in output


def test_calibration_writes_the_card_and_measures_held_out_people(tmp_path: Path) -> None:
    model = tiny_model(tmp_path / "model", kind="face")
    people = tmp_path / "people"
    write_people(people, [f"p{n}" for n in range(6)], 3, seed=5)
    code, output = invoke(
        "--model", str(model), "--people", str(people), "--out", str(tmp_path / "cal"), "--best-accuracy",
        command=calibrate_app,
    )
    assert code == 0, output
    report = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    card = load_card(model)
    assert card.threshold == report["calibration"]["threshold"] == report["held_out"]["threshold"]
    assert "reid calibrate" in card.threshold_source
    assert report["calibration"]["people"] == ["p0", "p2", "p4"]
    assert report["held_out"]["people"] == ["p1", "p3", "p5"]
    # Three people with three photos each: 9 genuine and 27 impostor pairs per half.
    assert (report["held_out"]["genuine"], report["held_out"]["impostor"]) == (9, 27)
    assert 0.0 <= report["held_out"]["far"] <= 1.0 and 0.0 <= report["held_out"]["tar"] <= 1.0
    lines = (tmp_path / "cal" / "held-out-pairs.csv").read_text().splitlines()
    assert lines[0] == "path_a,path_b,label" and len(lines) == 1 + 9 + 27


def test_calibration_at_a_rate_its_pairs_cannot_resolve_says_so_in_the_title_and_a_note(tmp_path: Path) -> None:
    model = tiny_model(tmp_path / "model", kind="face")
    people = tmp_path / "people"
    write_people(people, [f"p{n}" for n in range(6)], 3, seed=5)
    code, output = invoke(
        "--model", str(model), "--people", str(people), "--out", str(tmp_path / "cal"), "--far", "1e-3",
        command=calibrate_app,
    )
    assert code == 0, output
    shown = " ".join(output.split())
    assert "(FAR <= 0.001, not resolved by 27 impostor pairs)" in shown
    assert "note: 27 impostor pairs cannot resolve FAR 0.001 (that takes 10,000, so that 10 lie within its threshold)" in shown


def test_demo_runs_end_to_end(face_model: Path, tmp_path: Path) -> None:
    code, output = invoke("--demo", "--model", str(face_model), "--out", str(tmp_path), "-q")
    assert code == 0, output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["faces"] == summary["demo"]["faces"] == 16
    assert "demo truth" in output


def _orl_split(orl: Path, root: Path, people: int, enrol: range, incoming: range) -> tuple[Path, Path]:
    for n in range(1, people + 1):
        (root / "people" / f"s{n}").mkdir(parents=True)
        for k in enrol:
            shutil.copy(orl / f"s{n}" / f"{k}.pgm", root / "people" / f"s{n}" / f"{k}.pgm")
    (root / "incoming").mkdir()
    for n in range(1, people + 2):  # the last person is never enrolled
        for k in incoming:
            shutil.copy(orl / f"s{n}" / f"{k}.pgm", root / "incoming" / f"s{n}-{k}.pgm")
    return root / "people", root / "incoming"


def test_real_orl_faces_with_face_detection(orl_faces: Path, face_model: Path, tmp_path: Path) -> None:
    people, incoming = _orl_split(orl_faces, tmp_path, 3, range(1, 4), range(4, 6))
    code, output = invoke(
        "--model", str(face_model), "--people", str(people), "--out", str(tmp_path / "out"),
        "--detect", "face", "--no-face", "whole", str(incoming),
    )
    assert code == 0, output
    decisions = read_decisions(tmp_path / "out")
    for d in decisions:
        check_decision(d)
    # Every photo is decided; Haar finds most ORL faces, the rest are taken whole (--no-face whole).
    assert {d["source"] for d in decisions} == {str(p) for p in incoming.iterdir()}
    assert sum(d["face"] == "detected" for d in decisions) >= len(decisions) // 2
    assert all(d["box"] == [0, 0, 92, 112] for d in decisions if d["face"] == "whole")
    video = tmp_path / "orl.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 2.0, (184, 224))
    for photo in sorted(incoming.iterdir()):
        writer.write(cv2.resize(cv2.imread(str(photo)), (184, 224)))
    writer.release()
    code, output = invoke(
        "--model", str(face_model), "--gallery", str(tmp_path / "out" / "gallery"), "--out", str(tmp_path / "v"),
        str(video),
    )
    assert code == 0, output
    frames = read_decisions(tmp_path / "v")
    assert frames and all(d["face"] == "detected" and d["frame"] is not None for d in frames)


@pytest.mark.skipif(importlib.util.find_spec("dlib") is None, reason="dlib-face needs reid-toolkit[dlib]")
def test_real_orl_faces_with_dlib_face(orl_faces: Path, tmp_path: Path) -> None:
    people, incoming = _orl_split(orl_faces, tmp_path, 3, range(1, 3), range(3, 4))
    code, output = invoke(
        "--model", "dlib-face", "--people", str(people), "--out", str(tmp_path / "out"), str(incoming)
    )
    assert code == 0, output
    answers = {Path(d["source"]).name: d["identity"] for d in read_decisions(tmp_path / "out")}
    assert answers == {"s1-3.pgm": "s1", "s2-3.pgm": "s2", "s3-3.pgm": "s3", "s4-3.pgm": None}


@needs_sface
def test_real_orl_faces_with_sface_the_default_model(orl_faces: Path, tmp_path: Path) -> None:
    people, incoming = _orl_split(orl_faces, tmp_path, 3, range(1, 3), range(3, 4))
    code, output = invoke("--people", str(people), "--out", str(tmp_path / "out"), str(incoming))
    assert code == 0, output
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["model"] == "sface"
    answers = {Path(d["source"]).name: d["identity"] for d in read_decisions(tmp_path / "out")}
    assert answers == {"s1-3.pgm": "s1", "s2-3.pgm": "s2", "s3-3.pgm": "s3", "s4-3.pgm": None}


@needs_sface
def test_calibration_with_sface_on_the_crops_of_the_detector_given(orl_faces: Path, tmp_path: Path) -> None:
    people, _ = _orl_split(orl_faces, tmp_path, 6, range(1, 4), range(4, 5))
    code, output = invoke(
        "--model", "sface", "--people", str(people), "--out", str(tmp_path / "cal"),
        "--detect", "face", "--detector", "yunet", "--best-accuracy", command=calibrate_app,
    )
    assert code == 0, output
    report = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert load_card(tmp_path / "cal" / "model").threshold == report["calibration"]["threshold"]
    held = report["held_out"]
    assert held["skipped_images"] == 0 and held["tar"] == 1.0 and held["far"] == 0.0
    code, output = invoke(
        "--model", "sface", "--people", str(people), "--out", str(tmp_path / "bad"),
        "--detect", "face", "--detector", "nosuch", command=calibrate_app,
    )
    assert code == 1 and "nosuch" in output and len(output.strip().splitlines()) == 1


@needs_sface
@pytest.mark.parametrize("policy", ["skip", "whole", "error"])
def test_sface_checkin_follows_the_one_crop_rule_on_orl(orl_faces: Path, tmp_path: Path, policy: str) -> None:
    """A faceless photo among ORL faces, at enrolment and at the desk, with YuNet cutting the
    photos (--detect face): skipped and named, taken whole, or one error line, as in reid."""
    people, incoming = _orl_split(orl_faces, tmp_path, 3, range(1, 3), range(3, 4))
    wall = np.random.default_rng(0).integers(90, 140, (112, 92), dtype=np.uint8)
    for path in (people / "s1" / "wall.png", incoming / "wall.png"):
        cv2.imwrite(str(path), wall)
    out = tmp_path / "out"
    code, output = invoke(
        "--people", str(people), "--out", str(out), "--detect", "face", "--detector", "yunet",
        "--no-face", policy, str(incoming),
    )
    if policy == "error":
        lines = output.strip().splitlines()
        assert code == 1 and len(lines) == 1 and "wall.png: no face found" in lines[0]
        return
    assert code == 0, output
    summary = json.loads((out / "summary.json").read_text())
    decisions = {Path(d["source"]).name: d for d in read_decisions(out)}
    answers = {name: d["identity"] for name, d in decisions.items() if name != "wall.png"}
    assert answers == {"s1-3.pgm": "s1", "s2-3.pgm": "s2", "s3-3.pgm": "s3", "s4-3.pgm": None}
    assert all(d["face"] == "detected" for name, d in decisions.items() if name != "wall.png")
    if policy == "skip":
        assert summary["enrolment"]["added"] == 6
        assert [(Path(s["path"]).name, s["reason"]) for s in summary["enrolment"]["skipped"]] == [("wall.png", "no face found")]
        assert decisions["wall.png"]["decision"] == "no_face" and decisions["wall.png"]["distance"] is None
        assert "skipped" in output and "wall.png" in output
    else:
        assert summary["enrolment"]["added"] == 7 and summary["enrolment"]["skipped"] == []
        assert decisions["wall.png"]["face"] == "whole" and decisions["wall.png"]["distance"] is not None


@needs_sface
def test_a_group_photo_says_how_many_faces_and_which_was_enrolled(orl_faces: Path, tmp_path: Path) -> None:
    people, incoming = _orl_split(orl_faces, tmp_path, 2, range(1, 3), range(3, 4))
    big = cv2.resize(cv2.imread(str(orl_faces / "s1" / "5.pgm")), (184, 224))
    small = cv2.imread(str(orl_faces / "s2" / "5.pgm"))
    group = np.zeros((224, 320, 3), np.uint8)
    group[:, :184], group[50:162, 220:312] = big, small
    cv2.imwrite(str(people / "s1" / "group.png"), group)
    code, output = invoke(
        "--people", str(people), "--out", str(tmp_path / "out"), "--detect", "face", "--detector", "yunet",
        str(incoming),
    )
    assert code == 0, output
    enrolment = json.loads((tmp_path / "out" / "summary.json").read_text())["enrolment"]
    (noted,) = enrolment["several_subjects"]
    assert Path(noted["path"]).name == "group.png" and noted["note"].startswith("2 faces found")
    x, y, w, h = json.loads(noted["note"].split("box ")[1])
    assert x + w <= 184 and w > 92  # the larger face, on the left, was enrolled
    assert "several found in" in output and "group.png" in output


def test_app_imports_only_public_reid_names() -> None:
    assert private_imports(ROOT / "apps" / "face_checkin") == []


def test_faces_reach_an_aligning_encoder_as_aligned_chips(orl_faces: Path) -> None:
    photo = orl_faces / "s1" / "1.pgm"
    config = CheckinConfig(None, Path("out"), [str(photo)], detect="face", face_detector="yunet")
    card = ModelCard(name="f", architecture="resnet18", embedding_dim=32, input_size=(112, 96), kind="face")
    assert card.aligned_face_size is None
    aligning = ModelCard(**{**card.to_dict(), "face_alignment": "5-point"})
    assert aligning.aligned_face_size == (112, 96)

    class CardOnly:  # what the crop rule reads of an encoder
        def __init__(self, card: ModelCard) -> None:
            self.aligned_face_size = card.aligned_face_size

    ((_, aligned),) = list(source_faces(open_source(photo), config, CardOnly(aligning)))  # type: ignore[arg-type]
    ((_, plain),) = list(source_faces(open_source(photo), config, CardOnly(card)))  # type: ignore[arg-type]
    assert aligned.how == plain.how == "detected"
    assert aligned.image.shape == (112, 96, 3) and plain.image.shape != (112, 96, 3)


def test_the_config_takes_reids_defaults_and_ranges() -> None:
    """top_k is a query's, batch_size an enrolment's, every and max_frames a source's: the
    same defaults, the same bounds read from the same field types, errors naming the key."""
    from reid.cli.defaults import declared_range, default_of
    from reid.errors import ConfigValueError
    from reid.pipeline import EnrolConfig, QueryConfig

    assert (CheckinConfig.top_k, CheckinConfig.batch_size) == (QueryConfig.top_k, EnrolConfig.batch_size)
    assert CheckinConfig.every == default_of(open_source, "every")
    for key, library in (("top_k", QueryConfig), ("batch_size", EnrolConfig)):
        assert declared_range(CheckinConfig, key) == declared_range(library, key) is not None
    for key, value in (("top_k", 0), ("top_k", 10_001), ("batch_size", 0), ("batch_size", 4097), ("every", 0),
                       ("max_frames", 0)):  # fmt: skip
        with pytest.raises(ConfigValueError) as caught:
            CheckinConfig(None, Path("out"), ["x.jpg"], **{key: value})
        assert caught.value.key == key and str(caught.value).startswith(f"{key}: ")


def test_a_missing_people_folder_or_gallery_leaves_nothing_under_out(
    faces: dict[str, Path], face_model: Path, tmp_path: Path
) -> None:
    photo = next(faces["incoming"].iterdir())
    out = tmp_path / "out"
    code, output = invoke(str(photo), "--model", str(face_model), "--out", str(out), "--people", str(tmp_path / "nobody"))
    assert code == 1 and output.strip() == f"error: {tmp_path / 'nobody'}: no such file or folder"
    # A data spec of an unknown kind is answered as every reid command answers it.
    code, output = invoke(str(photo), "--model", str(face_model), "--out", str(out), "--people", f"market:{tmp_path}")
    assert code == 1 and output.strip() == (
        f"error: data 'market:{tmp_path}': unknown dataset kind 'market'; use one of synthetic, market1501, dukemtmc, "
        "msmt17, folder as KIND:PATH"
    )
    code, output = invoke(str(photo), "--model", str(face_model), "--out", str(out))
    # The app's own way to fill a gallery is named, not another program's.
    assert code == 1 and output.strip() == (
        f"error: {out / 'gallery'}: no gallery here; give --people FOLDER (<person>/<photos>) to enrol one"
    )
    assert not out.exists()


def test_a_bare_gallery_name_is_read_as_reid_reads_it(
    faces: dict[str, Path], face_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = invoke("--model", str(face_model), "--people", str(faces["people"]), "--out", "out", "-g", "desk",
                          "--threshold", "2.0", str(faces["incoming"]))
    assert code == 0, output
    assert (tmp_path / "galleries" / "desk" / "gallery.db").is_file() and not (tmp_path / "desk").exists()
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["gallery"] == str(Path("galleries") / "desk")
    code, output = invoke("--model", str(face_model), "--out", "again", "-g", "desk", "--threshold", "2.0",
                          str(faces["incoming"]))
    assert code == 0, output
