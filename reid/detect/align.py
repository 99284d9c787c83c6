"""Face alignment: a similarity transform from five landmarks onto a fixed template.

Face encoders trained on aligned faces (ArcFace-style 112x112 chips) expect the eyes, nose
and mouth corners at fixed places; a detector's box alone leaves the face rotated and
off-centre.  :func:`align_face` finds the rotation, uniform scale and shift that best
carry the five landmarks onto :data:`FACE_TEMPLATE_112` (least squares, Umeyama 1991)
and warps the image with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from reid.detect.base import Detection, Point, crop
from reid.errors import DataError

# Where the five landmarks sit in a 112x112 aligned face chip (x, y pixels): the eye on the
# image's left, the other eye, the nose tip, the mouth corner on the image's left, the
# other one (the template of InsightFace's ArcFace models).
FACE_TEMPLATE_112: tuple[Point, ...] = (
    (38.2946, 51.6963),
    (73.5318, 51.5014),
    (56.0252, 71.7366),
    (41.5493, 92.3655),
    (70.7299, 92.2041),
)


def template_for(size: tuple[int, int]) -> np.ndarray:
    """The (5, 2) float32 template scaled to a chip of ``size`` (height, width)."""
    height, width = size
    return (np.asarray(FACE_TEMPLATE_112, dtype=np.float32) * np.float32([width / 112, height / 112])).astype(np.float32)


def similarity_transform(landmarks: Sequence[Point], size: tuple[int, int]) -> np.ndarray:
    """The 2x3 similarity (rotation, uniform scale, shift) carrying ``landmarks`` onto the
    template of a ``size`` chip, in the least-squares sense.  Raises DataError for
    landmarks that are not five distinct points."""
    points = np.asarray(landmarks, dtype=np.float32).reshape(-1, 2)
    if points.shape != (5, 2) or not np.isfinite(points).all() or np.ptp(points, axis=0).max() < 1:
        raise DataError(f"face alignment needs five distinct landmarks, got {points.tolist()}")
    target = template_for(size).astype(np.float64)
    source = points.astype(np.float64)
    # Umeyama's closed form: the rotation from the SVD of the cross-covariance, with the
    # reflection excluded, then the scale and shift that follow from it.
    source_mean, target_mean = source.mean(axis=0), target.mean(axis=0)
    centred_source, centred_target = source - source_mean, target - target_mean
    u, singular, vt = np.linalg.svd(centred_target.T @ centred_source / len(points))
    flip = np.diag([1.0, float(np.sign(np.linalg.det(u) * np.linalg.det(vt)) or 1.0)])
    rotation = u @ flip @ vt
    scale = float(np.trace(np.diag(singular) @ flip)) / float((centred_source**2).sum() / len(points))
    shift = target_mean - scale * rotation @ source_mean
    matrix = np.hstack([scale * rotation, shift[:, None]])
    return matrix


def align_face(image: np.ndarray, landmarks: Sequence[Point], size: tuple[int, int] = (112, 112)) -> np.ndarray:
    """The aligned face chip (``size`` = (height, width), same dtype and channels as
    ``image``): the image warped so its five ``landmarks`` land on the template."""
    matrix = similarity_transform(landmarks, size)
    return cv2.warpAffine(image, matrix, (size[1], size[0]), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def crop_detection(
    image: np.ndarray, detection: Detection, margin: float, align_to: tuple[int, int] | None = None
) -> np.ndarray:
    """What an encoder gets of a detection: the face chip aligned to ``align_to`` (height,
    width) when the encoder asks for one and the detector found landmarks, else the box
    grown by ``margin`` and cut out."""
    if align_to is not None and len(detection.landmarks) == 5:
        return align_face(image, detection.landmarks, align_to)
    return crop(image, detection.box, margin)
