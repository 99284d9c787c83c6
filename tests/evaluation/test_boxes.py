"""Detection boxes scored against ground truth: MOT files read, one-to-one matching at an
IoU, recall by person height and box tightness."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reid.errors import DataError
from reid.evaluation.boxes import band_labels, match_frame, read_mot_boxes, score_boxes


def test_mot_files_are_read_by_zero_based_frame_and_pixel(tmp_path: Path) -> None:
    path = tmp_path / "gt.txt"
    path.write_text("1,1,11,21,30,80,1,-1,-1,-1\n1,2,101,21,30,80,0,-1,-1,-1\n3,1,13,21,30,90,1,-1,-1,-1\n")
    every = read_mot_boxes(path)
    assert sorted(every) == [0, 2] and len(every[0]) == 2
    scored = read_mot_boxes(path, min_confidence=1)
    assert np.allclose(scored[0], [[10, 20, 30, 80]]) and np.allclose(scored[2], [[12, 20, 30, 90]])
    with pytest.raises(DataError, match="missing.txt: no such MOT file"):
        read_mot_boxes(tmp_path / "missing.txt")


def test_matching_is_one_to_one_and_needs_the_overlap() -> None:
    truth = np.array([[0, 0, 40, 100], [200, 0, 40, 100]], float)
    # Two detections on the first person (the better one matches), one half off the second.
    found = np.array([[2, 0, 40, 100], [10, 0, 40, 100], [225, 0, 40, 100]], float)
    assert match_frame(truth, found) == [(0, 0)]
    assert match_frame(truth, found, min_iou=0.2) == [(0, 0), (1, 2)]
    assert match_frame(truth, np.empty((0, 4))) == []


def test_scores_count_bands_and_tightness() -> None:
    truth = {0: np.array([[0, 0, 30, 60], [100, 0, 40, 100], [300, 0, 50, 150]], float), 1: np.empty((0, 4))}
    found = {
        0: np.array([[0, 0, 36, 60], [100, 0, 48, 100]], float),  # 1.2 times as wide, as tall
        1: np.array([[0, 0, 10, 10]], float),  # a false alarm in a frame with nobody
    }
    score = score_boxes(truth, found, [0, 1])
    assert (score.truths, score.detections, score.matched) == (3, 3, 2)
    assert score.precision == pytest.approx(2 / 3) and score.recall == pytest.approx(2 / 3)
    assert band_labels() == ["<80", "80-120", ">120"]
    assert score.by_height == {"<80": (1, 1), "80-120": (1, 1), ">120": (0, 1)}
    assert score.width_ratio == pytest.approx(1.2) and score.height_ratio == pytest.approx(1.0)
    empty = score_boxes({}, {}, [0])
    assert empty.precision == empty.recall == 0.0 and np.isnan(empty.width_ratio)
