"""Generated face photos for ``--demo`` and the tests: drawn faces, one look per person.

Each person gets a fixed look (skin, hair colour and cut, eye colour and spacing, face
shape, mouth, glasses, beard); each photo of that person varies the backdrop, the pose
(shift, tilt, scale), light, expression and sensor noise, the way photos of one face
differ.  They are cartoons: good for exercising enrolment, thresholds and decisions, not
a face benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from reid import DataError

SKINS = ((236, 200, 170), (214, 164, 126), (170, 118, 80), (110, 72, 48))
HAIRS = ((25, 20, 15), (95, 60, 30), (205, 170, 95), (150, 150, 150), (160, 60, 30))
EYES = ((60, 90, 160), (70, 120, 70), (90, 60, 35), (40, 30, 25))
HAIR_CUTS = ("short", "long", "bald", "fringe")
PHOTO_SIZE = (92, 112)  # width, height: the ORL faces' size


@dataclass(frozen=True)
class FaceLook:
    """What stays the same across a person's photos."""

    skin: tuple[int, int, int]
    hair: tuple[int, int, int]
    cut: str
    eyes: tuple[int, int, int]
    eye_gap: float
    width: float
    height: float
    mouth: float
    glasses: bool
    beard: bool


def random_look(rng: np.random.Generator) -> FaceLook:
    def pick(options: tuple) -> tuple:
        return options[int(rng.integers(len(options)))]

    return FaceLook(
        skin=pick(SKINS),
        hair=pick(HAIRS),
        cut=pick(HAIR_CUTS),
        eyes=pick(EYES),
        eye_gap=float(rng.uniform(0.28, 0.42)),
        width=float(rng.uniform(0.30, 0.40)),
        height=float(rng.uniform(0.40, 0.48)),
        mouth=float(rng.uniform(0.12, 0.24)),
        glasses=bool(rng.random() < 0.3),
        beard=bool(rng.random() < 0.25),
    )


def draw_face(look: FaceLook, rng: np.random.Generator, size: tuple[int, int] = PHOTO_SIZE) -> np.ndarray:
    """One RGB photo of ``look``: the face fills the frame, as in a tightly cropped set."""
    width, height = size
    canvas = np.empty((height, width, 3), np.uint8)
    # The backdrop changes from photo to photo, so that only the face tells people apart.
    canvas[:] = tuple(int(v) for v in rng.integers(90, 200, 3))
    scale = min(width, height) * rng.uniform(0.93, 1.05)
    cx = width / 2 + rng.uniform(-3, 3)
    cy = height * 0.55 + rng.uniform(-3, 3)

    def at(dx: float, dy: float) -> tuple[int, int]:
        return int(round(cx + dx * scale)), int(round(cy + dy * scale))

    def length(value: float) -> int:
        return max(1, int(round(value * scale)))

    def oval(dy: float, half_width: float, half_height: float, arc: tuple[int, int], colour: tuple, thick: int) -> None:
        axes = (length(half_width), length(half_height))
        cv2.ellipse(canvas, at(0, dy), axes, 0, arc[0], arc[1], colour, thick)

    if look.cut == "long":
        oval(0.05, look.width + 0.08, look.height + 0.1, (0, 360), look.hair, -1)
    oval(0.0, look.width, look.height, (0, 360), look.skin, -1)
    if look.cut != "bald":
        oval(-0.08, look.width + 0.02, look.height - 0.02, (200 if look.cut == "fringe" else 180, 360), look.hair, -1)
    if look.beard:
        oval(0.12, look.width * 0.9, look.height * 0.7, (20, 160), look.hair, -1)
    for side in (-1, 1):
        centre = side * look.eye_gap / 2
        eye = at(centre, -0.05)
        cv2.ellipse(canvas, eye, (length(0.06), length(0.035)), 0, 0, 360, (245, 245, 245), -1)
        cv2.circle(canvas, eye, length(0.025), look.eyes, -1)
        brow = -0.12 + rng.uniform(-0.01, 0.01)
        cv2.line(canvas, at(centre - 0.06, brow), at(centre + 0.06, brow), look.hair, length(0.02))
        if look.glasses:
            cv2.circle(canvas, eye, length(0.085), (30, 30, 30), max(1, length(0.012)))
    cv2.line(canvas, at(0, -0.02), at(0.02, 0.1), tuple(int(c * 0.8) for c in look.skin), length(0.015))
    smile = rng.uniform(-0.02, 0.05)
    # A positive smile curves the mouth's lower arc, a negative one its upper arc.
    mouth_arc = (0, 180) if smile >= 0 else (180, 360)
    mouth_axes = (length(look.mouth), length(abs(smile) + 0.01))
    cv2.ellipse(canvas, at(0, 0.2), mouth_axes, 0, *mouth_arc, (150, 50, 50), length(0.02))
    tilt = cv2.getRotationMatrix2D((width / 2, height / 2), rng.uniform(-8, 8), 1.0)
    canvas = cv2.warpAffine(canvas, tilt, (width, height), borderMode=cv2.BORDER_REPLICATE)
    light = canvas.astype(np.float32) * rng.uniform(0.75, 1.2) + rng.normal(0, 5, canvas.shape)
    return np.clip(light, 0, 255).astype(np.uint8)


def write_people(folder: Path, names: list[str], photos: int, seed: int = 0) -> dict[str, list[Path]]:
    """``folder/<name>/<n>.png`` for each name: ``photos`` photos of one look per name."""
    rng = np.random.default_rng(seed)
    written: dict[str, list[Path]] = {}
    for name in names:
        look = random_look(rng)
        (folder / name).mkdir(parents=True, exist_ok=True)
        for n in range(photos):
            path = folder / name / f"{n + 1}.png"
            if not cv2.imwrite(str(path), cv2.cvtColor(draw_face(look, rng), cv2.COLOR_RGB2BGR)):
                raise DataError(f"{path}: cannot write a generated face")
            written.setdefault(name, []).append(path)
    return written
