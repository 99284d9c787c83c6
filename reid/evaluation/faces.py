"""Cropping photos to the face before verification (``--detect face``), by the one crop
rule of :mod:`reid.pipeline.subject`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reid.detect import DEFAULT_MARGIN, Detector, build_detector
from reid.errors import ConfigError
from reid.evaluation.embed import PrepareFn
from reid.models.encoder import NO_FACE_CHOICES, Encoder
from reid.pipeline.subject import SubjectRule

DETECT_CHOICES = ("none", "face")


@dataclass(frozen=True)
class FaceCropper:
    """A photo replaced by its subject as ``rule`` says: the crop of its largest face; no
    face is a DataError naming the photo (the photo is skipped or stops the job), or the
    photo taken whole when the rule says ``whole``."""

    rule: SubjectRule

    @classmethod
    def of(
        cls,
        detector: Detector,
        margin: float = DEFAULT_MARGIN["face"],
        whole_fallback: bool = False,
        align_to: tuple[int, int] | None = None,
    ) -> FaceCropper:
        """The cropper of the largest face ``detector`` finds, grown by ``margin`` (a share of
        the box) or aligned to ``align_to`` (height, width); ``whole_fallback`` takes a photo
        without a face whole instead of raising DataError."""
        return cls(SubjectRule(detector, margin, "largest", "whole" if whole_fallback else "error", align_to))

    def __call__(self, image: np.ndarray, path: Path) -> np.ndarray:
        return self.rule.apply(image, path).crops[0]


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
    return FaceCropper.of(build_detector(detector, "face"), whole_fallback=no_face == "whole")


def fitted_to(prepare: PrepareFn | None, encoder: Encoder) -> PrepareFn | None:
    """``prepare`` with its face crops aligned when ``encoder`` asks for aligned faces."""
    if isinstance(prepare, FaceCropper):
        return FaceCropper(prepare.rule.fitted_to(encoder))
    return prepare
