"""Linking one camera's detections into tracks, two-stage as ByteTrack does.

Each frame, every live track's box is moved by its recent velocity to where it should
now be.  First the confident detections (score at least ``high_score``) are assigned to
the tracks by overlap (intersection over union) with those predicted boxes; then the
tracks still unmatched try the weak detections, which are often the same people half
hidden.  Each stage is one optimal assignment (scipy's ``linear_sum_assignment``) that
maximizes total overlap; when embeddings are given, the distance between a detection
and a track's mean embedding adds a small cost, which decides between boxes that
overlap alike (two people crossing).  Only confident detections that no track takes
start new tracks; a track unseen for more than ``max_gap`` frames ends.

Reference: Zhang et al., "ByteTrack: Multi-Object Tracking by Associating Every
Detection Box", ECCV 2022.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import linear_sum_assignment

from reid.decision import check_distance_threshold, pair_distance
from reid.detect import Box, Detector, for_tracking
from reid.errors import ConfigError
from reid.models import l2_normalize

# Weight of the appearance term against 1 - IoU: at most 0.1 (unit embeddings are at most
# 2 apart), so it orders candidates that overlap alike and never outvotes clear geometry.
APPEARANCE_WEIGHT = 0.1
# How much of the newest step's displacement enters the velocity: smooths detector jitter.
VELOCITY_SMOOTHING = 0.5


@dataclass
class TrackerConfig:
    """``iou``: least overlap that continues a track with a confident detection;
    ``low_iou``: least overlap for a weak one (stricter, as weak boxes are less sure).
    ``high_score``: detection score (in the detector's own units; HOG: SVM margin, where
    0.5 leaves about the weakest tenth of vtest.avi's boxes weak) from which a detection is
    confident; None (the default, as units differ per detector) counts every detection as
    confident, and the second stage then has nothing to do.
    ``max_gap``: frames a track may go unseen (a missed detection, an occlusion) before it
    ends.  ``appearance``: largest embedding distance (Euclidean between unit vectors,
    0..2) from a track's mean for a match, or None for no gate.  ``min_boxes``: tracks
    with fewer boxes are detector noise and are not reported when they end."""

    iou: float = 0.3
    low_iou: float = 0.5
    high_score: float | None = None
    max_gap: int = 5
    appearance: float | None = None
    min_boxes: int = 2

    def __post_init__(self) -> None:
        for name, value in (("iou", self.iou), ("low-iou", self.low_iou)):
            if not 0 < value <= 1:
                raise ConfigError(f"--{name} must be in (0, 1], got {value}")
        if self.high_score is not None and not math.isfinite(self.high_score):
            raise ConfigError(f"--track-high-score must be a number, got {self.high_score}")
        if self.max_gap < 0:
            raise ConfigError(f"--max-gap must be 0 or more, got {self.max_gap}")
        check_distance_threshold(self.appearance, "--appearance")
        if self.min_boxes < 1:
            raise ConfigError(f"--min-boxes must be at least 1, got {self.min_boxes}")


@dataclass(frozen=True)
class Observation:
    """One detection: the video frame it is in, its time (seconds, None for images), box
    (x, y, width, height in pixels) and detector score."""

    frame: int
    time: float | None
    box: Box
    score: float


@dataclass
class Track:
    """One person in one camera.  ``embedding`` is the re-normalized mean of the unit
    embeddings counted in so far; ``identity`` and ``distance`` are the latest decision a
    caller recorded for it (see :meth:`decide`)."""

    camera: int
    id: int
    observations: list[Observation] = field(default_factory=list)
    embedding_sum: np.ndarray | None = field(default=None, repr=False)
    thumbnail: np.ndarray | None = field(default=None, repr=False)
    thumbnail_box: Box | None = None
    last_step: int = 0
    velocity: tuple[float, float] = (0.0, 0.0)
    identity: str | None = None
    distance: float | None = None

    @property
    def embedding(self) -> np.ndarray:
        """(D,) float32 unit vector: the direction of the mean of the track's embeddings."""
        if self.embedding_sum is None:
            raise ConfigError(f"track {self.id} of camera {self.camera} has no embeddings")
        return l2_normalize(self.embedding_sum[None, :].astype(np.float32))[0]

    @property
    def first(self) -> Observation:
        return self.observations[0]

    @property
    def last(self) -> Observation:
        return self.observations[-1]

    @property
    def best_box(self) -> Box:
        """The largest box of the track (the one its thumbnail shows, when crops are kept)."""
        if self.thumbnail_box is None:
            raise ConfigError(f"track {self.id} of camera {self.camera} has no detections")
        return self.thumbnail_box

    def add(self, step: int, observation: Observation, crop: np.ndarray | None = None) -> None:
        if self.observations:
            steps = max(1, step - self.last_step)
            (x0, y0), (x1, y1) = _centre(self.last.box), _centre(observation.box)
            dx, dy = (x1 - x0) / steps, (y1 - y0) / steps
            if len(self.observations) == 1:
                self.velocity = (dx, dy)
            else:
                keep = 1.0 - VELOCITY_SMOOTHING
                self.velocity = (
                    keep * self.velocity[0] + VELOCITY_SMOOTHING * dx,
                    keep * self.velocity[1] + VELOCITY_SMOOTHING * dy,
                )
        area = observation.box[2] * observation.box[3]
        if self.thumbnail_box is None or area > self.thumbnail_box[2] * self.thumbnail_box[3]:
            self.thumbnail, self.thumbnail_box = crop, observation.box
        self.observations.append(observation)
        self.last_step = step

    def add_embedding(self, embedding: np.ndarray) -> None:
        """Count one detection's (D,) unit embedding into the track's mean."""
        value = np.asarray(embedding, dtype=np.float64)
        self.embedding_sum = value if self.embedding_sum is None else self.embedding_sum + value

    def decide(self, identity: str | None, distance: float | None) -> None:
        """Record the identity (None: unknown) and distance the track's mean embedding got."""
        self.identity, self.distance = identity, distance

    def predicted_box(self, step: int) -> Box:
        """Where the track should be at ``step``, moving at its recent velocity."""
        x, y, w, h = self.last.box
        gap = step - self.last_step
        return (round(x + self.velocity[0] * gap), round(y + self.velocity[1] * gap), w, h)


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two (x, y, width, height) boxes, 0..1."""
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    inter = max(0, min(ax1, bx1) - max(a[0], b[0])) * max(0, min(ay1, by1) - max(a[1], b[1]))
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def _centre(box: Box) -> tuple[float, float]:
    return box[0] + box[2] / 2, box[1] + box[3] / 2


class Tracker:
    """Feed :meth:`update` once per kept frame, in order; :meth:`pop_ended` hands over the
    tracks that have ended since it was last called, :meth:`finish` ends the rest.

    Track ids are 1, 2, ... in order of creation and never change, so they can be
    reported while the video is still running.
    """

    def __init__(self, camera: int = 0, config: TrackerConfig | None = None) -> None:
        self.camera = camera
        self.config = config or TrackerConfig()
        self._created = 0
        self._live: list[Track] = []
        self._ended: list[Track] = []

    @classmethod
    def for_detector(
        cls, detector: Detector, camera: int = 0, config: TrackerConfig | None = None
    ) -> tuple[Detector, Tracker]:
        """The detector to feed a tracker of ``config`` and that tracker: a detector with a
        weak tier (:func:`reid.detect.for_tracking`) gives its weak boxes too, and unless
        ``config`` sets ``high_score`` the detector's confident score is it."""
        config = config or TrackerConfig()
        feed, confident = for_tracking(detector)
        if config.high_score is None:
            config = replace(config, high_score=confident)
        return feed, cls(camera, config)

    def update(
        self,
        step: int,
        observations: list[Observation],
        crops: list[np.ndarray] | None = None,
        embeddings: np.ndarray | None = None,
    ) -> list[Track | None]:
        """Assign each observation of kept frame ``step`` to a track.

        Returns one entry per observation: its track, or None for a weak detection that no
        track took (it starts none).  ``crops`` (RGB) keep each track's largest crop as its
        thumbnail.  ``embeddings``, (N, D) float32 unit rows, break ties between equal
        overlaps and are counted into the tracks; they are required when ``appearance`` is
        set.  Without them the caller may count embeddings in later with
        :meth:`Track.add_embedding`.  Raises ConfigError for mismatched lengths.
        """
        cfg = self.config
        if cfg.appearance is not None and embeddings is None:
            raise ConfigError("an appearance-gated tracker needs each detection's embedding")
        if crops is not None and len(crops) != len(observations):
            raise ConfigError(f"{len(crops)} crops for {len(observations)} detections")
        if embeddings is not None and len(embeddings) != len(observations):
            raise ConfigError(f"{len(embeddings)} embeddings for {len(observations)} detections")
        still = [t for t in self._live if step - t.last_step <= cfg.max_gap + 1]
        self._ended += [t for t in self._live if step - t.last_step > cfg.max_gap + 1]
        self._live = still
        strong = [i for i, o in enumerate(observations) if cfg.high_score is None or o.score >= cfg.high_score]
        confident = set(strong)
        weak = [i for i in range(len(observations)) if i not in confident]
        assigned: dict[int, Track] = {}
        free = list(self._live)
        for wanted, least in ((strong, cfg.iou), (weak, cfg.low_iou)):
            pairs = self._assign(step, free, wanted, observations, embeddings, least)
            for ti, di in pairs:
                assigned[di] = free[ti]
            taken = {ti for ti, _ in pairs}
            free = [t for ti, t in enumerate(free) if ti not in taken]
        results: list[Track | None] = []
        for di, observation in enumerate(observations):
            track = assigned.get(di)
            if track is None and di in confident:
                self._created += 1
                track = Track(self.camera, self._created)
                self._live.append(track)
            if track is not None:
                track.add(step, observation, None if crops is None else crops[di])
                if embeddings is not None:
                    track.add_embedding(embeddings[di])
            results.append(track)
        return results

    def _assign(
        self,
        step: int,
        tracks: list[Track],
        wanted: list[int],
        observations: list[Observation],
        embeddings: np.ndarray | None,
        least_iou: float,
    ) -> list[tuple[int, int]]:
        """(track position, observation index) pairs of the cheapest one-to-one assignment."""
        if not tracks or not wanted:
            return []
        cfg = self.config
        # Pairs that may not match cost more than any allowed pair (each costs at most 1.1).
        blocked = 10.0
        cost = np.full((len(tracks), len(wanted)), blocked)
        for ti, track in enumerate(tracks):
            expected = track.predicted_box(step)
            for column, di in enumerate(wanted):
                overlap = iou(expected, observations[di].box)
                if overlap < least_iou:
                    continue
                value = 1.0 - overlap
                if embeddings is not None and track.embedding_sum is not None:
                    distance = float(pair_distance(track.embedding[None], embeddings[di][None])[0])
                    if cfg.appearance is not None and distance > cfg.appearance:
                        continue
                    value += APPEARANCE_WEIGHT * distance / 2.0
                elif cfg.appearance is not None:
                    continue
                cost[ti, column] = value
        rows, columns = linear_sum_assignment(cost)
        return [(int(r), wanted[int(c)]) for r, c in zip(rows, columns, strict=True) if cost[r, c] < blocked]

    def pop_ended(self) -> list[Track]:
        """Tracks that ended since the last call and have at least ``min_boxes`` boxes."""
        ended = [t for t in self._ended if len(t.observations) >= self.config.min_boxes]
        self._ended = []
        return ended

    def finish(self) -> list[Track]:
        """End every live track; returns all not yet handed over (at least ``min_boxes``
        boxes), in order of first sighting."""
        self._ended += self._live
        self._live = []
        return sorted(self.pop_ended(), key=lambda t: (t.first.frame, t.id))
