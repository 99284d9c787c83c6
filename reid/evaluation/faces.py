"""Cropping photos to the face before verification (``--detect face``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from reid.detect import DEFAULT_MARGIN, Detector, build_detector, crop
from reid.errors import ConfigError, DataError
from reid.evaluation.embed import PrepareFn

DETECT_CHOICES = ("none", "face")


class FaceCropper:
    """Replaces a photo by the crop of its largest face; no face is an error, not a guess."""

    def __init__(self, detector: Detector, margin: float = DEFAULT_MARGIN["face"]) -> None:
        self.detector = detector
        self.margin = margin

    def __call__(self, image: np.ndarray, path: Path) -> np.ndarray:
        found = self.detector.detect(image)
        if not found:
            raise DataError(f"{path}: no face found (use --detect none for images that are already face crops)")
        # The largest face is the subject of a verification photo; bystanders are smaller.
        best = max(found, key=lambda d: (d.box[2] * d.box[3], d.score))
        return crop(image, best.box, self.margin)


def image_preparer(detect: str) -> PrepareFn | None:
    """What to do to each photo before embedding it: nothing, or crop it to the face."""
    if detect == "none":
        return None
    if detect == "face":
        return FaceCropper(build_detector("face"))
    raise ConfigError(f"--detect {detect!r}: choose one of {', '.join(DETECT_CHOICES)}")
