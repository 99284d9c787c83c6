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
# The template's centre, rounded as InsightFace and OpenCV publish it with the template.
TEMPLATE_CENTRE_112: Point = (56.0262, 71.9008)


def template_for(size: tuple[int, int]) -> np.ndarray:
    """The (5, 2) float32 template scaled to a chip of ``size`` (height, width)."""
    height, width = size
    return (np.asarray(FACE_TEMPLATE_112, dtype=np.float32) * np.float32([width / 112, height / 112])).astype(np.float32)


def similarity_transform(landmarks: Sequence[Point], size: tuple[int, int]) -> np.ndarray:
    """The 2x3 float64 similarity (rotation, uniform scale, shift) carrying ``landmarks``
    ((x, y) pixels, template order) onto the template of a ``size`` (height, width) chip,
    in the least-squares sense (Umeyama 1991).  Raises DataError for landmarks that are
    not five distinct finite points.

    The landmarks, their centred values and each product are float32 and the sums
    float64, and the 112x112 template's centre is :data:`TEMPLATE_CENTRE_112`, as in
    OpenCV's ``FaceRecognizerSF.alignCrop``, the reference alignment of SFace: the warp
    looks pixels up on a 1/32 pixel grid, so a matrix off by 1e-4 already moves edges by
    whole grey levels.
    """
    points = np.asarray(landmarks, dtype=np.float64).reshape(-1, 2)
    if points.shape != (5, 2) or not np.isfinite(points).all() or np.ptp(points, axis=0).max() < 1:
        raise DataError(f"face alignment needs five distinct landmarks, got {points.tolist()}")
    height, width = size
    factor = np.float32([width / 112, height / 112])
    target = template_for(size)
    target_mean = np.asarray(TEMPLATE_CENTRE_112, np.float32) * factor
    source = points.astype(np.float32)
    source_mean = source.sum(axis=0, dtype=np.float32) / np.float32(len(source))
    centred_source, centred_target = source - source_mean, target - target_mean
    # Umeyama's closed form: the rotation from the SVD of the cross-covariance, with the
    # reflection excluded, then the scale and shift that follow from it.
    products = centred_target[:, :, None] * centred_source[:, None, :]  # float32, (5, 2, 2)
    covariance = products.astype(np.float64).sum(axis=0) / len(points)
    u, singular, vt = np.linalg.svd(covariance)
    signs = np.array([1.0, -1.0 if np.linalg.det(covariance) < 0 else 1.0])
    rotation = u @ np.diag(signs) @ vt
    variance = (centred_source * centred_source).astype(np.float64).sum() / len(points)
    scale = float(singular @ signs) / variance
    shift = target_mean.astype(np.float64) - scale * rotation @ source_mean.astype(np.float64)
    return np.hstack([scale * rotation, shift[:, None]])


def align_face(image: np.ndarray, landmarks: Sequence[Point], size: tuple[int, int] = (112, 112)) -> np.ndarray:
    """The aligned face chip (``size`` = (height, width), same dtype and channels as
    ``image``): the image warped so its five ``landmarks`` land on the template, bilinear,
    black beyond the photo's edge (the border ArcFace-style encoders were trained with)."""
    matrix = similarity_transform(landmarks, size)
    return cv2.warpAffine(
        image, matrix, (size[1], size[0]), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0
    )


def crop_detection(
    image: np.ndarray, detection: Detection, margin: float, align_to: tuple[int, int] | None = None
) -> np.ndarray:
    """What an encoder gets of a detection: the face chip aligned to ``align_to`` (height,
    width) when the encoder asks for one and the detector found landmarks, else the box
    grown by ``margin`` and cut out."""
    if align_to is not None and len(detection.landmarks) == 5:
        return align_face(image, detection.landmarks, align_to)
    return crop(image, detection.box, margin)
