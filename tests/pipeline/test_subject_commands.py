"""The one crop rule in every command that cuts photos to their face: a photo in which the
detector finds no face is skipped and named (``--no-face skip``), taken whole (``whole``)
or stops the command with one line naming it (``error``), the same in ``reid enroll``,
``reid query`` (of photos), ``reid verify``, ``reid calibrate`` and ``reid eval``.

Real images: ORL faces (YuNet finds the face in each shot used) and a built faceless one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from reid.cli.app import app
from reid.models import stand_in_model

SUBJECTS = ("s3", "s4", "s5")
SHOTS = ("1", "2", "3")
DETECT = ("--detect", "face", "--detector", "yunet")
POLICIES = ("skip", "whole", "error")


@pytest.fixture
def people(tmp_path: Path, orl_faces: Path) -> Path:
    """people/<subject>/{1,2,3}.pgm and one faceless wall.png per subject."""
    root = tmp_path / "people"
    rng = np.random.default_rng(0)
    for subject in SUBJECTS:
        (root / subject).mkdir(parents=True)
        for shot in SHOTS:
            shutil.copy(orl_faces / subject / f"{shot}.pgm", root / subject / f"{shot}.pgm")
        Image.fromarray(rng.integers(90, 140, (112, 92), dtype=np.uint8)).save(root / subject / "wall.png")
    return root


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stand_in_model(tmp_path_factory.mktemp("face-model") / "m", "face", embedding_dim=32, threshold=1.0)


@pytest.fixture
def pairs(people: Path) -> Path:
    lines = []
    for subject in SUBJECTS:
        lines += [f"{subject}/1.pgm,{subject}/2.pgm,1", f"{subject}/2.pgm,{subject}/wall.png,1"]
    for first, second in (("s3", "s4"), ("s4", "s5"), ("s5", "s3")):
        lines += [f"{first}/1.pgm,{second}/3.pgm,0", f"{first}/wall.png,{second}/2.pgm,0"]
    path = people.parent / "pairs.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, " ".join(result.output.split())


def check_error(code: int, output: str) -> None:
    """One error line naming a faceless photo."""
    assert code == 1 and output.count("error:") == 1
    assert "wall.png: no face found" in output


def walls(entries: list[dict]) -> list[str]:
    return sorted(Path(e["path"]).name for e in entries if Path(e["path"]).name == "wall.png")


@pytest.mark.parametrize("policy", POLICIES)
def test_enroll(policy: str, people: Path, model: Path, tmp_path: Path) -> None:
    gallery, report = tmp_path / "g", tmp_path / "e.json"
    code, out = invoke("enroll", people, "-m", model, "-g", gallery, *DETECT, "--no-face", policy, "--json", report)
    if policy == "error":
        check_error(code, out)
        assert not report.exists()
        return
    assert code == 0, out
    enrolled = json.loads(report.read_text())
    if policy == "skip":
        assert enrolled["added"] == 9 and enrolled["no_detection"] == 3
        assert walls(enrolled["skipped"]) == ["wall.png"] * 3 and "wall.png" in out
    else:
        assert enrolled["added"] == 12 and enrolled["no_detection"] == 0 and enrolled["skipped"] == []


@pytest.mark.parametrize("policy", POLICIES)
def test_query_of_photos(policy: str, people: Path, model: Path, tmp_path: Path) -> None:
    gallery = tmp_path / "g"
    code, out = invoke("enroll", people, "-m", model, "-g", gallery, *DETECT)
    assert code == 0, out
    summary = tmp_path / "q.json"
    code, out = invoke("query", people, "-m", model, "-g", gallery, *DETECT, "--no-face", policy, "--json", summary)
    if policy == "error":
        check_error(code, out)
        return
    assert code == 0, out
    answered = json.loads(summary.read_text())
    if policy == "skip":
        assert answered["detections"] == 9 and walls(answered["no_face"]) == ["wall.png"] * 3
        assert all(e["reason"] == "no face found" for e in answered["no_face"])
    else:
        assert answered["detections"] == 12 and answered["no_face"] == []


@pytest.mark.parametrize("policy", POLICIES)
def test_verify_pairs(policy: str, people: Path, pairs: Path, model: Path, tmp_path: Path) -> None:
    result = tmp_path / "v.json"
    code, out = invoke(
        "verify", "--pairs", pairs, "--root", people, "-m", model, "--folds", "2", *DETECT,
        "--no-face", policy, "--json", result,
    )
    if policy == "error":
        check_error(code, out)
        return
    assert code == 0, out
    verified = json.loads(result.read_text())
    if policy == "skip":
        assert (verified["pairs_scored"], verified["pairs_unscored"]) == (6, 6)
        assert walls(verified["skipped"]) == ["wall.png"] * 3 and "wall.png" in out
    else:
        assert (verified["pairs_scored"], verified["pairs_unscored"]) == (12, 0)


@pytest.mark.parametrize("policy", POLICIES)
def test_verify_two_photos(policy: str, people: Path, model: Path) -> None:
    code, out = invoke("verify", people / "s3" / "1.pgm", people / "s3" / "wall.png", "-m", model, *DETECT, "--no-face", policy)
    if policy == "whole":
        assert code == 0 and "distance" in out, out
    else:  # two photos are compared or nothing is: skip is an error too
        check_error(code, out)


@pytest.mark.parametrize("policy", POLICIES)
def test_calibrate(policy: str, people: Path, pairs: Path, model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "m"
    shutil.copytree(model, folder)
    before = (folder / "card.json").read_bytes()
    choice = tmp_path / "c.json"
    code, out = invoke(
        "calibrate", "-m", folder, "--pairs", pairs, "--root", people, "--best-accuracy", *DETECT,
        "--no-face", policy, "--json", choice,
    )
    if policy == "error":
        check_error(code, out)
        assert (folder / "card.json").read_bytes() == before
        return
    assert code == 0, out
    calibrated = json.loads(choice.read_text())
    assert calibrated["num_genuine"] + calibrated["num_impostor"] == (6 if policy == "skip" else 12)
    assert ("wall.png: no face found" in out) == (policy == "skip")


@pytest.mark.parametrize("policy", POLICIES)
def test_eval_of_a_face_folder(policy: str, people: Path, model: Path, tmp_path: Path) -> None:
    figures = tmp_path / "r.json"
    code, out = invoke("eval", "-m", model, "--data", f"folder:{people}", *DETECT, "--no-face", policy, "--json", figures)
    if policy == "error":
        check_error(code, out)
        return
    assert code == 0, out
    evaluated = json.loads(figures.read_text())
    if policy == "skip":
        assert walls(evaluated["skipped"]) == ["wall.png"] * 3
        assert all(e["reason"] == "no face found" for e in evaluated["skipped"])
    else:
        assert evaluated["skipped"] == []
