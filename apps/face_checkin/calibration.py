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

from reid import DataError, as_dict, write_bytes_atomic
from reid.cli import default_of
from reid.evaluation import ThresholdChoice, read_pairs, verification_metrics
from reid.models import READY_MADE_FACES, load_encoder, save_card
from reid.pipeline import calibrate_model, model_folder, plan_enrolment, score_pairs

from apps.face_checkin.config import DEFAULT_MAX_IMPOSTORS, CheckinConfig


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
