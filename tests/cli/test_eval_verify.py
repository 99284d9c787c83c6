"""``reid eval``, ``reid verify`` and ``reid calibrate`` through typer's test runner."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from reid.cli.app import app
from reid.models import ModelCard, build_network, load_card, save_model

runner = CliRunner()
COLOURS = [(200, 40, 40), (40, 200, 40), (40, 40, 200), (200, 200, 40)]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    card = ModelCard(name="t", architecture="resnet18", embedding_dim=64, input_size=(64, 32), num_classes=0)
    folder = tmp_path_factory.mktemp("models") / "m"
    save_model(build_network(card), card, folder)
    return folder


def write_image(path: Path, colour, seed: int, size=(64, 32)) -> Path:
    rng = np.random.default_rng(seed)
    image = np.clip(np.array(colour) + rng.normal(0, 30, (*size, 3)), 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), image)
    return path


def market_tree(root: Path) -> Path:
    """A tiny Market-1501-style tree: 4 identities, queries in camera 1, gallery in 1 and 2."""
    for pid, colour in enumerate(COLOURS, start=1):
        write_image(root / "bounding_box_train" / f"{pid + 10:04d}_c1s1_000001_00.jpg", colour, pid)
        write_image(root / "query" / f"{pid:04d}_c1s1_000001_00.jpg", colour, 10 + pid)
        for cam in (1, 2):
            write_image(root / "bounding_box_test" / f"{pid:04d}_c{cam}s1_000002_00.jpg", colour, 20 + 2 * pid + cam)
    write_image(root / "bounding_box_test" / "0000_c3s1_000003_00.jpg", (128, 128, 128), 99)
    write_image(root / "bounding_box_test" / "-1_c3s1_000004_00.jpg", (128, 128, 128), 98)
    return root


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_eval_json_and_plots(tmp_path, model):
    data = market_tree(tmp_path / "market")
    result = run("eval", "--model", model, "--data", f"market1501:{data}", "--json", tmp_path / "r.json",
                 "--plot", tmp_path / "plots", "--batch-size", "3")
    assert result.exit_code == 0, result.output
    assert "Rank-1" in result.output and "mINP" in result.output
    assert "mean of precision at each true match" in result.output
    figures = json.loads((tmp_path / "r.json").read_text())
    for key in ("rank1", "rank5", "rank10", "mAP", "mINP"):
        assert 0.0 <= figures[key] <= 1.0
    # The junk image (-1) is never loaded; the distractor (0000) is kept.
    assert (figures["num_query"], figures["num_gallery"], figures["num_valid_queries"]) == (4, 9, 4)
    assert figures["rank10"] == 1.0
    for name in ("ranked_list.png", "cmc.png"):
        assert cv2.imread(str(tmp_path / "plots" / name)) is not None


def test_eval_rerank(tmp_path, model):
    data = market_tree(tmp_path / "market")
    result = run("eval", "--model", model, "--data", f"market1501:{data}", "--rerank", "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.json").read_text())["reranked"] is True


def test_eval_errors_are_one_line(tmp_path, model):
    result = run("eval", "--model", model, "--data", f"market1501:{tmp_path / 'nowhere'}")
    assert result.exit_code == 1
    assert "nowhere" in result.output and "Traceback" not in result.output
    # The data is read first (before any model is fetched): with both wrong, it is named.
    result = run("eval", "--model", tmp_path / "no-model", "--data", "market1501:x")
    assert result.exit_code == 1 and "x: dataset folder not found" in result.output
    result = run("eval", "--model", tmp_path / "no-model", "--data", f"market1501:{market_tree(tmp_path / 'market')}")
    assert result.exit_code == 1 and "no-model" in result.output


def test_verify_two_images(tmp_path, model):
    a = write_image(tmp_path / "a.png", COLOURS[0], 1)
    b = write_image(tmp_path / "b.png", COLOURS[0], 2)
    result = run("verify", a, b, "--model", model)
    assert result.exit_code == 1
    assert f"{model}: the model card has no calibrated threshold" in " ".join(result.output.split())
    result = run("verify", a, b, "--model", model, "--threshold", "2.0", "--json", tmp_path / "v.json")
    assert result.exit_code == 0, result.output
    decision = json.loads((tmp_path / "v.json").read_text())
    assert decision["same"] is True and 0.0 <= decision["distance"] <= 2.0
    assert decision["threshold"] == 2.0 and decision["threshold_source"] == "given (--threshold)"
    result = run("verify", a, tmp_path / "missing.png", "--model", model, "--threshold", "1")
    assert result.exit_code == 1 and "missing.png" in result.output


def orl_csv(tmp_path: Path, people=range(1, 9)) -> Path:
    lines = ["path_a,path_b,label"]
    for s in people:
        lines += [f"s{s}/1.pgm,s{s}/{i}.pgm,1" for i in (2, 3, 4)]
        lines += [f"s{s}/1.pgm,s{s % 8 + 1}/{i}.pgm,0" for i in (2, 3, 4)]
    path = tmp_path / "orl_pairs.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_verify_pairs_on_orl_faces(tmp_path, model, orl_faces):
    result = run("verify", "--pairs", orl_csv(tmp_path), "--root", orl_faces, "--model", model,
                 "--json", tmp_path / "v.json", "--plot", tmp_path / "plots", "--folds", "4")
    assert result.exit_code == 0, result.output
    assert "accuracy (4-fold" in result.output and "TAR@FAR=0.001" in result.output
    assert "genuine" in result.output and "impostor" in result.output
    figures = json.loads((tmp_path / "v.json").read_text())
    assert figures["num_pairs"] == 48 and figures["num_genuine"] == 24
    assert set(figures["tar_at_far"]) == {"0.001", "0.01"}
    assert 0.0 <= figures["auc"] <= 1.0 and 0.0 <= figures["eer"] <= 1.0
    assert sum(figures["histogram"]["impostor"]) == 24
    for name in ("roc.png", "distance_histogram.png"):
        assert cv2.imread(str(tmp_path / "plots" / name)) is not None


def test_verify_lfw_pairs_skips_unreadable(tmp_path, model):
    root = tmp_path / "lfw"
    for n, colour in enumerate(COLOURS):
        for i in (1, 2):
            write_image(root / f"P{n}" / f"P{n}_{i:04d}.jpg", colour, 10 * n + i, size=(48, 48))
    (root / "P3" / "P3_0002.jpg").write_bytes(b"broken")
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("2 2\nP0 1 2\nP1 1 2\nP0 1 P1 1\nP2 1 P3 2\nP2 1 2\nP3 1 2\nP1 2 P2 2\nP0 2 P3 1\n")
    result = run("verify", "--pairs", pairs, "--root", root, "--model", model, "--json", tmp_path / "v.json")
    assert result.exit_code == 0, result.output
    assert "skipped 1 images (unreadable, or no face found) and the 2 pairs using them" in " ".join(result.output.split())
    figures = json.loads((tmp_path / "v.json").read_text())
    assert (figures["num_pairs"], figures["skipped_images"], figures["skipped_pairs"]) == (6, 1, 2)
    assert figures["folds"] == 2
    # Each TAR@FAR its impostor pairs cannot resolve gets the one note, as calibrate does.
    out, impostors = " ".join(result.output.split()), figures["num_impostor"]
    for far, needed in (("0.001", "10,000"), ("0.01", "1,000")):
        assert (
            f"note: {impostors} impostor pairs cannot resolve FAR {far} (that takes {needed}, so that 10 lie within its "
            f"threshold); TAR@FAR={far} is read where the threshold admits at most 0"
        ) in out, result.output


def test_verify_says_when_a_person_model_is_given_photos_without_a_persons_shape(tmp_path, model):
    square = [write_image(tmp_path / f"face-{k}.png", COLOURS[k], k, size=(64, 56)) for k in range(2)]
    tall = [write_image(tmp_path / f"person-{k}.png", COLOURS[k], k) for k in range(2)]
    result = run("verify", *square, "--model", model, "--threshold", "0.5", "--json", tmp_path / "v.json")
    assert result.exit_code == 0, result.output
    note = json.loads((tmp_path / "v.json").read_text())["kind_note"]
    assert note.startswith(f"note: {model} is a person Re-ID model") and note in " ".join(result.output.split())
    result = run("verify", *tall, "--model", model, "--threshold", "0.5")
    assert result.exit_code == 0 and "person Re-ID model" not in result.output, result.output


def test_verify_rejects_malformed_pairs(tmp_path, model):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a.png,b.png,1\na.png,b.png\n")
    result = run("verify", "--pairs", pairs, "--model", model)
    assert result.exit_code == 1
    assert "pairs.csv:2: expected 3 fields" in result.output


def test_calibrate_then_verify_uses_the_card(tmp_path, model, orl_faces):
    pairs = orl_csv(tmp_path)
    result = run("calibrate", "--model", model, "--pairs", pairs, "--root", orl_faces, "--best-accuracy")
    assert result.exit_code == 0, result.output
    card = load_card(model)
    assert card.threshold is not None and "best accuracy" in card.threshold_source
    assert "orl_pairs.csv" in card.threshold_source
    result = run("calibrate", "--model", model, "--pairs", pairs, "--root", orl_faces, "--far", "0.01",
                 "--json", tmp_path / "c.json")
    assert result.exit_code == 0, result.output
    choice = json.loads((tmp_path / "c.json").read_text())
    assert load_card(model).threshold == pytest.approx(choice["threshold"])
    assert choice["far"] <= 0.01 and "cannot resolve FAR 0.01" in " ".join(result.output.split())
    result = run("verify", orl_faces / "s1" / "1.pgm", orl_faces / "s1" / "2.pgm", "--model", model)
    assert result.exit_code == 0, result.output
    assert "threshold from: model card (reid calibrate" in " ".join(result.output.split())
    result = run("calibrate", "--model", model, "--pairs", pairs, "--far", "0.01", "--best-accuracy")
    assert result.exit_code == 1 and "not both" in result.output
    # The card now carries its impostor quantiles: --far reads a threshold from them, and a
    # given threshold that accepts ten times the card's share of impostors says so.
    assert load_card(model).impostor_quantiles
    a, b = orl_faces / "s1" / "1.pgm", orl_faces / "s2" / "1.pgm"
    result = run("verify", a, b, "--model", model, "--far", "0.2", "--json", tmp_path / "v.json")
    assert result.exit_code == 0, result.output
    assert "threshold from: given (--far 0.2 on the impostor pairs" in " ".join(result.output.split())
    assert json.loads((tmp_path / "v.json").read_text())["note"] == ""
    result = run("verify", a, b, "--model", model, "--threshold", "2", "--json", tmp_path / "v.json")
    assert result.exit_code == 0, result.output
    note = json.loads((tmp_path / "v.json").read_text())["note"]
    assert note.startswith("note: --threshold 2.0000 accepts about 100.0000% of the impostor pairs t's card")
    assert " ".join(note.split()) in " ".join(result.output.split())
    for bad in (["--far", "5"], ["--far", "0"], ["--far", "0.1", "--threshold", "0.5"], ["--far", "1e-9"]):
        result = run("verify", a, b, "--model", model, *bad)
        assert result.exit_code == 1 and "Traceback" not in result.output, bad
        assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1, result.output


def test_far_on_a_card_without_impostor_quantiles_is_refused(tmp_path, orl_faces):
    card = ModelCard(name="q", architecture="resnet18", embedding_dim=64, input_size=(64, 32), threshold=0.5)
    save_model(build_network(card), card, tmp_path / "q")
    result = run("verify", orl_faces / "s1" / "1.pgm", orl_faces / "s1" / "2.pgm", "--model", tmp_path / "q",
                 "--far", "1e-3")
    assert result.exit_code == 1
    line = " ".join(result.output.split())
    assert line.startswith("error: --far 0.001: ") and "q's card records no impostor distances to read" in line


def test_verify_detect_face(tmp_path, model, orl_faces):
    # OpenCV's Haar cascade finds the faces of these two ORL photos (not of every one).
    result = run("verify", orl_faces / "s1" / "1.pgm", orl_faces / "s1" / "3.pgm", "--model", model,
                 "--threshold", "1.0", "--detect", "face")
    assert result.exit_code == 0, result.output
    blank = write_image(tmp_path / "blank.png", (120, 120, 120), 0, size=(112, 92))
    result = run("verify", orl_faces / "s1" / "1.pgm", blank, "--model", model, "--threshold", "1.0",
                 "--detect", "face")
    assert result.exit_code == 1
    assert "blank.png: no face found" in result.output


def flat(output: str) -> str:
    """A table's text with its borders gone and wrapped cells joined."""
    return " ".join(output.replace("│", " ").replace("┃", " ").split())


def test_eval_says_what_its_figures_were_computed_on(tmp_path, model):
    data = market_tree(tmp_path / "market")
    result = run("eval", "--model", model, "--data", f"market1501:{data}", "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.output
    split = json.loads((tmp_path / "r.json").read_text())["computed_on"]
    # 4 queries, 9 gallery images (the distractor kept, the junk image not), identities 1-4.
    assert (split["query_images"], split["gallery_images"], split["identities"]) == (4, 9, 4)
    assert split["cameras_known"] is True and split["held_out"] is None and split["trained_on"] is None
    assert "4 query and 9 gallery images of 4 identities" in flat(result.output) and "not known" in flat(result.output)
    # A model trained on this data set's training split (identities 11-14): held out.
    card = ModelCard(
        name="t2", architecture="resnet18", embedding_dim=64, input_size=(64, 32), num_classes=0,
        training_data={"name": split["dataset"]},
    )
    trained = tmp_path / "trained"
    save_model(build_network(card), card, trained)
    result = run("eval", "--model", trained, "--data", f"market1501:{data}", "--json", tmp_path / "r2.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r2.json").read_text())["computed_on"]["held_out"] is True
    # Its training split holding a query identity: not held out, and the table says so.
    write_image(data / "bounding_box_train" / "0001_c1s1_000009_00.jpg", COLOURS[0], 7)
    result = run("eval", "--model", trained, "--data", f"market1501:{data}", "--json", tmp_path / "r3.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r3.json").read_text())["computed_on"]["held_out"] is False
    assert "NO (the model trained on these identities)" in flat(result.output)


def test_calibrate_says_when_the_model_does_not_separate_the_identities(tmp_path, model):
    import shutil

    folder = tmp_path / "m"
    shutil.copytree(model, folder)
    # Labels against what the images show: "same" pairs are two colours, "different" ones one
    # colour twice, so no threshold accepts genuine pairs without accepting the impostors first.
    root = tmp_path / "images"
    images = [[write_image(root / f"{c}-{k}.png", colour, 10 * c + k).name for k in range(3)] for c, colour in enumerate(COLOURS)]
    lines = ["path_a,path_b,label"]
    for c, (a, b, x) in enumerate(images):
        lines += [f"{a},{b},0", f"{a},{x},0", f"{b},{x},0"]
        lines += [f"{a},{other},1" for other in images[(c + 1) % len(images)]]
    (root / "pairs.csv").write_text("\n".join(lines) + "\n")
    result = run("calibrate", "--model", folder, "--pairs", root / "pairs.csv", "--far", "0.1", "--json", tmp_path / "c.json")
    assert result.exit_code == 0, result.output
    choice = json.loads((tmp_path / "c.json").read_text())
    assert choice["tar"] < 0.1 and "note: TAR" in choice["note"]
    assert all(line in " ".join(result.output.split()) for line in choice["note"].splitlines())


def test_calibrate_on_a_labelled_set_needs_no_pair_file(tmp_path, model):
    import shutil

    data = market_tree(tmp_path / "market")
    folder = tmp_path / "m"
    shutil.copytree(model, folder)
    result = run("calibrate", "--model", folder, "--data", f"market1501:{data}", "--json", tmp_path / "c.json")
    assert result.exit_code == 0, result.output
    choice = json.loads((tmp_path / "c.json").read_text())
    card = load_card(folder)
    # 4 queries (camera 1) x 9 gallery images (the junk image is nobody's), less the 4 pairs of
    # one identity in one camera: 4 genuine and 28 impostor pairs (the distractor's included).
    assert (choice["num_genuine"], choice["num_impostor"]) == (4, 28)
    assert card.threshold == choice["threshold"] and card.impostor_quantiles
    assert card.threshold_source.startswith(
        f"reid calibrate: FAR <= 0.36, 0.001 asked: not resolved by 28 impostor pairs on the query x "
        f"gallery pairs of market1501:{data} (4 identities, 13 images: 4 genuine, 28 impostor pairs)"
    )
    # The title, the table and the note tell one story: the rate asked, the rate used, what it admits.
    out = " ".join(result.output.split())
    admitted = round(choice["far"] * 28)
    assert "threshold for " in out and "(FAR <= 0.36, 0.001 asked: not resolved by 28 impostor pairs)" in out
    assert f"{100 * choice['far']:.4f}% ({admitted} of 28 impostor pairs)" in out
    assert (
        "note: 28 impostor pairs cannot resolve FAR 0.001 (that takes 10,000, so that 10 lie within its threshold); "
        f"chosen at FAR <= 0.36 instead, the threshold admits {admitted} of them (FAR {100 * choice['far']:.4f}%)"
    ) in out
    assert "admits no impostor" not in out
    a = data / "query" / "0001_c1s1_000001_00.jpg"
    result = run("verify", a, data / "bounding_box_test" / "0001_c2s1_000002_00.jpg", "--model", folder)
    assert result.exit_code == 0 and "threshold from: model card (reid calibrate: FAR <= 0.36" in " ".join(result.output.split())
    for args, line in (
        ((), "give --pairs FILE or --data KIND:PATH"),
        (("--data", f"market1501:{data}", "--pairs", tmp_path / "p.csv"), "give --pairs FILE or --data KIND:PATH"),
        (("--data", f"market1501:{data}", "--root", data), "--root is where a pair file's paths start"),
        (("--data", f"market1501:{tmp_path / 'none'}"), f"{tmp_path / 'none'}: dataset folder not found"),
    ):
        result = run("calibrate", "--model", folder, *args)
        assert result.exit_code == 1 and line in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("model_given", ["folder", "missing"])
def test_calibrate_names_missing_data_before_any_model_or_progress(tmp_path, model, model_given):
    """The labelled set is read first: its error is the one line printed, with no progress
    drawn before it, whether or not the model is there."""
    import os
    import subprocess
    import sys

    folder = model if model_given == "folder" else tmp_path / "no-model"
    missing = tmp_path / "no-market"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "reid", "calibrate", "-m", str(folder), "--data", f"market1501:{missing}"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.splitlines() == [f"error: {missing}: dataset folder not found"], done.stderr
