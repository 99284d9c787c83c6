"""Person and face detectors for frames and photos, and the crop helpers that follow them.

>>> det = build_detector("face")
>>> for d in det.detect(image_rgb):
...     face = crop(image_rgb, d.box, margin=0.1)
"""

from __future__ import annotations

import numpy as np

from reid.detect.base import Box, Detection, Detector, crop, expand_box, non_max_suppression
from reid.detect.opencv import (
    FaceDetector,
    FaceDetectorConfig,
    PersonDetector,
    PersonDetectorConfig,
    cascade_path,
)
from reid.errors import ConfigError

DETECTOR_KINDS = ("person", "face")

# Crops a little larger than the box: detectors cut off hair, shoulders and feet.
DEFAULT_MARGIN = {"person": 0.05, "face": 0.15}


def build_detector(kind: str, config: PersonDetectorConfig | FaceDetectorConfig | None = None) -> Detector:
    """A detector for ``kind`` ("person" or "face") with default or given options."""
    if kind == "person":
        if config is not None and not isinstance(config, PersonDetectorConfig):
            raise ConfigError("person detector takes a PersonDetectorConfig")
        return PersonDetector(config)
    if kind == "face":
        if config is not None and not isinstance(config, FaceDetectorConfig):
            raise ConfigError("face detector takes a FaceDetectorConfig")
        return FaceDetector(config)
    raise ConfigError(f"unknown detector {kind!r}; choose one of {', '.join(DETECTOR_KINDS)}")


def crop_detections(image: np.ndarray, detections: list[Detection], margin: float | None = None) -> list[np.ndarray]:
    """One crop per detection, each grown by ``margin`` (default: per detector kind)."""
    return [crop(image, d.box, DEFAULT_MARGIN.get(d.kind, 0.0) if margin is None else margin) for d in detections]


__all__ = [
    "DEFAULT_MARGIN",
    "DETECTOR_KINDS",
    "Box",
    "Detection",
    "Detector",
    "FaceDetector",
    "FaceDetectorConfig",
    "PersonDetector",
    "PersonDetectorConfig",
    "build_detector",
    "cascade_path",
    "crop",
    "crop_detections",
    "expand_box",
    "non_max_suppression",
]
