"""``--threshold`` and ``--far``, shared by ``reid verify`` and ``reid query``; their help says
the unit and how other tools' thresholds convert to it (:data:`reid.decision.THRESHOLD_HELP` and
:data:`reid.decision.FAR_HELP`, which the apps' options use too)."""

from __future__ import annotations

import typer

from reid.decision import FAR_HELP, THRESHOLD_HELP


def threshold_option(default_text: str) -> float | None:
    """A ``--threshold DISTANCE`` option; ``default_text`` says what applies without it."""
    return typer.Option(None, "--threshold", help=f"{THRESHOLD_HELP} Default: {default_text}.")


def far_option() -> float | None:
    """A ``--far RATE`` option (a fraction in (0, 1))."""
    return typer.Option(None, "--far", help=FAR_HELP)
