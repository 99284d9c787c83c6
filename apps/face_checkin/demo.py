"""Generated inputs for ``--demo``: people to enrol, faces arriving at the desk, and more
people to calibrate a threshold on.

Five people are enrolled with three photos each; the incoming folder holds two new photos
of each of them and two photos of each of three strangers, so a good run names ten faces
and turns four away.  Twelve further people, never enrolled, give the calibration pairs.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from apps.face_checkin.checkin import Decision
from apps.face_checkin.faces import write_people

ENROLLED = ("ada", "ben", "cleo", "dev", "eli")
STRANGERS = ("stranger-1", "stranger-2", "stranger-3")
ENROL_PHOTOS = 3
INCOMING_PHOTOS = 2
CALIBRATION_PEOPLE = 12


@dataclass
class DemoInputs:
    people: Path
    incoming: Path
    calibration_people: Path
    truth: dict[str, str | None]


def write_demo_inputs(folder: Path, seed: int = 0) -> DemoInputs:
    """Write ``people/``, ``incoming/`` and ``calibration-people/`` under ``folder``."""
    if folder.exists():
        shutil.rmtree(folder / "people", ignore_errors=True)
        shutil.rmtree(folder / "incoming", ignore_errors=True)
    people, incoming = folder / "people", folder / "incoming"
    incoming.mkdir(parents=True, exist_ok=True)
    truth: dict[str, str | None] = {}
    known = write_people(people, list(ENROLLED), ENROL_PHOTOS + INCOMING_PHOTOS, seed=seed)
    strangers = write_people(folder / "strangers", list(STRANGERS), INCOMING_PHOTOS, seed=seed + 1)
    for name, photos in {**known, **strangers}.items():
        for photo in photos[-INCOMING_PHOTOS:]:
            arrived = incoming / f"{name}-{photo.name}"
            photo.replace(arrived)
            truth[str(arrived)] = name if name in ENROLLED else None
    shutil.rmtree(folder / "strangers")
    calibration = folder / "calibration-people"
    write_people(calibration, [f"person-{n:02d}" for n in range(1, CALIBRATION_PEOPLE + 1)], 4, seed=seed + 2)
    return DemoInputs(people, incoming, calibration, truth)


@dataclass
class DemoScore:
    faces: int = 0
    correct: int = 0
    wrong_person: int = 0
    stranger_accepted: int = 0
    missed: int = 0
    strangers_turned_away: int = 0


def score_demo(decisions: list[Decision], truth: dict[str, str | None]) -> DemoScore:
    """Compare 1:N decisions with who is really in each incoming photo."""
    score = DemoScore()
    for decision in decisions:
        if decision.source not in truth:
            continue
        score.faces += 1
        actual = truth[decision.source]
        if actual is None:
            if decision.identity is None:
                score.strangers_turned_away += 1
            else:
                score.stranger_accepted += 1
        elif decision.identity is None:
            score.missed += 1
        elif decision.identity == actual:
            score.correct += 1
        else:
            score.wrong_person += 1
    return score
