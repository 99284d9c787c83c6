"""``reid train`` and ``reid demo`` through typer's test runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reid.cli import app
from reid.data import SyntheticConfig, generate_synthetic

MICRO = SyntheticConfig(seed=5, train_ids=8, test_ids=4, cameras_per_id=(2, 2), images_per_camera=(2, 2), distractors=2, junk=1)
runner = CliRunner()


@pytest.fixture(scope="module")
def micro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_synthetic(tmp_path_factory.mktemp("micro"), MICRO)


def test_train_writes_a_model_folder(micro: Path, tmp_path: Path) -> None:
    out = tmp_path / "m"
    result = runner.invoke(app, [
        "train", "--data", f"market1501:{micro}", "--out", str(out), "--arch", "resnet18", "--pretrained", "none",
        "--size", "64x32", "--p", "4", "--k", "2", "--epochs", "1", "--eval-every", "1", "--threads", "2",
        "--loss", "triplet", "--loss-option", "mining=hard", "--loss-option", "soft=true", "--json", str(tmp_path / "t.json"), "--quiet",
    ])
    assert result.exit_code == 0, result.output
    card = json.loads((out / "card.json").read_text())
    assert card["architecture"] == "resnet18" and card["input_size"] == [64, 32]
    assert card["loss"]["metric"] == {"name": "triplet", "weight": 1.0, "mining": "hard", "soft": True}
    assert 0.0 <= card["metrics"]["rank1"] <= 1.0
    summary = json.loads((tmp_path / "t.json").read_text())
    assert summary["history"][0]["epoch"] == 1 and "eval" in summary["history"][0]


def test_demo_json_has_both_rows(micro: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, [
        "demo", "--data", f"market1501:{micro}", "--out", str(tmp_path / "demo"), "--epochs", "1", "--p", "4", "--k", "2",
        "--json", str(tmp_path / "demo.json"), "--quiet", "--threads", "2",
    ])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "demo.json").read_text())
    for row in ("untrained", "trained"):
        assert set(report[row]) >= {"rank1", "rank5", "rank10", "mAP", "mINP", "num_query", "num_gallery", "num_valid_queries"}
        assert all(0.0 <= report[row][k] <= 1.0 for k in ("rank1", "rank5", "rank10", "mAP", "mINP"))
    assert report["seconds"] > 0
    assert (tmp_path / "demo" / "weights.pt").is_file()
    card = json.loads((tmp_path / "demo" / "card.json").read_text())
    assert 0.0 < card["threshold"] < 2.0 and card["threshold"] == report["threshold"]
    assert card["threshold_source"].startswith("reid demo: FAR <= 0.01")
    assert "untrained" in result.output and "trained" in result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--data", "market1501:/nonexistent/x"], "/nonexistent/x: dataset folder not found"),
        (["--data", "imagenet:/x"], "unknown dataset kind 'imagenet'"),
        (["--size", "big"], "--size 'big': expected HxW"),
        (["--loss-option", "margin"], "--loss-option 'margin': expected KEY=VALUE"),
        (["--loss", "triplet", "--loss-option", "margin=wide"], "option margin='wide' is not a valid float"),
    ],
)
def test_train_errors_are_one_line(micro: Path, tmp_path: Path, args: list[str], message: str) -> None:
    base = ["train", "--data", f"market1501:{micro}", "--out", str(tmp_path / "m"), "--arch", "resnet18", "--pretrained", "none", "--quiet"]
    result = runner.invoke(app, base + args)
    assert result.exit_code == 1
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "m" / "weights.pt").exists()


def test_unwritable_outputs_are_refused_before_training(micro: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "model.pt"
    a_file.write_text("x")
    common = ["train", "--data", f"market1501:{micro}", "--arch", "resnet18", "--pretrained", "none", "--size", "64x32",
              "--p", "4", "--k", "2", "--epochs", "1", "--quiet"]
    result = runner.invoke(app, [*common, "--out", str(a_file)])
    assert result.exit_code == 1
    assert [line for line in result.output.splitlines() if line] == [
        f"error: {a_file}: --out needs a folder here; this is a file"
    ]
    result = runner.invoke(app, [*common, "--out", str(tmp_path / "m"), "--json", str(tmp_path)])
    assert result.exit_code == 1 and "--json needs a file name; this is a folder" in result.output
    assert not (tmp_path / "m").exists() and a_file.read_text() == "x"
