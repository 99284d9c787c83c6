"""The options of the commands that take photos one by one (verify, calibrate, eval): how a
photo is cut to its subject (``--detect``, ``--no-face``), and the pair commands' settings,
as config fields that carry their options (:mod:`reid.options`).

The library's defaults are these fields (:func:`reid.pipeline.subject.photo_rule`,
:func:`reid.pipeline.verify_pairs`, :func:`reid.pipeline.calibrate_model`,
:func:`reid.pipeline.evaluate_encoder`), and the command
line builds its options and help from them.  The module imports no detector, encoder or
engine, so that help answers before any of them loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from reid.decision import check_far
from reid.options import check_fields, option

# What happens to a photo in which the detector finds nobody, or which a face encoder
# refuses: the --no-face choices.
NO_FACE_CHOICES = ("whole", "skip", "error")
# Where crops come from, for every command (--detect).
DETECT_CHOICES = ("auto", "person", "face", "none")
DETECT_HELP = (
    "auto: photos whole (cut to the aligned chip of their largest face when the model's card asks "
    "for aligned faces), video frames through the model's kind of detector; person or face: that "
    "detector on photos too (the largest is used; query and check-in answer each); none: everything whole."
)
NO_FACE_HELP = (
    "A photo in which the detector (or a face model) finds no face or person: whole (take the "
    "whole photo), skip (leave it out, counted and named), error (stop with one line naming it)."
)

# Images or crops embedded together: a batch beyond this would allocate without bound.
BatchSize = Annotated[int, Field(ge=1, le=4096)]
# Cross-validation folds of a pair file without its own.
Folds = Annotated[int, Field(ge=2, le=1000)]


@dataclass(frozen=True)
class PhotoConfig:
    """How each photo is cut to its subject (:func:`reid.pipeline.subject.photo_rule`):
    ``detect`` one of :data:`DETECT_CHOICES`, ``no_face`` one of :data:`NO_FACE_CHOICES`."""

    detect: Literal[DETECT_CHOICES] = option("auto", help=DETECT_HELP)
    no_face: Literal[NO_FACE_CHOICES] = option("skip", help=NO_FACE_HELP)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class PairConfig:
    """Verification of a pair file (:func:`reid.pipeline.verify_pairs`): ``folds`` for a
    file that defines none, ``batch_size`` images per encoder batch."""

    folds: Folds = option(10, help="Folds for a CSV pair file (LFW's pairs.txt brings its own).")
    batch_size: BatchSize = option(64, help="Images per encoder batch.")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class EvalConfig:
    """Ranking evaluation of a data set's query/gallery split
    (:func:`reid.pipeline.evaluate_encoder`): ``batch_size`` images per encoder batch."""

    batch_size: BatchSize = option(64, help="Images per encoder batch.")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class CalibrateConfig:
    """The choice of a model's threshold on a pair file (:func:`reid.pipeline.calibrate_model`):
    ``far`` the target false-accept rate (a fraction in (0, 1)), ``batch_size`` images per
    encoder batch."""

    far: float = option(1e-3, help="Target false accept rate.")
    batch_size: BatchSize = option(64, help="Images per encoder batch.")

    def __post_init__(self) -> None:
        check_fields(self)
        check_far(self.far)
