"""What a detector returns, and the box arithmetic shared by every detector."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

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
    """Anything that finds people or faces in an RGB uint8 image.

    ``detect`` returns every box above the detector's floor, best score first, each with
    its score.  ``confident_score`` is the score from which a box is a sure find; below it
    (down to the floor) a box is weak: a tracker may continue a track with it (ByteTrack's
    second association, Zhang et al. 2022) but never start one, and a photo never keeps it
    (:func:`confident_detections`).  None: the detector's scores are not probabilities
    (HOG's SVM margins, Haar's cascade weights) and every box it returns is confident.
    """

    kind: str
    confident_score: float | None

    def detect(self, image: np.ndarray) -> list[Detection]:
        """Return the detections in ``image``, best score first."""
        ...


def confident_detections(detector: Detector, image: np.ndarray) -> list[Detection]:
    """The detections of a photo (an RGB uint8 (H, W, 3) image): those of
    ``detector.detect`` scoring at least its ``confident_score`` (all of them for None),
    best score first.  Weak boxes only ever continue tracks of a video; a photo has none."""
    found = detector.detect(image)
    floor = detector.confident_score
    return found if floor is None else [d for d in found if d.score >= floor]


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


def check_score_tiers(detector: str, min_score: float, weak_score: float | None) -> None:
    """A detector's two score tiers, each in [0, 1): ``min_score`` from which a box is
    confident, ``weak_score`` (None: no weak tier) from which weaker boxes are returned for
    tracks to continue; ConfigError naming ``detector`` and the setting otherwise."""
    for name, value in (("min_score", min_score), ("weak_score", weak_score)):
        if value is not None and not 0 <= value < 1:
            raise ConfigError(f"{detector} {name} must be in [0, 1), got {value}")


def score_floor(min_score: float, weak_score: float | None) -> float:
    """The lowest score a detector returns a box with: ``weak_score``, or ``min_score``
    when there is no weak tier (or the weak one is above it)."""
    return min_score if weak_score is None else min(weak_score, min_score)
