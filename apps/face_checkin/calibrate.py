"""``python -m apps.face_checkin.calibrate --model M --people DIR --out OUT [--far 1e-3]``:
choose the check-in threshold on half of a people folder and measure it on the other half
(:func:`apps.face_checkin.calibration.calibrate_on_people` says how).

The options that are config fields come from them: ``--detect``, ``--detector`` and
``--no-face`` from :class:`~apps.face_checkin.config.CheckinConfig` (the photos are cut as
check-in cuts them), ``--far`` from reid's :class:`reid.pipeline.CalibrateConfig`.  The
engine is imported when the command runs, so help answers at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from reid import printable
from reid.cli import (
    OneLineCommand, config_overrides, distance, far_percent, handle_errors, in_range, percent, print_table,
    with_config_options,
)  # fmt: skip
from reid.models import READY_MADE_FACES
from reid.pipeline import CalibrateConfig

from apps.face_checkin.config import DEFAULT_MAX_IMPOSTORS, CheckinConfig

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
# The photos are cut as check-in cuts enrolment photos.
PHOTO_KEYS = ("detect", "face_detector", "no_face")


@app.command(cls=OneLineCommand)
@handle_errors
@with_config_options(CheckinConfig, keys=PHOTO_KEYS, more=[(CalibrateConfig, ("far",), None)], checked_first=True)
def main(
    model: str = typer.Option(..., "--model", "-m", help=f"Face model folder, or a ready-made one: {', '.join(READY_MADE_FACES)}."),
    people: Path = typer.Option(..., "--people", help="Folder of <person>/<photos>, e.g. the ORL faces."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for the pair files and calibration.json."),
    best_accuracy: bool = typer.Option(False, "--best-accuracy", help="Choose the best-accuracy threshold instead of --far's."),
    max_impostors: int = typer.Option(
        DEFAULT_MAX_IMPOSTORS, "--max-impostors", callback=in_range("max_impostors"), help="Most impostor pairs per half (a seeded sample beyond)."
    ),
    **options: Any,
) -> None:
    """Calibrate a face model's threshold on half the people and measure it on the other half."""
    from apps.face_checkin.calibration import calibrate_on_people

    console = Console(markup=False, highlight=False, soft_wrap=True)
    far = None if best_accuracy else CalibrateConfig(**config_overrides(CalibrateConfig, options)).far
    photos = config_overrides(CheckinConfig, options)
    detector = photos.pop("face_detector", None)
    report = calibrate_on_people(model, people, out, far, max_impostors=max_impostors, detector=detector, **photos)
    choice, held = report.choice, report.held_out
    print_table(
        f"threshold {distance(choice.threshold)} ({choice.criterion}), written into {report.model}",
        ["pairs", "people", "genuine", "impostor", "FAR", "TAR", "accuracy"],
        [
            ["calibration", len(report.calibration_people), choice.num_genuine, choice.num_impostor,
             far_percent(choice.far), percent(choice.tar), percent(choice.accuracy)],
            ["held out", len(report.held_out_people), held.genuine, held.impostor,
             far_percent(held.far), percent(held.tar), percent(held.accuracy)],
        ],
    )  # fmt: skip
    if choice.note is not None:
        console.print(choice.note)
    skipped = report.skipped_images + held.skipped_images
    if skipped:
        console.print(f"{skipped} photos could not be embedded (no face found?); their pairs were left out")
    console.print(f"wrote {printable(out / 'calibration.json')}")


if __name__ == "__main__":
    app(prog_name="python -m apps.face_checkin.calibrate")
