"""Every command over a folder of bad inputs mixed with good ones.

No traceback, every good input answered or stored, every bad one named with its reason,
the gallery intact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bad_inputs import (
    dangling_link,
    good_jpg,
    pillow_image,
    png_bomb,
    random_bytes,
    sparse_file,
    symlink_loop,
    truncated_jpg,
)
from typer.testing import CliRunner

from reid.cli.app import app
from reid.models import ModelCard, build_network, save_model

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
Inputs = tuple[Path, dict[str, str]]
GOOD = {"ann/a.jpg", "ann/b.gif", "ann/c.jfif", "bob/d.jpg", "bob/e.png"}


def bad_and_good(root: Path) -> dict[str, str]:
    """ROOT/<identity>/<image> with five good photos and every kind of bad entry; returns
    each bad entry (relative path) with a word its reason must contain."""
    good_jpg(root / "ann" / "a.jpg", seed=1)
    pillow_image(root / "ann" / "b.gif", "GIF", seed=2)
    pillow_image(root / "ann" / "c.jfif", "JPEG", seed=3)
    good_jpg(root / "bob" / "d.jpg", seed=4)
    good_jpg(root / "bob" / "e.png", seed=5)  # JPEG bytes under a .png name: decoded by content
    bad = {
        "ann/cut.jpg": "not a readable image",
        "ann/noise.png": "not a readable image",
        "ann/bomb.png": "over the limit",
        "ann/huge.jpg": "over the image limit",
        "ann/empty.jpg": "empty file",
        "ann/text.jpg": "not a readable image",
        "ann/notes.txt": "not an image",
        "ann/loop.jpg": "link to nothing readable",
        "ann/moved.jpg": "link to nothing readable",
        "ann/.DS_Store": "hidden or system",
        "ann/._a.jpg": "hidden or system",
        "bob/Thumbs.db": "hidden or system",
        "__MACOSX": "hidden or system",
        "carl": "link to nothing readable",
    }
    truncated_jpg(root / "ann" / "cut.jpg")
    random_bytes(root / "ann" / "noise.png")
    png_bomb(root / "ann" / "bomb.png")
    sparse_file(root / "ann" / "huge.jpg", 2 * 1024**3)
    (root / "ann" / "empty.jpg").write_bytes(b"")
    (root / "ann" / "text.jpg").write_text("this is not a photo\n")
    (root / "ann" / "notes.txt").write_text("notes")
    symlink_loop(root / "ann" / "loop.jpg")
    dangling_link(root / "ann" / "moved.jpg")
    (root / "ann" / ".DS_Store").write_bytes(b"\0" * 8)
    good_jpg(root / "ann" / "._a.jpg", seed=6)
    (root / "bob" / "Thumbs.db").write_bytes(b"\0" * 8)
    good_jpg(root / "__MACOSX" / "ann" / "a.jpg", seed=7)
    dangling_link(root / "carl")
    if not IS_ROOT:
        good_jpg(root / "bob" / "locked.jpg", seed=8).chmod(0)
        bad["bob/locked.jpg"] = "cannot read"
    return bad


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    card = ModelCard(
        name="t", architecture="resnet18", embedding_dim=64, input_size=(64, 32), num_classes=0, threshold=0.5
    )
    folder = tmp_path_factory.mktemp("models") / "m"
    save_model(build_network(card), card, folder)
    return folder


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    root = tmp_path_factory.mktemp("inputs") / "people"
    return root, bad_and_good(root)


def invoke(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def named(skipped: list[dict[str, str]], root: Path) -> dict[str, str]:
    return {Path(s["path"]).relative_to(root).as_posix(): s["reason"] for s in skipped}


def assert_every_bad_named(reasons: dict[str, str], bad: dict[str, str]) -> None:
    for entry, word in bad.items():
        assert entry in reasons, f"{entry} is not named among the skipped inputs"
        assert word in reasons[entry], f"{entry}: {reasons[entry]!r} does not say {word!r}"


def assert_each_skip_names_its_file_once(out: str) -> None:
    lines = [line for line in out.splitlines() if line.startswith("skipped ")]
    assert lines, out
    for line in lines:
        path = line.removeprefix("skipped ").split(": ")[0]
        assert line.count(path) == 1, line


def test_enroll_stores_every_good_image_and_names_every_bad_one(tmp_path: Path, model: Path, inputs: Inputs) -> None:
    root, bad = inputs
    gallery = tmp_path / "g"
    code, out = invoke("enroll", "-m", model, "-g", gallery, root, "--batch-size", "2", "--json", tmp_path / "e.json")
    assert code == 0, out
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["added"] == len(GOOD) and report["identities"] == {"ann": 3, "bob": 2}
    assert_every_bad_named(named(report["skipped"], root), bad)
    assert_each_skip_names_its_file_once(out)
    code, out = invoke("gallery", "info", gallery, "--check", "--json")
    assert code == 0, out
    assert json.loads(out)["items"] == len(GOOD)


def test_query_answers_every_good_image(tmp_path: Path, model: Path, inputs: Inputs) -> None:
    root, bad = inputs
    gallery = tmp_path / "g"
    assert invoke("enroll", "-m", model, "-g", gallery, root)[0] == 0
    code, out = invoke("query", root, "-m", model, "-g", gallery, "--json", tmp_path / "q.json")
    assert code == 0, out
    summary = json.loads((tmp_path / "q.json").read_text())
    assert summary["frames"] == summary["detections"] == len(GOOD)
    # Each good image finds itself: the gallery holds the same files.
    assert summary["identities"] == {"ann": 3, "bob": 2}
    assert_every_bad_named(named(summary["unreadable"], root), bad)
    assert_each_skip_names_its_file_once(out)


def test_eval_over_the_folder_names_what_it_left_out(tmp_path: Path, model: Path, inputs: Inputs) -> None:
    root, bad = inputs
    code, out = invoke("eval", "-m", model, "--data", f"folder:{root}", "--json", tmp_path / "r.json")
    assert code == 0, out
    figures = json.loads((tmp_path / "r.json").read_text())
    assert figures["num_query"] + figures["num_gallery"] == len(GOOD)
    reasons = named(figures["not_taken"] + figures["skipped"], root)
    assert_every_bad_named(reasons, bad)
    assert figures["same_camera_filtering"] is False and "same-camera filtering" in out


def test_verify_pairs_scores_the_good_pairs(tmp_path: Path, model: Path, inputs: Inputs) -> None:
    root, bad = inputs
    lines = ["ann/a.jpg,ann/b.gif,1", "bob/d.jpg,bob/e.png,1", "ann/a.jpg,bob/d.jpg,0", "ann/c.jfif,bob/e.png,0"]
    lines += [f"ann/a.jpg,{entry},0" for entry in ("ann/cut.jpg", "ann/bomb.png", "ann/huge.jpg", "ann/text.jpg")]
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("\n".join(lines) + "\n")
    code, out = invoke(
        "verify", "--pairs", pairs, "--root", root, "-m", model, "--folds", "2", "--json", tmp_path / "v.json"
    )
    assert code == 0, out
    result = json.loads((tmp_path / "v.json").read_text())
    assert (result["pairs_total"], result["pairs_scored"], result["pairs_unscored"]) == (8, 4, 4)
    assert result["accuracy_unscored_as_errors"] == pytest.approx(result["accuracy_scored_pairs"] / 2)
    assert {Path(s["path"]).name for s in result["skipped"]} == {"cut.jpg", "bomb.png", "huge.jpg", "text.jpg"}


@pytest.mark.parametrize("entry", ["ann/bomb.png", "ann/cut.jpg", "ann/huge.jpg", "ann/text.jpg", "ann/loop.jpg"])
def test_verify_two_images_names_the_bad_one(model: Path, inputs: Inputs, entry: str) -> None:
    root, bad = inputs
    code, out = invoke("verify", root / "ann" / "a.jpg", root / entry, "-m", model)
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and Path(entry).name in errors[0]


def test_enroll_as_a_process_prints_no_traceback_and_no_opencv_log(tmp_path: Path, model: Path, inputs: Inputs) -> None:
    root, bad = inputs
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "reid", "enroll", "-m", str(model), "-g", str(tmp_path / "g"), str(root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "[ERROR" not in done.stderr and "[ WARN" not in done.stderr
    for entry, word in bad.items():
        assert any(entry in line and word in line for line in done.stderr.splitlines()), entry


# A published Re-ID model a command would download before its first use (a fresh machine
# has no copy); every command names a missing input before it fetches one.
PUBLISHED = "osnet_x0_5.dukemtmcreid"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("train", "--data", "market1501:{missing}", "--out", "{tmp}/m", "--quiet"), "{missing}: dataset folder not found"),
        (("eval", "-m", PUBLISHED, "--data", "market1501:{missing}"), "{missing}: dataset folder not found"),
        (("enroll", "market1501:{missing}", "-m", PUBLISHED, "-g", "{tmp}/g"), "{missing}: dataset folder not found"),
        (("enroll", "{missing}", "-m", PUBLISHED, "-g", "{tmp}/g"), "{missing}: no such file or folder"),
        (("query", "{tmp}/a.png", "-m", PUBLISHED, "-g", "{missing}"), "{missing}: no gallery here"),
        (("query", "{missing}.mp4", "-m", PUBLISHED, "-g", "{tmp}"), "{missing}.mp4: no such file"),
        (("verify", "{missing}.jpg", "{missing}.jpg", "-m", PUBLISHED), "{missing}.jpg: no such image file"),
        (("verify", "--pairs", "{missing}.csv", "-m", PUBLISHED), "{missing}.csv: pair file not found"),
        (("track", "-d", "{missing}.txt", "--out", "{tmp}/t.txt", "--video", "{tmp}/v.avi", "-m", PUBLISHED),
         "{missing}.txt: no such detection file"),
        (("serve", "--root", "{tmp}/file", "-m", PUBLISHED, "--no-auth"), "{tmp}/file: the root of the galleries must be a folder"),
    ],
    ids=["train", "eval", "enroll-data", "enroll-path", "query-gallery", "query-source", "verify", "verify-pairs", "track", "serve"],
)
def test_a_missing_input_is_named_before_any_download(tmp_path: Path, args: tuple[str, ...], line: str) -> None:
    # Offline a download fails at once with a line about the network: the line must name the input.
    import cv2
    import numpy as np

    (tmp_path / "file").write_text("")
    cv2.imwrite(str(tmp_path / "a.png"), np.full((64, 32, 3), 90, np.uint8))
    fill = {"missing": tmp_path / "missing", "tmp": tmp_path}
    code, out = invoke(*(a.format(**fill) for a in args))
    assert code == 1 and line.format(**fill) in " ".join(out.split()), out
    assert not any(word in out for word in ("fetch", "network", "download", "imagenet"))
