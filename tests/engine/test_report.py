"""``model_report`` over model folders made of real files: finished, running, older, broken."""

from __future__ import annotations

from pathlib import Path

import cv2
import pytest

from reid.engine.config import TrainConfig, write_config
from reid.engine.history import CURVES_FILE, HISTORY_FILE, write_history
from reid.engine.report import model_report
from reid.errors import ConfigError, ModelError
from reid.models.card import ModelCard, save_card

HISTORY = [
    {"epoch": 1, "step": 10, "loss": 3.0, "ce": 2.0, "metric": 1.0, "lr": 1e-4, "images_per_second": 50.0},
    {"epoch": 2, "step": 20, "loss": 2.0, "ce": 1.5, "metric": 0.5, "lr": 2e-4, "images_per_second": 55.0,
     "eval": {"rank1": 0.4, "mAP": 0.3, "mINP": 0.1}},
    {"epoch": 3, "step": 30, "loss": 1.5, "ce": 1.2, "metric": 0.3, "lr": 3e-4, "images_per_second": 56.0},
]


def model_folder(root: Path, card: bool = True, history: bool = True, recipe: bool = True) -> Path:
    folder = root / "m"
    config = TrainConfig(out=folder, architecture="resnet18", epochs=3)
    if recipe:
        write_config(config, folder)
    if history:
        write_history(folder, HISTORY)
    if card:
        save_card(ModelCard(name="m", architecture="resnet18", embedding_dim=512, training={**config.to_dict(), "history": HISTORY}), folder)
    return folder


def test_finished_model_reports_card_recipe_figures_and_draws_missing_curves(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    report = model_report(folder)
    assert report.card is not None and report.card.name == "m"
    assert report.recipe == TrainConfig(out=folder, architecture="resnet18", epochs=3)
    assert report.last_epoch == HISTORY[-1]
    assert report.metrics == {"rank1": 0.4, "mAP": 0.3, "mINP": 0.1}  # the last evaluated epoch's
    assert report.curves == folder / CURVES_FILE and report.curves_written
    assert cv2.imread(str(report.curves)) is not None
    assert not model_report(folder).curves_written  # there now; left as it is
    assert model_report(folder).to_dict()["epochs_recorded"] == 3


def test_card_metrics_win_and_running_or_older_folders_report(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    save_card(ModelCard(name="m", architecture="resnet18", embedding_dim=512, metrics={"rank1": 0.9, "mAP": 0.8}), folder)
    assert model_report(folder).metrics == {"rank1": 0.9, "mAP": 0.8}  # evaluated after training, as the demo does

    running = model_folder(tmp_path / "running", card=False)
    report = model_report(running)
    assert report.card is None and len(report.history) == 3

    older = model_folder(tmp_path / "older", history=False, recipe=False)
    report = model_report(older)
    assert report.recipe is None and report.history == HISTORY  # from the card
    assert report.curves_written


def test_report_errors_name_the_folder_or_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"nowhere: no such model folder$"):
        model_report(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match=r"empty: not a model folder \(no card.json, config.yaml or history.jsonl\)$"):
        model_report(tmp_path / "empty")
    folder = model_folder(tmp_path, card=False)
    (folder / HISTORY_FILE).write_text("{broken\n")
    with pytest.raises(ModelError, match=r"history.jsonl: line 1 is not JSON$"):
        model_report(folder)
    (folder / "config.yaml").write_text("epochs: -1\n")
    with pytest.raises(ConfigError, match=r"config.yaml: epochs: input should be greater than or equal to 1 \(got -1\)$"):
        model_report(folder)
