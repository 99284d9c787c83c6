"""What a detector returns, and the box arithmetic shared by every detector."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from reid.errors import ConfigError

Box = tuple[int, int, int, int]
"""A box as (x, y, width, height) in pixels of the image it was found in."""


Point = tuple[float, float]
"""A point as (x, y) in pixels of the image it was found in."""


@dataclass(frozen=True)
class Detection:
    """One person or face found in an image.

    ``landmarks``: for faces from a detector that finds them, five points (right eye,
    left eye, nose tip, right and left mouth corner, as seen by the subject); else empty.
    """

    box: Box
    score: float
    kind: str = "person"
    landmarks: tuple[Point, ...] = ()

    @property
    def area(self) -> int:
        return self.box[2] * self.box[3]


class Detector(Protocol):
    """Anything that finds people or faces in an RGB uint8 image."""

    kind: str

    def detect(self, image: np.ndarray) -> list[Detection]:
        """Return the detections in ``image``, best score first."""
        ...


@runtime_checkable
class TieredDetector(Detector, Protocol):
    """A detector whose scores are probabilities, so that boxes below its confident score
    can still be told apart from noise: a tracker's second association (ByteTrack, Zhang
    et al. 2022) continues tracks with them through blur and partial occlusion.

    ``detect`` gives the confident detections (score >= ``confident_score``);
    ``detect_with_weak`` gives those and the weak ones below.
    """

    confident_score: float

    def detect_with_weak(self, image: np.ndarray) -> list[Detection]:
        """Confident and weak detections in ``image``, best score first."""
        ...


class WeakIncluded:
    """``detector`` whose ``detect`` gives its weak detections too (see
    :func:`for_tracking`); ``confident_score`` tells them apart."""

    def __init__(self, detector: TieredDetector) -> None:
        self.detector, self.kind, self.confident_score = detector, detector.kind, detector.confident_score

    def detect(self, image: np.ndarray) -> list[Detection]:
        return self.detector.detect_with_weak(image)


def check_scores(detector: str, min_score: float, weak_score: float | None) -> None:
    """Raise ConfigError unless both scores are probabilities in [0, 1)."""
    for name, value in (("min_score", min_score), ("weak_score", weak_score)):
        if value is not None and not 0 <= value < 1:
            raise ConfigError(f"{detector} {name} must be in [0, 1), got {value}")


def weak_floor(min_score: float, weak_score: float | None) -> float:
    """The lowest score :meth:`TieredDetector.detect_with_weak` keeps: ``weak_score``, or
    ``min_score`` when there is no weak tier (None, or a weak score above the confident one)."""
    return min_score if weak_score is None else min(weak_score, min_score)


def for_tracking(detector: Detector) -> tuple[Detector, float | None]:
    """The detector to feed a tracker and the score from which its detections may start
    tracks (:attr:`reid.track.TrackerConfig.high_score`).

    A :class:`TieredDetector` (ssdlite, yolo) comes back giving its weak detections too,
    with its confident score; any other detector comes back as it is, with None (every
    detection is confident).
    """
    if isinstance(detector, TieredDetector):
        return WeakIncluded(detector), detector.confident_score
    return detector, None


def expand_box(box: Box, margin: float, shape: tuple[int, ...]) -> Box:
    """Grow ``box`` by ``margin`` of its size on every side, then clip it to an image of ``shape``.

    A margin keeps the hair, shoulders or feet that detectors tend to cut off, which the
    encoder saw in its training crops.
    """
    x, y, w, h = box
    dx, dy = round(w * margin), round(h * margin)
    height, width = shape[0], shape[1]
    x0, y0 = max(0, x - dx), max(0, y - dy)
    x1, y1 = min(width, x + w + dx), min(height, y + h + dy)
    return (int(x0), int(y0), int(max(0, x1 - x0)), int(max(0, y1 - y0)))


def crop(image: np.ndarray, box: Box, margin: float = 0.0) -> np.ndarray:
    """The part of ``image`` inside ``box`` (grown by ``margin``, clipped), as a new array."""
    x, y, w, h = expand_box(box, margin, image.shape)
    return np.ascontiguousarray(image[y : y + h, x : x + w])


def non_max_suppression(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> list[int]:
    """Indices of the boxes kept by greedy non-maximum suppression, best score first.

    ``boxes`` is an (N, 4) array of (x, y, w, h).  A box is dropped when it overlaps an
    already kept, better-scoring box by more than ``iou_threshold`` (intersection over union),
    or when it lies mostly inside one: HOG often fires on a person's legs or torso as well.
    """
    if len(boxes) == 0:
        return []
    boxes = np.asarray(boxes, dtype=np.float64)
    x0, y0 = boxes[:, 0], boxes[:, 1]
    x1, y1 = x0 + boxes[:, 2], y0 + boxes[:, 3]
    areas = np.maximum(boxes[:, 2], 0) * np.maximum(boxes[:, 3], 0)
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    keep: list[int] = []
    while order.size:
        best, rest = order[0], order[1:]
        keep.append(int(best))
        iw = np.clip(np.minimum(x1[best], x1[rest]) - np.maximum(x0[best], x0[rest]), 0, None)
        ih = np.clip(np.minimum(y1[best], y1[rest]) - np.maximum(y0[best], y0[rest]), 0, None)
        inter = iw * ih
        union = areas[best] + areas[rest] - inter
        iou = inter / np.maximum(union, 1e-9)
        inside = inter / np.maximum(np.minimum(areas[best], areas[rest]), 1e-9)
        order = rest[(iou <= iou_threshold) & (inside <= 0.8)]
    return keep


def largest_detection(detections: Sequence[Detection]) -> Detection | None:
    """The detection with the largest box (ties: the better score), None for none.

    A photo of one person (an enrolment photo, a face-set image) shows that person largest;
    bystanders and false alarms are smaller.
    """
    return max(detections, key=lambda d: (d.area, d.score), default=None)


def clipped_detection(
    rect: np.ndarray | tuple[float, float, float, float],
    score: float,
    shape: tuple[int, ...],
    kind: str,
    landmarks: tuple[Point, ...] = (),
) -> Detection:
    """A :class:`Detection` of the (x, y, w, h) ``rect`` rounded to pixels and clipped to an
    image of ``shape``: every detector's boxes lie inside the frame."""
    x, y, w, h = (int(round(float(v))) for v in rect)
    x0, y0 = max(0, x), max(0, y)
    x1, y1 = min(shape[1], x + w), min(shape[0], y + h)
    return Detection(box=(x0, y0, max(0, x1 - x0), max(0, y1 - y0)), score=score, kind=kind, landmarks=landmarks)
