"""Real, untrained encoders and small image sets for the pipeline tests."""

from __future__ import annotations

import zlib
from pathlib import Path

import cv2
import numpy as np

from reid.detect import Detection, crop
from reid.gallery import Gallery
from reid.models import Encoder, load_encoder, stand_in_model
from reid.pipeline import enrol, plan_enrolment
from reid.pipeline.synthetic import street_frames, write_street_video


def build_encoder(folder: Path, name: str = "t", kind: str = "person", threshold: float | None = 0.3) -> Encoder:
    """A real ResNet-18 encoder with random weights, saved as a model folder and loaded back;
    models in different folders differ (their weights are seeded by the folder)."""
    size = (64, 32) if kind == "person" else (64, 64)
    seed = zlib.crc32(str(folder).encode())
    stand_in_model(folder, kind, name=name, embedding_dim=64, input_size=size, threshold=threshold, seed=seed)
    return load_encoder(folder, device="cpu")


def write_rgb(path: Path, image: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    return path


def walker_crops(root: Path, frames: int = 3, seed: int = 7) -> dict[str, list[Path]]:
    """ROOT/<walker>/<n>.png crops of the synthetic walkers, in identity-folder layout."""
    written: dict[str, list[Path]] = {}
    for n, (frame, boxes) in enumerate(street_frames(frames, seed=seed)):
        for name, box in boxes.items():
            written.setdefault(name, []).append(write_rgb(root / name / f"{n}.png", crop(frame, box)))
    return written


def street_with_gallery(root: Path, encoder: Encoder, video_name: str, count: int, fps: int) -> tuple[Path, Path]:
    """A synthetic street video of two walkers under ``root`` and a gallery (``root/g``)
    holding crops of them, enrolled with ``encoder``."""
    video = root / video_name
    write_street_video(video, count=count, fps=fps)
    walker_crops(root / "people", frames=2, seed=11)
    with Gallery.open_or_create(root / "g", encoder.card) as gallery:
        enrol(gallery, encoder, plan_enrolment([root / "people"]))
    return video, root / "g"


class WalkerAndStray:
    """A detector whose scores are probabilities, scripted by call: a walker, confident in
    the first four frames and weak after, and a weak box far from anyone in every frame."""

    kind = "person"
    confident_score = 0.5

    def __init__(self) -> None:
        self.calls = 0

    def detect(self, image: np.ndarray) -> list[Detection]:
        step, self.calls = self.calls, self.calls + 1
        height, width = image.shape[:2]
        walker = Detection((width // 8 + 3 * step, height // 4, width // 8, height // 2), 0.9 if step < 4 else 0.3)
        stray = Detection((width - width // 6, 0, width // 8, height // 3), 0.3)
        return [walker, stray]
