"""Linking one camera's detections into tracks: greedy IoU matching, optionally gated by appearance.

A track is one person seen in consecutive kept frames.  Each new frame's detections are
matched to the live tracks by the overlap (intersection over union) of their boxes with
where each track is expected to be (its last box moved by its recent velocity); with
``appearance`` set, a match also needs the detection's embedding to lie within that
distance of the track's mean embedding, which keeps two people who cross from swapping.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reid import ConfigError
from reid.detect import Box
from reid.models import l2_normalize


@dataclass
class TrackerConfig:
    """``iou``: least overlap that continues a track.  ``max_gap``: kept frames a track may go
    unseen (a missed detection, a short occlusion) before it ends.  ``appearance``: largest
    embedding distance (Euclidean, unit vectors) from a track's mean, or None for IoU only.
    ``min_boxes``: tracks with fewer boxes are dropped as detector noise."""

    iou: float = 0.3
    max_gap: int = 5
    appearance: float | None = None
    min_boxes: int = 2

    def __post_init__(self) -> None:
        if not 0 < self.iou <= 1:
            raise ConfigError(f"--iou must be in (0, 1], got {self.iou}")
        if self.max_gap < 0:
            raise ConfigError(f"--max-gap must be 0 or more, got {self.max_gap}")
        if self.appearance is not None and not 0 < self.appearance <= 2:
            raise ConfigError(f"--appearance is a distance between unit embeddings, in (0, 2]; got {self.appearance}")
        if self.min_boxes < 1:
            raise ConfigError(f"--min-boxes must be at least 1, got {self.min_boxes}")


@dataclass(frozen=True)
class Observation:
    """One detection of a track: the video frame it is in, its time (seconds) and box."""

    frame: int
    time: float | None
    box: Box
    score: float


@dataclass
class Track:
    """One person in one camera.  ``embedding`` is the re-normalized mean of its detections'
    unit embeddings; ``thumbnail`` is the crop of its largest box (RGB)."""

    camera: int
    id: int
    observations: list[Observation] = field(default_factory=list)
    embedding_sum: np.ndarray | None = field(default=None, repr=False)
    thumbnail: np.ndarray | None = field(default=None, repr=False)
    thumbnail_box: Box | None = None
    last_step: int = 0
    velocity: tuple[float, float] = (0.0, 0.0)

    @property
    def embedding(self) -> np.ndarray:
        if self.embedding_sum is None:
            raise ConfigError(f"track {self.id} of camera {self.camera} has no detections")
        return l2_normalize(self.embedding_sum[None, :])[0]

    @property
    def first(self) -> Observation:
        return self.observations[0]

    @property
    def last(self) -> Observation:
        return self.observations[-1]

    @property
    def best_box(self) -> Box:
        """The largest box of the track, the one its thumbnail shows."""
        if self.thumbnail_box is None:
            raise ConfigError(f"track {self.id} of camera {self.camera} has no detections")
        return self.thumbnail_box

    def add(self, step: int, observation: Observation, crop: np.ndarray) -> None:
        if self.observations:
            steps = max(1, step - self.last_step)
            (x0, y0), (x1, y1) = _centre(self.last.box), _centre(observation.box)
            self.velocity = ((x1 - x0) / steps, (y1 - y0) / steps)
        area = observation.box[2] * observation.box[3]
        if self.thumbnail_box is None or area > self.thumbnail_box[2] * self.thumbnail_box[3]:
            self.thumbnail, self.thumbnail_box = crop, observation.box
        self.observations.append(observation)
        self.last_step = step

    def add_embedding(self, embedding: np.ndarray) -> None:
        """Count one detection's unit embedding into the track's mean."""
        value = np.asarray(embedding, dtype=np.float64)
        self.embedding_sum = value if self.embedding_sum is None else self.embedding_sum + value

    def predicted_box(self, step: int) -> Box:
        """Where the track should be at ``step``, moving at its last velocity."""
        x, y, w, h = self.last.box
        gap = step - self.last_step
        return (round(x + self.velocity[0] * gap), round(y + self.velocity[1] * gap), w, h)


def iou(a: Box, b: Box) -> float:
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    inter = max(0, min(ax1, bx1) - max(a[0], b[0])) * max(0, min(ay1, by1) - max(a[1], b[1]))
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def _centre(box: Box) -> tuple[float, float]:
    return box[0] + box[2] / 2, box[1] + box[3] / 2


class IouTracker:
    """Feed :meth:`update` once per kept frame, in order; :meth:`finish` returns the tracks."""

    def __init__(self, camera: int, config: TrackerConfig | None = None) -> None:
        self.camera = camera
        self.config = config or TrackerConfig()
        self._tracks: list[Track] = []
        self._live: list[Track] = []

    def update(
        self,
        step: int,
        observations: list[Observation],
        crops: list[np.ndarray],
        embeddings: np.ndarray | None = None,
    ) -> list[Track]:
        """Assign each observation of kept frame ``step`` to a track; returns those tracks.

        ``embeddings`` (one unit row per observation) are needed when ``appearance`` is set,
        and are then counted into the tracks; otherwise the caller adds them later with
        :meth:`Track.add_embedding`, which lets it embed crops of many frames in one batch.
        """
        cfg = self.config
        if cfg.appearance is not None and embeddings is None:
            raise ConfigError("an appearance tracker needs each detection's embedding")
        self._live = [t for t in self._live if step - t.last_step <= cfg.max_gap + 1]
        candidates: list[tuple[float, int, int]] = []
        for ti, track in enumerate(self._live):
            expected = track.predicted_box(step)
            for di, observation in enumerate(observations):
                overlap = iou(expected, observation.box)
                if overlap < cfg.iou:
                    continue
                score = overlap
                if cfg.appearance is not None and embeddings is not None:
                    if track.embedding_sum is None:
                        continue
                    distance = float(np.linalg.norm(track.embedding - embeddings[di]))
                    if distance > cfg.appearance:
                        continue
                    # Unit embeddings are at most 2 apart: closer looks raise the score.
                    score *= 1.0 - distance / 2.0
                candidates.append((score, ti, di))
        assigned: dict[int, Track] = {}
        taken: set[int] = set()
        for _, ti, di in sorted(candidates, key=lambda c: -c[0]):
            if ti in taken or di in assigned:
                continue
            taken.add(ti)
            assigned[di] = self._live[ti]
        tracks = []
        for di, observation in enumerate(observations):
            track = assigned.get(di)
            if track is None:
                track = Track(self.camera, len(self._tracks) + 1)
                self._tracks.append(track)
                self._live.append(track)
            track.add(step, observation, crops[di])
            if embeddings is not None:
                track.add_embedding(embeddings[di])
            tracks.append(track)
        return tracks

    def finish(self) -> list[Track]:
        """Tracks with at least ``min_boxes`` boxes, renumbered 1.. in order of first sighting."""
        kept = [t for t in self._tracks if len(t.observations) >= self.config.min_boxes]
        kept.sort(key=lambda t: (t.first.frame, t.id))
        for number, track in enumerate(kept, start=1):
            track.id = number
        self._live = []
        return kept
