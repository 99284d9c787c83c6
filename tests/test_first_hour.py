"""The first hour of a new user, driven through the command line as README tells it: train a
tiny model on the Market-1501 subset, enrol a few of its people, query the shop video into a
MOTChallenge file, and score that file against the video's ground truth.  Each step's exit
code, files and printed figures are checked; the real data beside the project
(``../shared/data``) is needed, and the test skips with the reason where it is absent."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from reid.cli.app import app
from reid.gallery import Gallery
from reid.track.mot import MOT_DECIMALS, read_mot
from tests.conftest import SHARED_DATA, WHERE

# A run of a few frames keeps the test to a minute or two of two CPU cores.
FRAMES = 8
PEOPLE = ("0001", "0003", "0005")


@pytest.fixture
def own_threads() -> Iterator[None]:
    """``reid train --threads`` sets PyTorch's thread count for the process; put it back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def run(*arguments: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in arguments], terminal_width=120)
    return result.exit_code, result.output


def figure(output: str, name: str) -> str:
    """The text printed beside the metric ``name`` in a table or a plain line."""
    found = re.search(rf"(?m)^\W*{re.escape(name)}\W+?(-?\d+(?:\.\d+)?%?)\s*\W*$", output)
    assert found is not None, f"no {name} line in:\n{output}"
    return found.group(1)


@pytest.mark.usefixtures("own_threads")
def test_train_enrol_query_and_score_as_a_new_user(
    market1501_mini: Path, pedestrian_video: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    truth = SHARED_DATA / "video" / "pets09-s2l1" / "gt.txt"
    if not truth.is_file():
        pytest.skip(f"real data data/video/pets09-s2l1/gt.txt not present {WHERE}")
    # A fresh folder, as a clone is: models/ and galleries/ are made where the user stands.
    monkeypatch.chdir(tmp_path)

    code, out = run(
        "train", "--data", f"market1501:{market1501_mini}", "--out", "models/first", "--arch", "resnet18",
        "--pretrained", "none", "--size", "64x32", "--epochs", "1", "--max-steps", "2", "-P", "4", "-K", "4",
        "--threads", "2", "--device", "cpu",
    )  # fmt: skip
    assert code == 0, out
    model = tmp_path / "models" / "first"
    assert {"card.json", "weights.pt", "config.yaml", "history.jsonl"} <= {p.name for p in model.iterdir()}, out
    assert "models/first" in out, out
    card = json.loads((model / "card.json").read_text())
    assert card["training_data"]["train_identities"] == 50 and card["embedding_dim"] == 512, card
    assert len((model / "history.jsonl").read_text().splitlines()) == 1

    for person in PEOPLE:
        code, out = run("enroll", "-m", "models/first", "-g", "shop", "--id", person,
                        f"{market1501_mini}/query/{person}_*.jpg")  # fmt: skip
        assert code == 0, out
    expected = sum(len(list((market1501_mini / "query").glob(f"{p}_*.jpg"))) for p in PEOPLE)
    with Gallery.open(tmp_path / "galleries" / "shop") as gallery:
        assert len(gallery) == expected and {i.identity for i in gallery.identities()} == set(PEOPLE)

    query = ["query", pedestrian_video, "-m", "models/first", "-g", "shop", "--max-frames", FRAMES, "--mot", "shop.txt"]
    # No calibration step: training chose a threshold on the set's held-out identities.
    assert card["threshold"] is not None and "held-out" in card["threshold_source"], card
    code, out = run(*query)
    assert code == 0, out
    assert "model card" in out, out
    assert f"frames {FRAMES}/{FRAMES}" in out, out
    lines = Path("shop.txt").read_text().splitlines()
    rows = read_mot(Path("shop.txt"))
    assert rows and {r.frame for r in rows} <= set(range(1, FRAMES + 1)), lines
    assert all(re.fullmatch(rf"\d+,-?\d+(,-?\d+\.\d{{{MOT_DECIMALS}}}){{5}},-1,-1,-1", line) for line in lines), lines

    code, out = run("track", "--mot", "shop.txt", "--gt", truth, "--max-frames", FRAMES)
    assert code == 0, out
    for name in ("HOTA", "DetA", "AssA", "MOTA", "IDF1", "Prcn", "Rcll"):
        assert re.fullmatch(r"-?\d+\.\d\d%", figure(out, name)), (name, out)
    scored = [r for r in read_mot(truth) if r.score != 0 and r.frame <= FRAMES]
    assert int(figure(out, "Dets")) == len(rows) and int(figure(out, "GT_Dets")) == len(scored), out
    assert int(figure(out, "IDs")) == len({r.id for r in rows}), out
    assert "note:" not in out, "the frames scored are those the query covered"
