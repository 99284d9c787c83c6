"""``--detector``, shared by ``reid enroll``, ``reid query``, ``reid verify`` and the apps."""

from __future__ import annotations

import typer

from reid.detect import DEFAULT_DETECTORS, detector_names

DETECTOR_HELP = (
    f"Detector: {', '.join(detector_names('person'))} (people), {', '.join(detector_names('face'))} (faces); "
    f"default {DEFAULT_DETECTORS['person']} for people, {DEFAULT_DETECTORS['face']} for faces."
)


def detector_option(help_text: str = DETECTOR_HELP) -> str | None:
    """A ``--detector NAME`` option (default: the detector kind's)."""
    return typer.Option(None, "--detector", help=help_text)
