"""``reid report`` on a model folder written by a real training run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reid.cli import app
from reid.data import SyntheticConfig, generate_synthetic
from reid.engine import TrainConfig, train

MICRO = SyntheticConfig(seed=7, train_ids=8, test_ids=4, cameras_per_id=(2, 2), images_per_camera=(2, 2), distractors=0, junk=0)
runner = CliRunner()


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    data = generate_synthetic(root / "data", MICRO)
    config = TrainConfig(
        data=f"market1501:{data}", out=root / "model", architecture="resnet18", pretrained=None, input_size=(64, 32),
        p=4, k=2, epochs=2, eval_every=2, threads=2,
    )
    return train(config).model_dir


def test_report_prints_card_recipe_and_figures(trained: Path, tmp_path: Path) -> None:
    (trained / "curves.png").unlink()
    result = runner.invoke(app, ["report", str(trained), "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    for text in ("model card", "resnet18", "recipe (config.yaml):", "input_size: [64, 32]", "last epoch of 2 recorded",
                 "Rank-1", "mAP", "queries evaluated", "held out from training",
                 f"curves: {trained / 'curves.png'} (drawn now)"):
        assert text in result.output, text
    assert (trained / "curves.png").is_file()
    report = json.loads((tmp_path / "r.json").read_text())
    history = [json.loads(line) for line in (trained / "history.jsonl").read_text().splitlines()]
    assert report["last_epoch"] == history[-1] and report["epochs_recorded"] == 2
    assert report["metrics"]["rank1"] == history[-1]["eval"]["rank1"]
    assert report["recipe"]["epochs"] == 2 and report["card"]["fingerprint"]
    again = runner.invoke(app, ["report", str(trained)])
    assert "(drawn now)" not in again.output


def test_report_of_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path / "nothing")])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {tmp_path / 'nothing'}: no such model folder"


def test_report_writes_each_figure_as_train_writes_it(trained: Path) -> None:
    result = runner.invoke(app, ["report", str(trained)])
    assert result.exit_code == 0, result.output
    last = [json.loads(line) for line in (trained / "history.jsonl").read_text().splitlines()][-1]
    lines = result.output.splitlines()
    assert any(line.split() == ["loss", f"{last['loss']:.4f}"] for line in lines), result.output
    assert any(line.split() == ["images/s", f"{last['images_per_second']:.0f}"] for line in lines), result.output
    created = json.loads((trained / "card.json").read_text())["created"]
    assert any(line.split()[:2] == ["created", created[:19] + "+00:00"] for line in lines), result.output


def test_report_of_a_model_never_evaluated_says_so_in_one_line(tmp_path: Path) -> None:
    data = generate_synthetic(tmp_path / "data", MICRO)
    config = TrainConfig(
        data=f"market1501:{data}", out=tmp_path / "model", architecture="resnet18", pretrained=None, input_size=(64, 32),
        p=4, k=2, epochs=1, eval_every=0, threads=2,
    )
    folder = train(config).model_dir
    result = runner.invoke(app, ["report", str(folder)])
    assert result.exit_code == 0, result.output
    assert "ranking (Market-1501 protocol)" not in result.output and "Rank-1" not in result.output
    line = f"no ranking figures: the model was never evaluated (reid eval --model {folder} --data KIND:PATH)"
    assert line in " ".join(result.output.split())
