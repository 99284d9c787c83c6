"""Cropping photos to the face before verification (``--detect face``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from reid.detect import DEFAULT_MARGIN, Detector, build_detector, crop_detection
from reid.detect.base import largest_detection
from reid.errors import ConfigError, DataError
from reid.evaluation.embed import PrepareFn
from reid.models.encoder import NO_FACE_CHOICES, Encoder

DETECT_CHOICES = ("none", "face")


class FaceCropper:
    """Replaces a photo by the crop of its largest face; no face is a DataError (the photo
    is skipped or stops the job), or with ``whole_fallback`` the photo is taken whole."""

    def __init__(
        self,
        detector: Detector,
        margin: float = DEFAULT_MARGIN["face"],
        whole_fallback: bool = False,
        align_to: tuple[int, int] | None = None,
    ) -> None:
        self.detector = detector
        self.margin = margin
        self.whole_fallback = whole_fallback
        self.align_to = align_to

    def __call__(self, image: np.ndarray, path: Path) -> np.ndarray:
        # The largest face is the subject of a verification photo; bystanders are smaller.
        best = largest_detection(self.detector.detect(image))
        if best is not None:
            return crop_detection(image, best, self.margin, self.align_to)
        if self.whole_fallback:
            return image
        raise DataError(f"{path}: no face found (use --detect none for images that are already face crops)")


def image_preparer(detect: str, no_face: str = "skip", detector: str | None = None) -> PrepareFn | None:
    """What to do to each photo before embedding it: nothing, or crop it to the face
    (``no_face`` "whole": a photo without a face is taken whole).  ``detector`` names the
    face detector (:func:`reid.detect.build_detector`; default haar) and implies
    ``detect`` "face".  :func:`fitted_to` aligns its crops for an encoder that asks."""
    if no_face not in NO_FACE_CHOICES:
        raise ConfigError(f"--no-face {no_face!r}: choose one of {', '.join(NO_FACE_CHOICES)}")
    if detect not in DETECT_CHOICES:
        raise ConfigError(f"--detect {detect!r}: choose one of {', '.join(DETECT_CHOICES)}")
    if detect == "none" and detector is None:
        return None
    return FaceCropper(build_detector(detector, "face"), whole_fallback=no_face == "whole")


def fitted_to(prepare: PrepareFn | None, encoder: Encoder) -> PrepareFn | None:
    """``prepare`` with its face crops aligned when ``encoder`` asks for aligned faces."""
    if isinstance(prepare, FaceCropper) and encoder.aligned_face_size is not None:
        return FaceCropper(prepare.detector, prepare.margin, prepare.whole_fallback, encoder.aligned_face_size)
    return prepare
