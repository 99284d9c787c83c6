"""The one rule for cropping a photo to its subject, and the record of what the photo held.

A photo given to enrol, to verify, to calibrate or to evaluate a face folder shows one
subject; a detector may find several people or faces in it, or none.  :class:`SubjectRule`
decides, for each photo: which detector, which detection (the ``largest``, since bystanders
and false alarms are smaller, or ``all``), the margin around it, the alignment to an
encoder's face template when its card asks for aligned faces, and what happens when nothing
is found: ``whole`` (the photo is taken whole), ``skip`` (it is left out, counted and
named) or ``error`` (one line naming it).  :class:`Subjects` records how many were found and
which was used, so that a group photo says that others were seen and a photo without a face
is reported as "no face found", never as unreadable.

:func:`photo_rule` is the one reading of the photo commands' ``--detect``, ``--detector`` and
``--no-face`` (enrol, query of photos, verify, calibrate, eval, face check-in).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from reid.detect import (
    DEFAULT_MARGIN,
    Detector,
    build_detector,
    confident_detections,
    crop_detection,
)
from reid.detect.base import Box, Detection, largest_detection
from reid.detect.names import DETECTOR_DEFAULT_TEXT as DETECTOR_DEFAULT_TEXT, DETECTOR_NAMES_HELP as DETECTOR_NAMES_HELP
from reid.errors import ConfigError, ConfigValueError, DataError
from reid.models.encoder import Encoder
# The --detect choices and the help of --detect and --no-face live with their config fields;
# the help is named here too, where the rule that reads them is.
from reid.photos import NO_FACE_CHOICES, PhotoConfig
from reid.photos import DETECT_HELP as DETECT_HELP, NO_FACE_HELP as NO_FACE_HELP
from reid.pipeline.configs import check_detect as check_detect
from reid.pipeline.frames import ChooseCrop

# What happens to a photo in which the detector finds nobody: the --no-face choices, which
# also say what happens to a photo a face encoder refuses.
NONE_FOUND = NO_FACE_CHOICES
PICKS = ("largest", "all")
# The face detector that gives the five landmarks aligned chips are cut by.
ALIGNING_FACE_DETECTOR = "yunet"


@dataclass
class Subjects:
    """What one photo held and what is embedded of it.

    ``crops`` (RGB uint8) and ``boxes`` (x, y, w, h in the photo) are what is embedded;
    ``found`` is how many detections there were; ``used`` the positions (in the detector's
    order, best score first) of those cropped; ``whole`` says the photo was taken whole.
    ``kind`` is what was looked for ("face" or "person"); ``scores`` the detector's score
    of each crop (None for a photo taken whole).
    """

    crops: list[np.ndarray] = field(repr=False)
    boxes: list[Box]
    found: int
    used: list[int]
    kind: str
    whole: bool = False
    scores: list[float | None] = field(default_factory=list)

    @property
    def skipped(self) -> bool:
        """True when nothing of the photo is embedded (nothing found, ``skip``)."""
        return not self.crops

    def note(self) -> str | None:
        """One line for a photo that held more or less than one subject, else None."""
        if self.found == 0:
            return f"no {self.kind} found" + ("; taken whole" if self.whole else "")
        if self.found > 1 and len(self.used) == 1:
            return f"{self.found} {self.kind}s found; used the one at box {list(self.boxes[0])}"
        return None


@dataclass(frozen=True)
class SubjectRule:
    """How a photo is cropped to its subject (see the module docstring).

    ``detector`` None takes every photo whole.  ``pick`` is "largest", "all" or a function
    choosing one detection.  ``margin`` grows each box by that share of
    its size (default: the detector kind's).  ``align_to`` (height, width) gives aligned
    face chips where the detector finds landmarks (:meth:`fitted_to` sets it from an
    encoder's card).  Raises ConfigError for an unknown ``pick`` or ``none_found``.
    """

    detector: Detector | None = None
    margin: float | None = None
    pick: str | ChooseCrop = "largest"
    none_found: str = "skip"
    align_to: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.pick, str) and self.pick not in PICKS:
            raise ConfigError(f"pick {self.pick!r}: choose one of {', '.join(PICKS)}")
        if self.none_found not in NONE_FOUND:
            raise ConfigValueError("no_face", f"{self.none_found!r}: choose one of {', '.join(NONE_FOUND)}", sep=" ")

    @property
    def kind(self) -> str:
        """What is looked for: the detector's kind ("face", "person"), or "subject"."""
        return self.detector.kind if self.detector is not None else "subject"

    @property
    def box_margin(self) -> float:
        """The margin in use: ``margin``, else the default of the detector's kind."""
        if self.margin is not None:
            return self.margin
        return DEFAULT_MARGIN.get(self.kind, 0.0)

    def fitted_to(self, encoder: Encoder) -> SubjectRule:
        """This rule with its face crops aligned when ``encoder`` asks for aligned faces."""
        return replace(self, align_to=encoder.aligned_face_size)

    def apply(self, image: np.ndarray, source: str | Path) -> Subjects:
        """The subjects of an RGB uint8 photo named ``source``.

        Raises DataError naming ``source`` when nothing is found and ``none_found`` is "error".
        """
        whole = (0, 0, int(image.shape[1]), int(image.shape[0]))
        if self.detector is None:
            return Subjects([image], [whole], 1, [0], self.kind, whole=True, scores=[None])
        found = confident_detections(self.detector, image)
        chosen: list[tuple[int, Detection]]
        if self.pick == "all":
            chosen = list(enumerate(found))
        else:
            choose = largest_detection if self.pick == "largest" else self.pick
            best = choose(found)
            chosen = [(next(i for i, d in enumerate(found) if d is best), best)] if best is not None else []
        crops, boxes, used, scores = [], [], [], []
        for position, detection in chosen:
            piece = crop_detection(image, detection, self.box_margin, self.align_to)
            if piece.size:
                crops.append(piece)
                boxes.append(detection.box)
                used.append(position)
                scores.append(float(detection.score))
        if crops:
            return Subjects(crops, boxes, len(found), used, self.kind, scores=scores)
        if self.none_found == "error":
            raise DataError(f"{source}: no {self.kind} found")
        if self.none_found == "whole":
            return Subjects([image], [whole], len(found), [], self.kind, whole=True, scores=[None])
        return Subjects([], [], len(found), [], self.kind)


def photo_rule(
    detect: str = PhotoConfig.detect,
    detector: str | None = None,
    no_face: str = PhotoConfig.no_face,
    aligned_face_size: tuple[int, int] | None = None,
    margin: float | None = None,
    pick: str | ChooseCrop = "largest",
    kind: str | None = None,
) -> SubjectRule:
    """The crop rule for photos of ``--detect``, ``--detector`` and ``--no-face``.

    ``detect`` (DETECT_CHOICES): "none" takes every photo whole; "person" or "face" runs
    ``detector`` (a :func:`reid.detect.build_detector` name; default the kind's, and for
    faces given to an encoder that asks for aligned chips, YuNet, which gives the
    landmarks they are aligned by); "auto"
    runs ``detector`` when one is named, else, when ``aligned_face_size`` (height, width:
    the encoder card's :attr:`~reid.models.ModelCard.aligned_face_size`) is set, the
    landmark-giving face detector (YuNet) so that photos become aligned chips as the
    encoder was trained on, else takes photos whole; ``kind`` (the encoder card's, "person"
    or "face") is what a detector named under "auto" must find.  ``no_face`` (NONE_FOUND)
    is what happens to a photo in which nothing is found.  Raises ConfigError for an
    unknown choice, a ``detector`` with ``detect`` "none", or a detector of the other kind,
    and ModelError (one line naming what to install or fetch) for a detector that cannot
    run here.
    """
    check_detect(detect, no_face, detector)
    if detect == "none":
        return SubjectRule(None, margin, pick, no_face)
    if detect == "auto":
        if detector is None and aligned_face_size is None:
            return SubjectRule(None, margin, pick, no_face)
        wanted = kind if kind in ("person", "face") else None
        found = build_detector(detector if detector is not None else ALIGNING_FACE_DETECTOR, wanted)
    elif detector is None and detect == "face" and aligned_face_size is not None:
        found = build_detector(ALIGNING_FACE_DETECTOR, detect)
    else:
        found = build_detector(detector, detect)
    return SubjectRule(found, margin, pick, no_face, aligned_face_size)
