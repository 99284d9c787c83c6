"""Generated inputs for ``--demo``: two camera videos of the same people walking by.

The people come from reid's built-in synthetic person set (:func:`reid.data.generate_synthetic`,
read back with :func:`reid.data.load_dataset`), whose renderer gives each identity fixed
clothes and each camera its own light, colour cast, scale, blur and viewpoint.  Every
walker is seen by both cameras, so a track of camera 1 has a true counterpart in camera 0;
the scene keeps that truth so the demo can say how many tracks were named correctly.
More identities of the same set, never shown in the videos, give a threshold for models
whose card has none (on their pairs seen by different cameras).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from reid import ConfigError, DataError, as_dict
from reid.data import ImageRecord, SyntheticConfig, load_dataset, read_image
from reid.detect import Box
from reid.evaluation import ThresholdChoice, choose_threshold, pair_distance
from reid.pipeline import embed_paths
from reid.models import Encoder
from reid.track import iou

from apps.camera_search.search import SearchResult, track_label

# A seed whose two synthetic cameras OpenCV's HOG people detector sees reasonably well:
# the renderer's blocky figures are harder for it than real people.
DEMO_SEED = 9
PERSON_SIZE = (100, 200)  # width, height of a walker in the frame
CALIBRATION_IDS = 8


@dataclass
class DemoScene:
    """The written videos, each frame's true boxes (person id -> box) per camera, and the
    images of identities kept out of the videos."""

    videos: list[Path]
    truth: list[list[dict[int, Box]]]
    held_out: list[ImageRecord]


def _border_colour(images: list[np.ndarray]) -> np.ndarray:
    """The typical colour at the left and right edges of a camera's crops: its background."""
    edges = np.concatenate([np.concatenate([im[:, :3], im[:, -3:]], axis=1).reshape(-1, 3) for im in images])
    return np.median(edges, axis=0)


def write_demo_videos(
    folder: Path,
    frames: int = 60,
    walkers: int = 3,
    size: tuple[int, int] = (480, 300),
    fps: float = 10.0,
    seed: int = DEMO_SEED,
) -> DemoScene:
    """Write ``cam0.avi`` and ``cam1.avi`` under ``folder``: ``walkers`` people cross each
    camera one after another (left to right in camera 0, the other way in camera 1)."""
    if walkers < 1 or frames < 2:
        raise ConfigError(f"the demo needs at least one walker and two frames, got {walkers} and {frames}")
    width, height = size
    if height < PERSON_SIZE[1] + 20 or width < PERSON_SIZE[0] * 2:
        raise ConfigError(
            f"demo frames of {width}x{height} are too small for {PERSON_SIZE[0]}x{PERSON_SIZE[1]} walkers"
        )
    config = SyntheticConfig(
        seed=seed,
        train_ids=walkers,
        test_ids=CALIBRATION_IDS,
        cameras=2,
        cameras_per_id=(2, 2),
        images_per_camera=(4, 4),
        distractors=0,
        junk=0,
    )
    dataset = load_dataset(f"synthetic:{folder / 'people'}", config)
    views: dict[tuple[int, int], list[np.ndarray]] = defaultdict(list)
    for record in dataset.train:
        image = cv2.resize(read_image(record.path), PERSON_SIZE, interpolation=cv2.INTER_CUBIC)
        views[(record.pid, record.camid)].append(image)
    people = sorted({pid for pid, _ in views})
    rng = np.random.default_rng(seed)
    gap = max(1, frames // (walkers + 1))
    crossing = max(2, frames - gap * (walkers - 1))
    pace = (width + PERSON_SIZE[0]) / crossing
    videos, truth = [], []
    for camera in (0, 1):
        background = _border_colour([im for (_, cam), ims in views.items() if cam == camera for im in ims])
        order = people if camera == 0 else people[::-1]
        path = folder / f"cam{camera}.avi"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, size)
        if not writer.isOpened():
            raise DataError(f"{path}: OpenCV {cv2.__version__} cannot write MJPG video here")
        camera_truth = []
        try:
            for index in range(frames):
                canvas = np.empty((height, width, 3), np.float32)
                canvas[:] = background
                canvas += rng.normal(0.0, 4.0, canvas.shape)
                frame = np.clip(canvas, 0, 255).astype(np.uint8)
                boxes: dict[int, Box] = {}
                for n, pid in enumerate(order):
                    travelled = pace * (index - n * gap)
                    if travelled < 0:
                        continue
                    x = round(-PERSON_SIZE[0] + travelled) if camera == 0 else round(width - travelled)
                    y = height - PERSON_SIZE[1] - 10 - 12 * (n % 3)
                    person = views[(pid, camera)][(index // 4) % len(views[(pid, camera)])]
                    x0, x1 = max(0, x), min(width, x + PERSON_SIZE[0])
                    if x1 - x0 < PERSON_SIZE[0] // 2:
                        continue
                    frame[y : y + PERSON_SIZE[1], x0:x1] = person[:, x0 - x : x1 - x]
                    boxes[pid] = (x0, y, x1 - x0, PERSON_SIZE[1])
                writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
                camera_truth.append(boxes)
        finally:
            writer.release()
        videos.append(path)
        truth.append(camera_truth)
    return DemoScene(videos, truth, dataset.query + dataset.gallery)


def demo_threshold(encoder: Encoder, scene: DemoScene) -> ThresholdChoice:
    """The best-accuracy threshold over the held-out identities' cross-camera pairs.

    Only pairs from different cameras count: the demo names camera-1 tracks after
    camera-0 tracks, and a camera's light and colour cast make such pairs much farther
    apart than two views from one camera.
    """
    records = scene.held_out
    features = embed_paths(encoder, [r.path for r in records]).features
    pairs = [(i, j) for i, j in itertools.combinations(range(len(records)), 2) if records[i].camid != records[j].camid]
    first, second = (np.array(side) for side in zip(*pairs, strict=True))
    same = np.array([records[i].pid == records[j].pid for i, j in pairs])
    return choose_threshold(pair_distance(features[first], features[second]), same)


@dataclass
class DemoScore:
    """How the demo's searched tracks were named, against the generated truth."""

    searched: int = 0
    correct: int = 0
    wrong: int = 0
    unknown: int = 0

    def to_dict(self) -> dict[str, int]:
        return as_dict(self)


def _true_person(observations: list[tuple[int, Box]], truth: list[dict[int, Box]]) -> int | None:
    """The generated person a track's boxes overlap most often, or None for a false alarm."""
    votes: Counter[int] = Counter()
    for frame, box in observations:
        if frame >= len(truth):
            continue
        best = max(truth[frame].items(), key=lambda kv: iou(kv[1], box), default=None)
        if best is not None and iou(best[1], box) >= 0.3:
            votes[best[0]] += 1
    return votes.most_common(1)[0][0] if votes else None


def score_demo(result: SearchResult, scene: DemoScene) -> DemoScore:
    """Count the searched tracks named as the reference track of the same generated person."""
    people: dict[str, int | None] = {}
    for run in result.cameras:
        for track in run.tracks:
            boxes = [(o.frame, o.box) for o in track.observations]
            people[track_label(run.camera, track.id)] = _true_person(boxes, scene.truth[run.camera])
    score = DemoScore()
    for event in result.events:
        if event.role != "query":
            continue
        score.searched += 1
        if event.identity is None:
            score.unknown += 1
        elif people.get(event.identity) is not None and (
            people[event.identity] == people[track_label(event.camera, event.track)]
        ):
            score.correct += 1
        else:
            score.wrong += 1
    return score
