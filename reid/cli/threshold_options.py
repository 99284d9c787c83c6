"""``--threshold`` and ``--far``, shared by ``reid verify``, ``reid query`` and the apps: one
help text that says the unit and how other tools' thresholds convert to it."""

from __future__ import annotations

import typer

from reid.decision import CONVERSIONS, UNIT

THRESHOLD_HELP = (
    f"Decision threshold, a {UNIT}: same identity at this distance or less. Other tools' units differ: "
    f"{CONVERSIONS} (insightface's similarity 0.5 is 1.0, deepface's cosine distance 0.40 is 0.894); "
    "face_recognition's tolerance 0.6 is on raw dlib descriptors of norm about 1.42, so about 0.42 here."
)
FAR_HELP = (
    "Instead of --threshold: a target false-accept rate such as 1e-3, read from the impostor pairs the model "
    "card was calibrated on (cards calibrated by 'reid calibrate' carry them)."
)


def threshold_option(default_text: str) -> float | None:
    """A ``--threshold DISTANCE`` option; ``default_text`` says what applies without it."""
    return typer.Option(None, "--threshold", help=f"{THRESHOLD_HELP} Default: {default_text}.")


def far_option() -> float | None:
    """A ``--far RATE`` option (a fraction in (0, 1))."""
    return typer.Option(None, "--far", help=FAR_HELP)
