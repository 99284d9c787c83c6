"""Pictures of results are written as new files: a link planted at a picture's name is
replaced, never followed to overwrite what it points at."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from reid.evaluation.plots import plot_cmc, plot_training_curves
from reid.evaluation.ranking import RankingResult


def planted_link(path: Path, victim: Path) -> None:
    victim.write_text("the user's file")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(victim)


def test_curves_are_not_written_through_a_link_at_their_name(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    planted_link(tmp_path / "model" / "curves.png", victim)
    history = [{"epoch": e, "step": 4 * e, "loss": 1.0 / e, "lr": 1e-3} for e in (1, 2, 3)]
    path = plot_training_curves(history, tmp_path / "model" / "curves.png")
    assert victim.read_text() == "the user's file"
    assert not path.is_symlink() and cv2.imread(str(path)) is not None


def test_eval_plots_are_not_written_through_a_link_at_their_name(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    planted_link(tmp_path / "plots" / "cmc.png", victim)
    cmc = np.linspace(0.5, 1.0, 10)
    result = RankingResult(0.5, 0.8, 1.0, 0.6, 0.3, cmc, 4, 4, 20)
    path = plot_cmc(result, tmp_path / "plots" / "cmc.png")
    assert victim.read_text() == "the user's file"
    assert not path.is_symlink() and cv2.imread(str(path)) is not None
