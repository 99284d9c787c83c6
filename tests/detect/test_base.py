"""What every detector says: its boxes down to its floor, its confident score, and the
one helper by which photos keep the confident boxes alone."""

from __future__ import annotations

import numpy as np
import pytest

from reid.detect import DETECTORS, Detection, build_detector, confident_detections

IMAGE = np.zeros((120, 160, 3), np.uint8)


class Scripted:
    kind = "person"

    def __init__(self, confident_score: float | None, scores: list[float]) -> None:
        self.confident_score = confident_score
        self.scores = scores

    def detect(self, image: np.ndarray) -> list[Detection]:
        return [Detection((10 * n, 0, 10, 20), score) for n, score in enumerate(self.scores)]


def test_a_photo_keeps_the_boxes_at_or_above_the_confident_score_in_order() -> None:
    detector = Scripted(0.4, [0.9, 0.4, 0.39, 0.1])
    assert [d.score for d in confident_detections(detector, IMAGE)] == [0.9, 0.4]
    assert len(detector.detect(IMAGE)) == 4, "detect itself gives the weak boxes too"


def test_a_detector_without_probabilities_has_every_box_confident() -> None:
    detector = Scripted(None, [2.5, -0.3])
    assert confident_detections(detector, IMAGE) == detector.detect(IMAGE)


@pytest.mark.parametrize("name", ["hog", "haar"])
def test_opencv_detectors_have_no_confident_score(name: str) -> None:
    assert build_detector(name).confident_score is None


def test_every_detector_name_builds_from_its_table_entry() -> None:
    """Adding a detector is one entry of the table: its kind, options, needs and builder."""
    for entry in DETECTORS.values():
        assert entry.kind in ("person", "face") and entry.needs and callable(entry.build)
    assert build_detector("hog", "person").kind == "person"
