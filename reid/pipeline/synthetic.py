"""A synthetic street scene: stick-figure people walking past a fixed camera.

The figures have human proportions (head, torso, arms, legs), so OpenCV's HOG people
detector finds them, and each wears its own colours, so an encoder can tell them apart.
Tests and benchmarks use it to exercise the whole query pipeline (decode, detect, embed,
search, annotate) where no real video is available; each frame comes with its truth.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from reid.detect import Box
from reid.errors import ConfigError, DataError

SKIN = (190, 160, 140)


@dataclass(frozen=True)
class Walker:
    """A figure: RGB colours, where it starts (x of its centre), its pace (pixels a frame),
    the y of the top of its head and its height in pixels."""

    name: str
    shirt: tuple[int, int, int]
    trousers: tuple[int, int, int]
    start_x: float
    pace: float
    top: int
    height: int


DEFAULT_WALKERS = (
    Walker("red", (200, 30, 30), (30, 30, 90), 120, 2.0, 60, 200),
    Walker("blue", (30, 120, 200), (60, 50, 40), 360, -2.0, 80, 190),
)


def draw_walker(image: np.ndarray, walker: Walker, centre_x: float, step: int = 0) -> Box:
    """Draw ``walker`` centred at ``centre_x`` in its stride position ``step``; return its box."""
    s = walker.height / 180
    cx, top = centre_x, walker.top

    def at(x: float, y: float) -> tuple[int, int]:
        return int(round(cx + x * s)), int(round(top + y * s))

    stride = 4 * ((step % 4) - 1.5)
    cv2.circle(image, at(0, 15), max(1, int(13 * s)), SKIN, -1)
    cv2.rectangle(image, at(-6, 27), at(6, 34), SKIN, -1)
    torso = np.array([at(-22, 34), at(22, 34), at(18, 95), at(-18, 95)], np.int32)
    cv2.fillPoly(image, [torso], walker.shirt)
    arm, leg = max(1, int(9 * s)), max(1, int(13 * s))
    cv2.line(image, at(-21, 38), at(-30 - stride / 2, 95), walker.shirt, arm)
    cv2.line(image, at(21, 38), at(30 + stride / 2, 95), walker.shirt, arm)
    cv2.line(image, at(-10, 95), at(-14 - stride, 175), walker.trousers, leg)
    cv2.line(image, at(10, 95), at(14 + stride, 175), walker.trousers, leg)
    x0, y0 = at(-36, 0)
    x1, y1 = at(36, 182)
    return (x0, y0, x1 - x0, y1 - y0)


def street_frames(
    count: int,
    size: tuple[int, int] = (480, 360),
    walkers: tuple[Walker, ...] = DEFAULT_WALKERS,
    seed: int = 0,
) -> Iterator[tuple[np.ndarray, dict[str, Box]]]:
    """``count`` RGB frames of ``size`` (width, height) and, for each, every walker's box."""
    if count < 1:
        raise ConfigError(f"frame count must be at least 1, got {count}")
    width, height = size
    rng = np.random.default_rng(seed)
    background = np.full((height, width, 3), (200, 205, 210), np.uint8)
    background[int(height * 0.7) :] = (150, 150, 145)
    for index in range(count):
        # Sensor noise, fresh each frame, keeps consecutive frames from being identical.
        noise = rng.integers(-10, 11, background.shape)
        frame = np.clip(background.astype(np.int16) + noise, 0, 255).astype(np.uint8)
        boxes = {w.name: draw_walker(frame, w, w.start_x + w.pace * index, index) for w in walkers}
        yield frame, boxes


def write_street_video(
    path: Path,
    count: int = 30,
    fps: float = 10.0,
    size: tuple[int, int] = (480, 360),
    walkers: tuple[Walker, ...] = DEFAULT_WALKERS,
    seed: int = 0,
) -> list[dict[str, Box]]:
    """Write :func:`street_frames` to a video file (``.avi`` MJPG, else mp4v); return the truth."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    codec = "MJPG" if path.suffix.lower() == ".avi" else "mp4v"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*codec), fps, size)
    if not writer.isOpened():
        raise DataError(f"{path}: OpenCV {cv2.__version__} cannot write {codec} video here")
    truth = []
    try:
        for frame, boxes in street_frames(count, size, walkers, seed):
            writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
            truth.append(boxes)
    finally:
        writer.release()
    return truth
