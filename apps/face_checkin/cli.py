"""``python -m apps.face_checkin``: enrol people from face photos, then check faces in.

The options are the fields of :class:`~apps.face_checkin.config.CheckinConfig`
(:func:`reid.cli.with_config_options`): their defaults, help and ranges are stated there
once.  The engine (PyTorch, OpenCV, FAISS) is imported when the command runs, so help
answers at once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from reid import ReidError, printable, resolve_threshold, write_bytes_atomic
from reid.cli import (
    OneLineCommand, config_overrides, distance, far_percent, handle_errors, percent, print_table, skip_reason,
    with_config_options,
)  # fmt: skip
from reid.models import SFACE

from apps.face_checkin.config import CheckinConfig

if TYPE_CHECKING:
    from apps.face_checkin.checkin import Decision

# Markup is off: file names and labels are printed as they are, never interpreted.
console = Console(markup=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _show(decision: Decision) -> None:
    where = printable(decision.source) + (f" frame {decision.frame}" if decision.frame is not None else "")
    if decision.distance is None:
        console.print(f"{decision.decision:<10} {where}", highlight=False)
        return
    who = printable(decision.identity or (f"not {decision.claim}" if decision.claim else "nobody known"))
    relation = "<=" if decision.distance <= decision.threshold else ">"
    console.print(
        f"{decision.decision:<10} {who:<16} {distance(decision.distance)} {relation} {distance(decision.threshold)}  {where}",
        highlight=False,
    )


@app.command(cls=OneLineCommand)
@handle_errors
@with_config_options(CheckinConfig, checked_first=True)
def main(
    sources: list[str] = typer.Argument(
        None, help="Images, folders of images, videos, or a camera index (0); each face is decided."
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help=f"Face model: {SFACE} (the default), dlib-face, a folder (calibrated card) or a name under models/."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No line per decision; only the summary."),
    demo: bool = typer.Option(False, "--demo", help="Generate people, strangers and a calibration set, then check in."),
    **options: Any,
) -> None:
    """Enrol people, then answer 1:N (who is this, or nobody known?) or, with --claim, 1:1
    (is this that person?) for every face, logging each decision with its distance."""
    from reid.gallery import DB_FILE, open_gallery
    from reid.models import load_encoder, stand_in_model
    from reid.pipeline import DUPLICATE, plan_enrolment

    from apps.face_checkin.calibration import calibrate_on_people
    from apps.face_checkin.checkin import CheckinDesk, enrol_people
    from apps.face_checkin.demo import score_demo, write_demo_inputs

    settings = config_overrides(CheckinConfig, options)
    out = settings["out"]
    people = settings.pop("people", None)
    scene = None
    if demo:
        if sources or people is not None:
            raise ReidError("--demo generates its own people and photos; give no SOURCE or --people with it")
        scene = write_demo_inputs(out / "demo")
        people, sources = scene.people, [str(scene.incoming)]
        if model is None:
            folder = stand_in_model(out / "demo" / "model", "face", name="untrained-face-stand-in")
            photos = {key: settings[key] for key in ("detect", "no_face") if key in settings}
            report = calibrate_on_people(
                str(folder), scene.calibration_people, out / "demo" / "calibration",
                detector=settings.get("face_detector"), **photos,
            )
            model = str(folder)
            held = report.held_out
            console.print(
                f"no --model: an untrained stand-in face encoder, calibrated on generated people: threshold "
                f"{distance(report.choice.threshold)}, held-out FAR {far_percent(held.far)}, TAR {percent(held.tar)}"
            )
    if model is None:
        model = SFACE
    if not sources:
        raise ReidError("give at least one SOURCE: an image, a folder, a video or a camera index")
    config = CheckinConfig(people=people, sources=list(sources), **settings)
    # What is read comes first, before the model: a missing people folder or gallery leaves
    # nothing under --out.  This app's own way to fill a gallery is --people, so that is named.
    plan = plan_enrolment([people]) if people is not None else None
    if people is None and not (config.gallery_path / DB_FILE).is_file():
        raise ReidError(f"{config.gallery_path}: no gallery here; give --people FOLDER (<person>/<photos>) to enrol one")
    encoder = load_encoder(model)
    if people is not None:
        out.mkdir(parents=True, exist_ok=True)
        store = open_gallery(config.gallery_path, encoder.card)
    else:
        store = open_gallery(config.gallery_path)
        out.mkdir(parents=True, exist_ok=True)
    decisions: list[Decision] = []
    with store:
        # Fail on a missing threshold before spending time on enrolment.
        resolve_threshold(config.threshold, encoder.card, store, given_detail=config.threshold_source or "--threshold")
        enrolled = None
        if people is not None:
            enrolled = enrol_people(store, encoder, plan, config)
            console.print(
                f"enrolled {enrolled.added} new photos of {len(enrolled.per_identity)} people "
                f"({enrolled.duplicates} already enrolled, {len(enrolled.skipped) - enrolled.duplicates} skipped); "
                f"gallery {printable(store.location)} holds {len(store)} photos of {store.identity_count} people"
            )
            problems = [(path, reason) for path, reason in enrolled.skipped if reason != DUPLICATE]
            for path, reason in problems[:5]:
                console.print(f"  skipped {printable(path)}: {printable(skip_reason(path, reason))}")
            for path, note in enrolled.several_subjects[:5]:
                console.print(f"  several found in {printable(path)}: {printable(note)}", soft_wrap=True)
        desk = CheckinDesk(store, encoder, config)
        console.print(f"{config.mode} at threshold {distance(desk.threshold)} (from {printable(desk.threshold_source)})")

        def on_decision(decision: Decision) -> None:
            decisions.append(decision)
            if not quiet:
                _show(decision)

        log_path = out / "decisions.jsonl"
        with open(log_path, "a" if config.append else "w", encoding="utf-8") as log:
            result = desk.run(log, on_decision)
    summary = {
        "model": model,
        "gallery": str(config.gallery_path),
        "mode": config.mode,
        "claim": config.claim,
        "detect": config.detect,
        "no_face": config.no_face,
        "enrolment": enrolled.to_dict() if enrolled is not None else None,
        **result.to_dict(),
    }
    if scene is not None:
        summary["demo"] = vars(score_demo(decisions, scene.truth))
    write_bytes_atomic(out / "summary.json", (json.dumps(summary, indent=2) + "\n").encode("utf-8"))
    print_table(
        f"{config.mode} decisions (threshold {distance(result.threshold)})", ["decision", "faces"], sorted(result.decisions.items())
    )
    if scene is not None:
        s = summary["demo"]
        console.print(
            f"demo truth: {s['correct']} of {s['faces'] - s['strangers_turned_away'] - s['stranger_accepted']} "
            f"enrolled faces named correctly, {s['wrong_person']} named as someone else, {s['missed']} missed; "
            f"{s['strangers_turned_away']} strangers turned away, {s['stranger_accepted']} let in"
        )
    for path, reason in result.unreadable[:5]:
        console.print(f"skipped unreadable {printable(path)}: {printable(skip_reason(path, reason))}")
    console.print(f"wrote {printable(out / 'decisions.jsonl')} and {printable(out / 'summary.json')}")
    if result.interrupted:
        err_console.print("interrupted: decisions so far are logged")
        raise typer.Exit(130)
