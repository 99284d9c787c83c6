"""The shared frame loop: decode → detect → crop → drop empty crops, scaled detection,
the subject of a photo, and the enrolment hook that chooses it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import pytest
from pipeline_helpers import write_rgb

from reid.detect import Detection, build_detector
from reid.errors import ConfigError
from reid.gallery import Gallery
from reid.models import Encoder
from reid.pipeline import (
    Frame,
    ScaledDetector,
    cut_frame,
    enrol,
    frame_crops,
    largest_detection,
    open_source,
    plan_enrolment,
    stage_timer,
    SubjectRule,
)
from reid.pipeline.synthetic import street_frames, write_street_video


class GivenBoxes:
    """A detector that reports fixed boxes: the way to put a box outside the frame."""

    kind = "person"
    confident_score = None

    def __init__(self, boxes: list[tuple[int, int, int, int]]) -> None:
        self.boxes = boxes

    def detect(self, image: np.ndarray) -> list[Detection]:
        return [Detection(box, 1.0 - n / 10) for n, box in enumerate(self.boxes)]


def test_frame_loop_yields_every_kept_frame_in_order_with_its_crops(tmp_path: Path) -> None:
    video = tmp_path / "street.avi"
    write_street_video(video, count=6, fps=6)
    timing = stage_timer()
    items = list(frame_crops(open_source(video, every=2), build_detector(None, "person"), timing=timing))
    assert [item.frame.index for item in items] == [0, 2, 4]
    assert sum(len(item.crops) for item in items) >= 3
    for item in items:
        assert len(item.crops) == len(item.boxes) == len(item.scores)
        assert all(crop.ndim == 3 and crop.dtype == np.uint8 and crop.size for crop in item.crops)
        assert all(score is not None for score in item.scores)
    assert set(timing) == {"decode", "detect", "embed", "track", "search"}


def test_empty_crops_are_dropped_and_no_detector_takes_the_frame_whole() -> None:
    image = np.zeros((100, 80, 3), np.uint8)
    frame = Frame("x", 0, None, image)
    cut = cut_frame(frame, GivenBoxes([(10, 10, 20, 30), (500, 500, 20, 20), (0, 0, 0, 0)]), margin=0.0)
    assert cut.boxes == [(10, 10, 20, 30)] and cut.crops[0].shape == (30, 20, 3)
    whole = cut_frame(frame, None)
    assert whole.boxes == [(0, 0, 80, 100)] and whole.scores == [None]
    assert cut_frame(frame, GivenBoxes([]), whole_if_none=True).scores == [None]
    assert cut_frame(frame, GivenBoxes([])).crops == []


def test_scaled_detection_returns_boxes_in_the_full_frame() -> None:
    frame, truth = next(street_frames(1, seed=3))
    big = cv2.resize(frame, None, fx=2, fy=2, interpolation=cv2.INTER_LINEAR)
    hog = build_detector(None, "person")
    found = ScaledDetector(hog, 0.5).detect(big)
    assert found
    height, width = big.shape[:2]
    for d in found:
        x, y, w, h = d.box
        assert 0 <= x and 0 <= y and x + w <= width and y + h <= height
    # Each box found on the half-size frame lies over a walker of the full-size one.
    centres = [(2 * (x + w / 2), 2 * (y + h / 2)) for x, y, w, h in truth.values()]
    for d in found:
        x, y, w, h = d.box
        assert any(x <= cx <= x + w and y <= cy <= y + h for cx, cy in centres)
    with pytest.raises(ConfigError, match="scale"):
        ScaledDetector(hog, 1.5)


def test_largest_detection_and_the_subject_of_a_photo() -> None:
    small, large = Detection((0, 0, 10, 10), 0.9), Detection((20, 20, 30, 40), 0.1)
    assert largest_detection([small, large]) is large and largest_detection([]) is None
    image = np.zeros((100, 100, 3), np.uint8)
    subjects = SubjectRule(GivenBoxes([(0, 0, 10, 10), (20, 20, 30, 40)]), margin=0.0).apply(image, "x.png")
    assert subjects.boxes == [(20, 20, 30, 40)] and subjects.crops[0].shape == (40, 30, 3) and subjects.found == 2
    assert SubjectRule(GivenBoxes([])).apply(image, "x.png").skipped


def smallest(found: Sequence[Detection]) -> Detection | None:
    return min(found, key=lambda d: d.area, default=None)


def test_enrolment_hook_chooses_the_crop(tmp_path: Path, encoder: Encoder) -> None:
    image = np.full((200, 200, 3), 90, np.uint8)
    write_rgb(tmp_path / "people" / "ann" / "1.png", image)
    detector = GivenBoxes([(10, 10, 40, 80), (100, 100, 20, 30)])
    boxes = {}
    for name, choose in (("largest", largest_detection), ("smallest", smallest)):
        with Gallery.open_or_create(tmp_path / name, encoder.card) as gallery:
            report = enrol(gallery, encoder, plan_enrolment([tmp_path / "people"]), detector=detector, choose=choose)
            assert report.added == 1
            boxes[name] = gallery.items("ann")[0].box
    assert boxes == {"largest": (10, 10, 40, 80), "smallest": (100, 100, 20, 30)}


class OneFace:
    """A face in the middle of whatever image it is given, with its five landmarks."""

    kind = "face"
    confident_score = None

    def detect(self, image: np.ndarray) -> list[Detection]:
        height, width = image.shape[:2]
        points = tuple((width * fx, height * fy) for fx, fy in ((0.4, 0.4), (0.6, 0.4), (0.5, 0.5), (0.42, 0.6), (0.58, 0.6)))
        return [Detection((width // 4, height // 4, width // 2, height // 2), 0.9, "face", points)]


def test_scaled_detection_keeps_the_landmarks_in_frame_pixels() -> None:
    image = np.zeros((400, 600, 3), np.uint8)
    (direct,) = OneFace().detect(image)
    (scaled,) = ScaledDetector(OneFace(), 0.5).detect(image)
    assert scaled.box == direct.box and scaled.kind == "face"
    assert np.allclose(scaled.landmarks, direct.landmarks)


class Tiered:
    """A detector whose scores are probabilities: one confident box and one weak one."""

    kind = "person"
    confident_score = 0.5

    def detect(self, image: np.ndarray) -> list[Detection]:
        return [Detection((5, 5, 20, 40), 0.9), Detection((40, 5, 20, 40), 0.2)]


def test_a_photo_is_cut_at_its_confident_boxes_and_a_tracked_frame_at_all() -> None:
    frame = Frame("p.png", 0, None, np.zeros((60, 80, 3), np.uint8))
    assert cut_frame(frame, Tiered()).scores == [0.9]
    assert cut_frame(frame, Tiered(), weak=True).scores == [0.9, 0.2]
    subjects = SubjectRule(Tiered(), pick="all").apply(frame.image, "p.png")
    assert subjects.boxes == [(5, 5, 20, 40)] and subjects.found == 1, "enrolment sees no weak box"
