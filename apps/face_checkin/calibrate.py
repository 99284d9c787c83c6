"""Choose the check-in threshold on pairs of a people folder and measure it on other people.

``python -m apps.face_checkin.calibrate --model M --people DIR --out OUT [--far 1e-3]``

1. The people of ``DIR/<person>/<photos>`` are split in two halves (alternately, in name
   order): one to choose the threshold on, one kept out to measure it on.
2. Each half becomes a pair file, ``OUT/calibration-pairs.csv`` and ``OUT/held-out-pairs.csv``
   (``path_a,path_b,label`` relative to ``DIR``, the CSV format ``reid calibrate`` and
   ``reid verify`` read): every genuine pair, and every impostor pair up to
   ``--max-impostors`` (a seeded sample beyond that).
3. :func:`reid.pipeline.calibrate_model`, the function behind ``reid calibrate``, picks the
   threshold with the highest TAR at FAR <= ``--far`` on the calibration pairs and writes it,
   with its provenance, into the model card.  A model folder's own card is updated;
   a ready-made encoder's built-in card (``sface``, ``dlib-face``) is first saved as the model folder ``OUT/model``, which
   both this app and reid take as ``--model``.
4. The same model then scores the held-out pairs, and FAR and TAR at that threshold are
   measured on people the threshold never saw.

Every photo is cut as check-in cuts enrolment photos (``--detect``, ``--detector``,
``--no-face``: :meth:`apps.face_checkin.checkin.CheckinConfig.photo_rule`), so the threshold
fits the crops check-in compares; photos left out are counted and their pairs unscored.

Everything is written to ``OUT/calibration.json``.
"""

from __future__ import annotations

import csv
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.console import Console
from rich.text import Text

from reid import DataError, ReidError, as_dict, printable, write_bytes_atomic
from reid.evaluation import ThresholdChoice, read_pairs, verification_metrics
from reid.models import READY_MADE_FACES, load_encoder, save_card
from reid.pipeline import NO_FACE_HELP, calibrate_model, model_folder, plan_enrolment, score_pairs
from reid.cli import OneLineCommand, default_of, in_range, print_table

from apps.face_checkin.checkin import CheckinConfig

DEFAULT_MAX_IMPOSTORS = 50_000


@dataclass
class HeldOut:
    """FAR, TAR and accuracy at one threshold on pairs of people it was not chosen on."""

    threshold: float
    far: float
    tar: float
    accuracy: float
    auc: float
    eer: float
    genuine: int
    impostor: int
    skipped_images: int

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass
class CalibrationReport:
    model: Path
    choice: ThresholdChoice
    held_out: HeldOut
    calibration_pairs: Path
    held_out_pairs: Path
    calibration_people: list[str]
    held_out_people: list[str]
    skipped_images: int
    detect: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": str(self.model),
            "detect": self.detect,
            "calibration": {
                **self.choice.to_dict(),
                "pairs": str(self.calibration_pairs),
                "people": self.calibration_people,
                "skipped_images": self.skipped_images,
            },
            "held_out": {**self.held_out.to_dict(), "pairs": str(self.held_out_pairs), "people": self.held_out_people},
        }


def people_photos(folder: Path) -> dict[str, list[Path]]:
    """``folder/<person>/<photos>`` as person -> photos, in name order."""
    photos: dict[str, list[Path]] = {}
    for entry in plan_enrolment([folder]):
        photos.setdefault(entry.identity, []).append(entry.path)
    return dict(sorted(photos.items()))


def split_people(photos: dict[str, list[Path]]) -> tuple[list[str], list[str]]:
    """Alternate people into a calibration half and a held-out half; both need two people
    (for impostor pairs) and at least one person with two photos (for genuine pairs)."""
    names = list(photos)
    halves = (names[0::2], names[1::2])
    for half, label in zip(halves, ("calibration", "held-out"), strict=True):
        if len(half) < 2 or not any(len(photos[n]) >= 2 for n in half):
            raise DataError(
                f"{len(names)} people are too few to calibrate: the {label} half needs two people, "
                "one of them with two photos or more"
            )
    return halves


def write_pairs(
    photos: dict[str, list[Path]], names: list[str], root: Path, path: Path, max_impostors: int, seed: int = 0
) -> tuple[int, int]:
    """Write the genuine and impostor pairs of ``names`` as CSV; returns their counts."""
    images = [(name, p) for name in names for p in photos[name]]
    genuine = [(a, b) for name in names for a, b in itertools.combinations(photos[name], 2)]
    impostor_count = len(images) * (len(images) - 1) // 2 - len(genuine)
    if impostor_count <= max_impostors:
        impostor = [(a, b) for (na, a), (nb, b) in itertools.combinations(images, 2) if na != nb]
    else:
        rng = np.random.default_rng(seed)
        chosen: set[tuple[int, int]] = set()
        while len(chosen) < max_impostors:
            i, j = sorted(int(v) for v in rng.choice(len(images), 2, replace=False))
            if images[i][0] != images[j][0]:
                chosen.add((i, j))
        impostor = [(images[i][1], images[j][1]) for i, j in sorted(chosen)]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path_a", "path_b", "label"])
        for pairs, label in ((genuine, 1), (impostor, 0)):
            for a, b in pairs:
                writer.writerow([a.relative_to(root).as_posix(), b.relative_to(root).as_posix(), label])
    return len(genuine), len(impostor)


def model_folder_for(model: str, out: Path) -> Path:
    """The folder whose card receives the threshold: the model's own (a path or a name under
    ``models/``), or ``out/model`` holding the card of a ready-made encoder (sface, dlib-face)."""
    if model in READY_MADE_FACES:
        folder = out / "model"
        save_card(load_encoder(model).card, folder)
        return folder
    return model_folder(model)


def calibrate_on_people(
    model: str,
    people: Path,
    out: Path,
    target_far: float | None = default_of(calibrate_model, "target_far"),
    detect: str = CheckinConfig.detect,
    max_impostors: int = DEFAULT_MAX_IMPOSTORS,
    detector: str | None = None,
    no_face: str = CheckinConfig.no_face,
) -> CalibrationReport:
    """Calibrate ``model`` on half of ``people`` and measure the threshold on the other half,
    on the crops check-in makes of enrolment photos with ``detect``, the face ``detector``
    and ``no_face`` (:meth:`CheckinConfig.photo_rule`: the largest face of each photo)."""
    checkin = CheckinConfig(people, out, [], detect=detect, face_detector=detector, no_face=no_face)
    photos = people_photos(people)
    calibration_people, held_out_people = split_people(photos)
    out.mkdir(parents=True, exist_ok=True)
    calibration_csv, held_out_csv = out / "calibration-pairs.csv", out / "held-out-pairs.csv"
    write_pairs(photos, calibration_people, people, calibration_csv, max_impostors)
    write_pairs(photos, held_out_people, people, held_out_csv, max_impostors)
    folder = model_folder_for(model, out)
    encoder = load_encoder(folder)
    rule = checkin.photo_rule(encoder, "largest")
    calibration = calibrate_model(
        folder, calibration_csv, people, target_far=target_far, subject=rule, no_face=no_face
    )
    threshold = calibration.choice.threshold
    held_out_pairs = read_pairs(held_out_csv, people)
    scores = score_pairs(encoder, held_out_pairs, subject=rule, no_face=no_face)
    if scores.distances.size == 0:
        raise DataError(f"{held_out_csv}: no pair has two usable images")
    accepted = scores.distances <= threshold
    same = scores.is_same
    metrics = verification_metrics(scores.distances, same, folds=2)
    held_out = HeldOut(
        threshold=threshold,
        far=float(accepted[~same].mean()),
        tar=float(accepted[same].mean()),
        accuracy=float((accepted == same).mean()),
        auc=metrics.auc,
        eer=metrics.eer,
        genuine=int(same.sum()),
        impostor=int((~same).sum()),
        skipped_images=len(scores.skipped_images),
    )
    report = CalibrationReport(
        model=folder,
        choice=calibration.choice,
        held_out=held_out,
        calibration_pairs=calibration_csv,
        held_out_pairs=held_out_csv,
        calibration_people=calibration_people,
        held_out_people=held_out_people,
        skipped_images=len(calibration.scores.skipped_images),
        detect=detect,
    )
    write_bytes_atomic(out / "calibration.json", (json.dumps(report.to_dict(), indent=2) + "\n").encode("utf-8"))
    return report


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command(cls=OneLineCommand)
def main(
    model: str = typer.Option(..., "--model", "-m", help=f"Face model folder, or a ready-made one: {', '.join(READY_MADE_FACES)}."),
    people: Path = typer.Option(..., "--people", help="Folder of <person>/<photos>, e.g. the ORL faces."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for the pair files and calibration.json."),
    far: float = typer.Option(
        default_of(calibrate_on_people, "target_far"), "--far", callback=in_range("far"),
        help="Target false accept rate on the calibration pairs.",
    ),
    best_accuracy: bool = typer.Option(False, "--best-accuracy", help="Choose the best-accuracy threshold instead."),
    detect: str = typer.Option(
        CheckinConfig.detect, "--detect", help="auto|face|none, as for check-in (photos: auto = whole, or aligned chips)."
    ),
    detector: str | None = typer.Option(
        None, "--detector", help="Face detector for --detect face: haar (default) or yunet, as for check-in."
    ),
    no_face: str = typer.Option(CheckinConfig.no_face, "--no-face", help=f"{NO_FACE_HELP} As for check-in."),
    max_impostors: int = typer.Option(
        DEFAULT_MAX_IMPOSTORS, "--max-impostors", callback=in_range("max_impostors"), help="Most impostor pairs per half (a seeded sample beyond)."
    ),
) -> None:
    """Calibrate a face model's threshold on half the people and measure it on the other half."""
    console = Console(markup=False, highlight=False)
    try:
        report = calibrate_on_people(
            model, people, out, None if best_accuracy else far, detect, max_impostors, detector, no_face
        )
    except (ReidError, OSError) as exc:  # an OS error names its file in one line too
        error = Text.assemble(("error:", "bold red"), " ", printable(exc))
        Console(stderr=True, markup=False).print(error, soft_wrap=True)
        raise typer.Exit(1) from None
    choice, held = report.choice, report.held_out
    print_table(
        f"threshold {choice.threshold:.4f} ({choice.criterion}), written into {report.model}",
        ["pairs", "people", "genuine", "impostor", "FAR", "TAR", "accuracy"],
        [
            ["calibration", len(report.calibration_people), choice.num_genuine, choice.num_impostor,
             f"{choice.far:.4%}", f"{choice.tar:.2%}", f"{choice.accuracy:.2%}"],
            ["held out", len(report.held_out_people), held.genuine, held.impostor,
             f"{held.far:.4%}", f"{held.tar:.2%}", f"{held.accuracy:.2%}"],
        ],
    )  # fmt: skip
    skipped = report.skipped_images + held.skipped_images
    if skipped:
        console.print(f"{skipped} photos could not be embedded (no face found?); their pairs were left out")
    console.print(f"wrote {printable(out / 'calibration.json')}", highlight=False)


if __name__ == "__main__":
    app(prog_name="python -m apps.face_checkin.calibrate")
