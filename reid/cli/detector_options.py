"""``--detector``, shared by ``reid enroll``, ``reid query``, ``reid verify`` and the apps."""

from __future__ import annotations

import typer

from reid.cli.common import err_console
from reid.detect import DEFAULT_DETECTORS, fallback_note
from reid.detect.pedestrian import PedestrianConfig
from reid.detect.ssdlite import SSDLiteConfig
from reid.detect.yolo import YoloConfig
from reid.pipeline.subject import DETECTOR_HELP

# What a tracker counts as confident when --track-high-score is not given: a detector with a
# weak tier gives its confident score (reid.detect.for_tracking), any other every detection.
TRACK_HIGH_SCORE_HELP = (
    "Detector score from which a detection may start a track; weaker ones only continue tracks (default: the "
    f"detector's confident score for those that also give weaker boxes, pedestrian {PedestrianConfig.min_score:g}, "
    f"ssdlite {SSDLiteConfig.min_score:g} and yolo {YoloConfig.min_score:g}; with any other every detection may)."
)


def detector_option(help_text: str = DETECTOR_HELP) -> str | None:
    """A ``--detector NAME`` option (default: the detector kind's)."""
    return typer.Option(None, "--detector", help=help_text)


def print_fallback_note(detector: str | None, kind: str | None) -> None:
    """When no ``--detector`` was given and ``kind``'s default detector cannot run here, say
    in one line on stderr which one runs instead and how to add the default."""
    note = fallback_note(kind) if detector is None and kind in DEFAULT_DETECTORS else None
    if note:
        err_console.print(note, soft_wrap=True)
