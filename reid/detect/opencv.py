"""Detectors that ship inside OpenCV 4.x: the HOG people detector and Haar face cascades.

opencv-python(-headless) 5.x wheels ship neither ``HOGDescriptor`` nor
``CascadeClassifier`` and leave ``cv2/data`` empty, so both detectors check for their parts
when built and name the installed OpenCV version when something is missing.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from reid.detect.base import Detection, clipped_detection, non_max_suppression
# The settings live where the command line reads them without this detector; named here too.
from reid.detect.configs import FaceDetectorConfig as FaceDetectorConfig, PersonDetectorConfig as PersonDetectorConfig
from reid.errors import ModelError

PIN_HINT = "install opencv-python-headless<5 (4.x wheels bundle it)"


def _require(name: str) -> object:
    part = getattr(cv2, name, None)
    if part is None:
        raise ModelError(f"OpenCV {cv2.__version__} has no {name}; {PIN_HINT}")
    return part


class PersonDetector:
    """OpenCV's HOG + linear SVM people detector (Dalal & Triggs 2005) with NMS."""

    kind = "person"
    # SVM margins, not probabilities: every box above min_score is confident.
    confident_score: float | None = None
    # The default people detector's window; an image must hold at least one.
    window = (64, 128)

    def __init__(self, config: PersonDetectorConfig | None = None) -> None:
        self.config = config or PersonDetectorConfig()
        hog_class = _require("HOGDescriptor")
        self._hog = hog_class()  # type: ignore[operator]
        self._hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())

    def detect(self, image: np.ndarray) -> list[Detection]:
        cfg = self.config
        scale = cfg.scale
        height, width = image.shape[:2]
        # A person filling a small image is smaller than the detector window; grow it.
        scale = max(scale, self.window[0] / max(width, 1), self.window[1] / max(height, 1))
        work = (
            image
            if scale == 1.0
            else cv2.resize(
                image,
                (max(1, round(width * scale)), max(1, round(height * scale))),
                interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR,
            )
        )
        rects, weights = self._hog.detectMultiScale(
            work,
            winStride=(cfg.win_stride, cfg.win_stride),
            padding=(cfg.padding, cfg.padding),
            scale=cfg.pyramid_scale,
        )
        if len(rects) == 0:
            return []
        rects = np.asarray(rects, dtype=np.float64).reshape(-1, 4) / scale
        scores = np.asarray(weights, dtype=np.float64).ravel()
        good = scores >= cfg.min_score
        rects, scores = rects[good], scores[good]
        keep = non_max_suppression(rects, scores, cfg.nms_iou)
        return [clipped_detection(rects[i], float(scores[i]), image.shape, self.kind) for i in keep]


def cascade_path(name: str) -> Path:
    """Resolve a cascade name to a file, from a path or from OpenCV's bundled data."""
    path = Path(name)
    if path.is_file():
        return path
    data = getattr(cv2, "data", None)
    folder = getattr(data, "haarcascades", None)
    if folder is None or path.is_absolute() or path.parent != Path("."):
        raise ModelError(f"{name}: Haar cascade file not found")
    bundled = Path(folder) / name
    if not bundled.is_file():
        raise ModelError(
            f"{bundled}: Haar cascade not bundled with OpenCV {cv2.__version__}; {PIN_HINT}, or give the cascade's path"
        )
    return bundled


class FaceDetector:
    """OpenCV's Haar cascade frontal face detector (Viola & Jones 2001)."""

    kind = "face"
    # Cascade weights, not probabilities: every face found is confident.
    confident_score: float | None = None

    def __init__(self, config: FaceDetectorConfig | None = None) -> None:
        self.config = config or FaceDetectorConfig()
        cascade_class = _require("CascadeClassifier")
        path = cascade_path(self.config.cascade)
        try:
            self._cascade = cascade_class(str(path))  # type: ignore[operator]
        except (cv2.error, SystemError) as exc:
            # OpenCV reports a malformed XML file as cv2.error, wrapped in SystemError.
            raise ModelError(f"{path}: not a loadable Haar cascade (OpenCV {cv2.__version__})") from exc
        if self._cascade.empty():
            raise ModelError(f"{path}: not a loadable Haar cascade (OpenCV {cv2.__version__})")
        self.cascade_file = path

    def detect(self, image: np.ndarray) -> list[Detection]:
        cfg = self.config
        grey = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        scale = 2.0 if min(grey.shape[:2]) < cfg.upscale_below else 1.0
        if scale != 1.0:
            grey = cv2.resize(grey, None, fx=scale, fy=scale, interpolation=cv2.INTER_LINEAR)
        grey = cv2.equalizeHist(grey)
        rects, _, weights = self._cascade.detectMultiScale3(
            grey,
            scaleFactor=cfg.scale_factor,
            minNeighbors=cfg.min_neighbors,
            minSize=(cfg.min_size, cfg.min_size),
            outputRejectLevels=True,
        )
        if len(rects) == 0:
            return []
        rects = np.asarray(rects, dtype=np.float64).reshape(-1, 4) / scale
        scores = np.asarray(weights, dtype=np.float64).ravel()
        order = np.argsort(-scores, kind="stable")
        return [clipped_detection(rects[i], float(scores[i]), image.shape, self.kind) for i in order]

