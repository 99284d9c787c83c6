"""What a real run records: config.yaml, history.jsonl, curves.png, TensorBoard events."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import cv2
import pytest
import yaml
from typer.testing import CliRunner

from reid.cli import app
from reid.data import SyntheticConfig, generate_synthetic
from reid.engine import TrainConfig, train
from reid.engine.config import CONFIG_FILE
from reid.engine.history import CURVES_FILE, HISTORY_FILE, read_history, write_curves
from reid.errors import ConfigError, DataError, ModelError

MICRO = SyntheticConfig(seed=12, train_ids=8, test_ids=4, cameras_per_id=(2, 2), images_per_camera=(2, 2), distractors=0, junk=0)
LOSS_PARTS = ("loss", "ce", "metric", "lr", "images_per_second", "step")


@pytest.fixture(scope="module")
def micro_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    return "market1501:" + str(generate_synthetic(tmp_path_factory.mktemp("micro"), MICRO))


def micro_config(data: str, out: Path, **changes: object) -> TrainConfig:
    config = TrainConfig(
        data=data, out=out, architecture="resnet18", pretrained=None, input_size=(64, 32),
        p=4, k=2, epochs=1, lr=1e-3, warmup_epochs=1, schedule="cosine", threads=2,
    )
    return replace(config, **changes)


def png_shape(path: Path) -> tuple[int, ...]:
    image = cv2.imread(str(path))
    assert image is not None, f"{path} is not a readable PNG"
    return image.shape


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in ``folder`` as TensorBoard itself loads it (stale events purged)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_run_then_resume_records_every_epoch_once(micro_data: str, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    out, board = tmp_path / "m", tmp_path / "tb"
    first = micro_config(micro_data, out, epochs=1, eval_every=1, tensorboard=board)
    train(first)
    history = read_history(out)
    assert [entry["epoch"] for entry in history] == [1]
    assert all(key in history[0] for key in LOSS_PARTS) and set(history[0]["eval"]) >= {"rank1", "mAP", "mINP"}
    assert yaml.safe_load((out / CONFIG_FILE).read_text()) == first.to_recipe()
    height, width, _ = png_shape(out / CURVES_FILE)
    assert height > 400 and width > 400
    one_epoch_curves = (out / CURVES_FILE).read_bytes()

    # A run stopped after writing a history line its checkpoint does not hold.
    with open(out / HISTORY_FILE, "a") as handle:
        handle.write('{"epoch": 2, "loss": 99.0, "step": 999}\n')
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(board)) as stale:
        stale.add_scalar("train/loss", 99.0, 999)
    resumed = replace(first, epochs=3, eval_every=2, resume=True)
    result = train(resumed)

    history = read_history(out)
    assert [entry["epoch"] for entry in history] == [1, 2, 3]
    assert history == result.history
    assert all(entry["loss"] != 99.0 for entry in history)
    steps = [entry["step"] for entry in history]
    assert steps == sorted(steps) and len(set(steps)) == 3
    assert ["eval" in entry for entry in history] == [True, True, True]  # epoch 1, every 2nd, and the last
    assert yaml.safe_load((out / CONFIG_FILE).read_text())["epochs"] == 3
    assert (out / CURVES_FILE).read_bytes() != one_epoch_curves

    board_scalars = scalars(board)
    for tag, key in [("train/loss", "loss"), ("train/ce", "ce"), ("train/metric", "metric"), ("train/lr", "lr"), ("eval/mAP", "mAP")]:
        logged = board_scalars[tag]
        assert [step for step, _ in logged] == steps, tag
        expected = [entry["eval"][key] if tag.startswith("eval") else entry[key] for entry in history]
        assert [value for _, value in logged] == pytest.approx(expected, rel=1e-5), tag


def test_metric_only_run_without_evaluation_draws_losses_and_lr(micro_data: str, tmp_path: Path) -> None:
    out = tmp_path / "m"
    train(micro_config(micro_data, out, epochs=2, ce_weight=0.0, eval_every=0))
    history = read_history(out)
    assert [entry["epoch"] for entry in history] == [1, 2]
    assert all(entry["ce"] == 0.0 and entry["metric"] > 0 and "eval" not in entry for entry in history)
    height, _, _ = png_shape(out / CURVES_FILE)
    with_eval = write_curves(tmp_path / "other", [{**history[0], "eval": {"rank1": 0.5, "mAP": 0.4}}])
    assert png_shape(with_eval)[0] > height  # the Rank-1/mAP panel is added only when evaluated


def test_tensorboard_missing_stops_before_training(micro_data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch.utils.tensorboard", raising=False)
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # what Python sees when it is not installed
    with pytest.raises(ConfigError, match=r'needs the tensorboard package, which is not installed: pip install "reid-toolkit\[tensorboard\]"'):
        train(micro_config(micro_data, tmp_path / "m", tensorboard=tmp_path / "tb"))
    assert not (tmp_path / "m").exists() and not (tmp_path / "tb").exists()


def test_history_file_errors_name_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"history.jsonl: no training history$"):
        read_history(tmp_path)
    (tmp_path / HISTORY_FILE).write_text('{"epoch": 1, "loss": 1.0}\nnot json\n')
    with pytest.raises(ModelError, match=r"history.jsonl: line 2 is not JSON$"):
        read_history(tmp_path)
    (tmp_path / HISTORY_FILE).write_text('{"loss": 1.0}\n')
    with pytest.raises(ModelError, match=r"history.jsonl: line 1: not an epoch entry"):
        read_history(tmp_path)
    with pytest.raises(DataError, match="no epochs to draw"):
        write_curves(tmp_path, [])


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"epoch": "1"}', "epoch is '1', not a whole number >= 1"),
        ('{"epoch": 0}', "epoch is 0, not a whole number >= 1"),
        ('{"epoch": true}', "epoch is True, not a whole number >= 1"),
        ('{"epoch": 1, "step": -3}', "step is -3, not a whole number >= 0"),
        ('{"epoch": 1, "loss": "low"}', "loss is 'low', not a number"),
        ('{"epoch": 1, "lr": [0.1]}', "lr is [0.1], not a number"),
        ('{"epoch": 1, "eval": 0.9}', "eval is 0.9, not an object of figures"),
        ('{"epoch": 1, "eval": {"rank1": 95}}', "eval rank1 is 95, not a fraction between 0 and 1"),
        ('{"epoch": 1, "eval": {"mAP": "high"}}', "eval mAP is 'high', not a fraction"),
        ("[1, 2]", "not an epoch entry (a JSON object), but a list"),
        ("[" * 100 + "]" * 100, "nested deeper than 32 levels"),
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 32 levels"),
        ('{"epoch": ' + "9" * 5000 + "}", "a number longer than 40 characters"),
        ('{"epoch": 1, "loss": 0.' + "5" * 5000 + "}", "a number longer than 40 characters"),
    ],
)
def test_hand_edited_history_values_are_one_line_in_report(tmp_path: Path, line: str, problem: str) -> None:
    (tmp_path / HISTORY_FILE).write_text('{"epoch": 1, "loss": 1.0, "lr": 0.1}\n' + line + "\n")
    with pytest.raises(ModelError) as caught:
        read_history(tmp_path)
    assert str(caught.value) == f"{tmp_path / HISTORY_FILE}: line 2: {problem}" or problem in str(caught.value)
    assert str(caught.value).startswith(f"{tmp_path / HISTORY_FILE}: line 2") and "\n" not in str(caught.value)
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 1 and result.output.count("\n") == 1 and problem[:20] in result.output.replace("\n", "")


def test_a_huge_history_is_refused_unread(tmp_path: Path) -> None:
    with open(tmp_path / HISTORY_FILE, "wb") as handle:
        handle.truncate(30 << 30)
    with pytest.raises(ModelError, match=r"history.jsonl: 32,212,254,720 bytes, more than the .* a training history may have"):
        read_history(tmp_path)
