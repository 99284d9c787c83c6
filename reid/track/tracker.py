"""Linking one camera's detections into tracks: ByteTrack's two-stage association on a
Kalman filter, with OC-SORT's observation-centric re-update.

Each track carries a constant-velocity Kalman filter over its box centre, aspect ratio and
height (the state and noise model of SORT and ByteTrack; :class:`KalmanBox`).  Each frame,
every track's filter predicts where its box is now.  First the confident detections
(score at least ``high_score``) are assigned to all tracks, seen last frame or lost, by
overlap (intersection over union) with those predicted boxes; then the tracks seen last
frame and still unmatched try the weak detections, which are often the same people half
hidden.  Each stage is one optimal assignment (scipy's ``linear_sum_assignment``) that
maximizes total overlap.  In the first stage a detection in the direction a track has
been moving costs a little less than one behind it (OC-SORT's observation-centric
momentum).  When embeddings are given, the distance between a detection and an
exponential moving average of the track's embeddings (BoT-SORT's) adds a small cost,
which decides between boxes that overlap alike (two people crossing), and a third stage
re-finds lost tracks by appearance alone, inside the filter's uncertainty around where
they should be (DeepSORT's appearance matching).  Only confident detections that no
track takes start new tracks; a new track not seen again in the next frame ends at once
(ByteTrack's unconfirmed tracks), and a track lost for longer than ``lost_seconds`` ends.
When a lost track is found again, its filter is re-run from its last detection through
boxes interpolated over the gap (OC-SORT's observation-centric re-update), so the
velocity it drifted on while unseen is replaced by the one the two detections imply.

References: Bewley et al., "Simple Online and Realtime Tracking", ICIP 2016 (SORT);
Zhang et al., "ByteTrack: Multi-Object Tracking by Associating Every Detection Box",
ECCV 2022; Cao et al., "Observation-Centric SORT: Rethinking SORT for Robust Multi-Object
Tracking", CVPR 2023; Wojke et al., "Simple Online and Realtime Tracking with a Deep
Association Metric", ICIP 2017 (DeepSORT); Aharon et al., "BoT-SORT: Robust Associations
Multi-Pedestrian Tracking", arXiv 2206.14651, 2022.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

from reid.decision import pair_distance
from reid.detect import Box
from reid.errors import ConfigError, ConfigValueError
from reid.models import l2_normalize
# The settings live where the command line reads them without the tracker; named here too.
from reid.track.config import REFERENCE_FPS, TrackerConfig

# Weight of the appearance term against 1 - IoU: at most 0.1 (unit embeddings are at most
# 2 apart), so it orders candidates that overlap alike and never outvotes clear geometry.
APPEARANCE_WEIGHT = 0.1
# Re-finding a lost track by appearance (DeepSORT, Wojke et al. 2017): its cosine distance
# of at most 0.2 between unit embeddings (a Euclidean distance of at most sqrt(0.4)), inside
# the 95% quantile of the chi-square distribution with 4 degrees of freedom around the
# track's Kalman prediction.
REFIND_COSINE = 0.2
REFIND_GATE = 9.4877
# OC-SORT's observation-centric momentum (Cao et al. 2023): directions measured over
# ``delta_t`` = 3 frames of its 30 fps, 0.1 s, the angle term weighted ``vdc_weight`` =
# 0.2 (its defaults); at another rate the steps are the frames of those 0.1 s (at least 1).
MOMENTUM_SECONDS = 3 / REFERENCE_FPS
MOMENTUM_STEPS = 3
MOMENTUM_WEIGHT = 0.2
# Kalman noise, as fractions of the box height per frame: SORT's and ByteTrack's values.
POSITION_NOISE = 1.0 / 20
VELOCITY_NOISE = 1.0 / 160


class KalmanBox:
    """A constant-velocity Kalman filter of one box: state (cx, cy, a, h, and their
    velocities per frame), with a = w / h; measurement (cx, cy, a, h).  Noise scales with
    the box height (ByteTrack's ``KalmanFilter``, after DeepSORT, Wojke et al. 2017)."""

    def __init__(self, box: tuple[float, float, float, float]) -> None:
        z = _measure(box)
        self.mean = np.concatenate([z, np.zeros(4)])
        h = z[3]
        std = [2 * POSITION_NOISE * h, 2 * POSITION_NOISE * h, 1e-2, 2 * POSITION_NOISE * h]
        std += [10 * VELOCITY_NOISE * h, 10 * VELOCITY_NOISE * h, 1e-5, 10 * VELOCITY_NOISE * h]
        self.covariance = np.diag(np.square(std))

    def predict(self, still_height: bool = False) -> None:
        """One frame ahead; ``still_height`` (a track not seen last frame) stops its height
        from drifting, as ByteTrack does for lost tracks."""
        if still_height:
            self.mean[7] = 0.0
        h = self.mean[3]
        std = [POSITION_NOISE * h, POSITION_NOISE * h, 1e-2, POSITION_NOISE * h]
        std += [VELOCITY_NOISE * h, VELOCITY_NOISE * h, 1e-5, VELOCITY_NOISE * h]
        self.mean = _MOTION @ self.mean
        self.covariance = _MOTION @ self.covariance @ _MOTION.T + np.diag(np.square(std))

    def update(self, box: tuple[float, float, float, float]) -> None:
        """Correct the state with a measured box."""
        h = self.mean[3]
        noise = np.diag(np.square([POSITION_NOISE * h, POSITION_NOISE * h, 1e-1, POSITION_NOISE * h]))
        projected = self.covariance[:4, :4] + noise
        gain = np.linalg.solve(projected, self.covariance[:4, :]).T
        self.mean = self.mean + gain @ (_measure(box) - self.mean[:4])
        self.covariance = self.covariance - gain @ projected @ gain.T

    def gating_distance(self, box: tuple[float, float, float, float]) -> float:
        """Squared Mahalanobis distance of a measured box from the predicted one."""
        h = self.mean[3]
        noise = np.diag(np.square([POSITION_NOISE * h, POSITION_NOISE * h, 1e-1, POSITION_NOISE * h]))
        residual = _measure(box) - self.mean[:4]
        return float(residual @ np.linalg.solve(self.covariance[:4, :4] + noise, residual))

    def copy(self) -> KalmanBox:
        twin = KalmanBox.__new__(KalmanBox)
        twin.mean, twin.covariance = self.mean.copy(), self.covariance.copy()
        return twin

    @property
    def box(self) -> Box:
        """The state's box as (x, y, width, height) pixels."""
        cx, cy, a, h = self.mean[:4]
        h = max(float(h), 1.0)
        w = max(float(a) * h, 1.0)
        return (round(cx - w / 2), round(cy - h / 2), round(w), round(h))


_MOTION = np.eye(8) + np.eye(8, k=4)


def _measure(box: tuple[float, float, float, float]) -> np.ndarray:
    x, y, w, h = (float(v) for v in box)
    return np.array([x + w / 2, y + h / 2, w / max(h, 1e-6), h])


def momentum_steps(fps: float | None) -> int:
    """:data:`MOMENTUM_SECONDS` in frames at ``fps`` (None: :data:`REFERENCE_FPS`), at least 1."""
    return max(1, round(MOMENTUM_SECONDS * (fps or REFERENCE_FPS)))


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
    embeddings counted in so far, ``smoothed_embedding`` their moving average of weight
    ``momentum`` (what the tracker matches detections with); ``identity`` and
    ``distance`` are the latest decision a caller recorded for it (see :meth:`decide`).
    ``last_step`` is the tracker step of its latest detection."""

    camera: int
    id: int
    observations: list[Observation] = field(default_factory=list)
    embedding_sum: np.ndarray | None = field(default=None, repr=False)
    smooth: np.ndarray | None = field(default=None, repr=False)
    momentum: float | None = None
    thumbnail: np.ndarray | None = field(default=None, repr=False)
    thumbnail_box: Box | None = None
    last_step: int = 0
    identity: str | None = None
    distance: float | None = None
    # The filter predicted up to ``_predicted_step``; ``_anchor`` is its state right after
    # the latest detection, from which a re-found track's gap is re-run.
    _filter: KalmanBox | None = field(default=None, repr=False)
    _anchor: KalmanBox | None = field(default=None, repr=False)
    _predicted_step: int = 0
    # Tracker step of each observation, and the unit (dx, dy) the track's centre moved in
    # over its last few detections (OC-SORT's velocity direction).
    _steps: list[int] = field(default_factory=list, repr=False)
    direction: np.ndarray | None = field(default=None, repr=False)
    # Steps back that OC-SORT's direction is measured over (:func:`momentum_steps`).
    steps_back: int = MOMENTUM_STEPS

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
        """Count ``observation`` (tracker step ``step``) into the track and its filter.

        After a gap, the filter restarts from its state at the previous detection and is
        fed boxes interpolated linearly across the gap (OC-SORT's re-update), then this one.
        """
        if self._filter is None or self._anchor is None:
            self._filter = KalmanBox(observation.box)
        else:
            gap = step - self.last_step
            if gap > 1 and step == self._predicted_step:
                self._filter = self._anchor.copy()
                start, end = np.asarray(self.last.box, float), np.asarray(observation.box, float)
                for k in range(1, gap):
                    self._filter.predict()
                    self._filter.update(tuple(start + (end - start) * k / gap))  # type: ignore[arg-type]
                self._filter.predict()
            self._filter.update(observation.box)
        self._anchor = self._filter.copy()
        self._predicted_step = step
        earlier = self.earlier_box(step)
        if earlier is not None:
            self.direction = _direction(earlier, observation.box)
        area = observation.box[2] * observation.box[3]
        if self.thumbnail_box is None or area > self.thumbnail_box[2] * self.thumbnail_box[3]:
            self.thumbnail, self.thumbnail_box = crop, observation.box
        self.observations.append(observation)
        self._steps.append(step)
        self.last_step = step

    def earlier_box(self, step: int) -> Box | None:
        """The box OC-SORT measures a direction from at ``step``: the detection of step
        ``step - steps_back``, else the nearest later one before ``step``, else the
        latest (None before the first)."""
        back_most = self.steps_back
        recent = dict(zip(self._steps[-back_most:], self.observations[-back_most:], strict=True))
        for back in range(back_most, 0, -1):
            if step - back in recent:
                return recent[step - back].box
        return self.observations[-1].box if self.observations else None

    def add_embedding(self, embedding: np.ndarray) -> None:
        """Count one detection's (D,) unit embedding into the track's mean and its moving
        average (``momentum`` the weight of the past, None: the mean)."""
        momentum = self.momentum
        value = np.asarray(embedding, dtype=np.float64)
        self.embedding_sum = value if self.embedding_sum is None else self.embedding_sum + value
        if momentum is None or self.smooth is None:
            self.smooth = self.embedding_sum / np.linalg.norm(self.embedding_sum) if momentum is None else value
        else:
            mixed = momentum * self.smooth + (1 - momentum) * value
            self.smooth = mixed / max(float(np.linalg.norm(mixed)), 1e-12)

    @property
    def smoothed_embedding(self) -> np.ndarray:
        """(D,) float32 unit vector the tracker compares detections with: the moving
        average of the track's embeddings (the mean when ``momentum`` is None)."""
        if self.smooth is None:
            raise ConfigError(f"track {self.id} of camera {self.camera} has no embeddings")
        return self.smooth.astype(np.float32)

    def decide(self, identity: str | None, distance: float | None) -> None:
        """Record the identity (None: unknown) and distance the track's mean embedding got."""
        self.identity, self.distance = identity, distance

    def gating_distance(self, step: int, box: Box) -> float:
        """Squared Mahalanobis distance of ``box`` from the track's prediction at ``step``."""
        self.predicted_box(step)
        assert self._filter is not None  # predicted_box raised otherwise
        return self._filter.gating_distance(box)

    def predicted_box(self, step: int) -> Box:
        """Where the track's filter puts it at ``step`` (not before its latest prediction)."""
        if self._filter is None:
            raise ConfigError(f"track {self.id} of camera {self.camera} has no detections")
        while self._predicted_step < step:
            # A track unseen in the frame before keeps its height (ByteTrack's lost tracks).
            self._filter.predict(still_height=self._predicted_step > self.last_step)
            self._predicted_step += 1
        return self._filter.box


def _direction(start: Box, end: Box) -> np.ndarray:
    """Unit (dx, dy) from the centre of ``start`` to that of ``end`` (zeros when equal)."""
    step = np.array([end[0] + end[2] / 2 - start[0] - start[2] / 2, end[1] + end[3] / 2 - start[1] - start[3] / 2])
    return step / (float(np.linalg.norm(step)) + 1e-6)


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two (x, y, width, height) boxes, 0..1."""
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    inter = max(0, min(ax1, bx1) - max(a[0], b[0])) * max(0, min(ay1, by1) - max(a[1], b[1]))
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


class Tracker:
    """Feed :meth:`update` once per kept frame, in order; :meth:`pop_ended` hands over the
    tracks that have ended since it was last called, :meth:`finish` ends the rest.

    ``fps``: the rate of the frames fed (kept frames per second; None: unknown, taken as
    :data:`REFERENCE_FPS`), which turns ``lost_seconds`` into frames.  Track ids are 1,
    2, ... in order of creation and never change, so they can be reported while the video
    is still running.
    """

    def __init__(self, camera: int = 0, config: TrackerConfig | None = None, fps: float | None = None) -> None:
        if fps is not None and not (math.isfinite(fps) and fps > 0):
            raise ConfigValueError("fps", f"must be above 0, got {fps}", sep=" ")
        self.camera = camera
        self.config = config or TrackerConfig()
        self.fps = fps
        self.max_lost = self.config.lost_frames(fps)
        self.momentum_steps = momentum_steps(fps)
        self._created = 0
        self._live: list[Track] = []
        self._ended: list[Track] = []

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
        thumbnail.  ``embeddings``, (N, D) float32 unit rows (an all-zero row: that
        detection has none), break ties between equal overlaps and are counted into the
        tracks; they are required when ``appearance`` is set.  Without them the caller may
        count embeddings in later with :meth:`Track.add_embedding`.  Raises ConfigError for
        mismatched lengths.
        """
        cfg = self.config
        if cfg.appearance is not None and embeddings is None:
            raise ConfigError("an appearance-gated tracker needs each detection's embedding")
        if crops is not None and len(crops) != len(observations):
            raise ConfigError(f"{len(crops)} crops for {len(observations)} detections")
        if embeddings is not None and len(embeddings) != len(observations):
            raise ConfigError(f"{len(embeddings)} embeddings for {len(observations)} detections")
        # A zero row is a detection without an embedding (its box held no pixels).
        embedded = [] if embeddings is None else [bool(np.any(row)) for row in embeddings]
        still, ended = [], []
        for t in self._live:
            gone = step - t.last_step - 1
            # A tentative track (fewer than min_boxes boxes, all in consecutive frames)
            # that misses a frame is gone at once (ByteTrack, SORT's probation).
            unconfirmed = len(t.observations) < max(cfg.min_boxes, 2) and gone >= 1
            (ended if gone > self.max_lost or unconfirmed else still).append(t)
        self._ended += ended
        self._live = still
        strong = [i for i, o in enumerate(observations) if cfg.high_score is None or o.score >= cfg.high_score]
        confident = set(strong)
        weak = [i for i in range(len(observations)) if i not in confident]
        assigned: dict[int, Track] = {}
        free = list(self._live)
        # Stage one: confident boxes against every track; stage two: weak boxes against the
        # tracks seen in the frame before only, as a weak box far from where a lost track was
        # is more likely noise.
        for wanted, least, pool in ((strong, cfg.iou, None), (weak, cfg.low_iou, step - 1)):
            candidates = [t for t in free if pool is None or t.last_step == pool]
            pairs = self._assign(step, candidates, wanted, observations, embeddings, embedded, least, pool is None)
            for ti, di in pairs:
                assigned[di] = candidates[ti]
            taken = {id(candidates[ti]) for ti, _ in pairs}
            free = [t for t in free if id(t) not in taken]
        if embeddings is not None:
            # Stage three: a person back from behind someone, too far from the lost track's
            # predicted box to overlap it, is re-found by appearance.
            lost = [t for t in free if t.last_step < step - 1 and t.smooth is not None]
            left = [i for i in strong if i not in assigned and embedded[i]]
            for ti, di in self._refind(step, lost, left, observations, embeddings):
                assigned[di] = lost[ti]
        results: list[Track | None] = []
        for di, observation in enumerate(observations):
            track = assigned.get(di)
            starts = cfg.start_score is None or observation.score >= cfg.start_score
            if track is None and di in confident and starts:
                self._created += 1
                track = Track(
                    self.camera, self._created, momentum=cfg.embedding_momentum, steps_back=self.momentum_steps
                )
                self._live.append(track)
            if track is not None:
                track.add(step, observation, None if crops is None else crops[di])
                if embeddings is not None and embedded[di]:
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
        embedded: list[bool],
        least_iou: float,
        momentum: bool = False,
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
                if embeddings is not None and track.smooth is not None and embedded[di]:
                    distance = float(pair_distance(track.smoothed_embedding[None], embeddings[di][None])[0])
                    if cfg.appearance is not None and distance > cfg.appearance:
                        continue
                    value += APPEARANCE_WEIGHT * distance / 2.0
                elif cfg.appearance is not None:
                    continue
                if momentum and track.direction is not None:
                    value -= self._momentum_bonus(step, track, observations[di])
                cost[ti, column] = value
        rows, columns = linear_sum_assignment(cost)
        return [(int(r), wanted[int(c)]) for r, c in zip(rows, columns, strict=True) if cost[r, c] < blocked]

    def _momentum_bonus(self, step: int, track: Track, observation: Observation) -> float:
        """OC-SORT's velocity-direction consistency: ``MOMENTUM_WEIGHT`` times (pi/2 - the
        angle between the track's direction and the one from its earlier box to the
        detection) / pi, times the detection's score (clipped to 0..1, as OC-SORT's are
        probabilities); -0.1..0.1."""
        earlier = track.earlier_box(step)
        assert earlier is not None and track.direction is not None  # a track with a direction has boxes
        cosine = float(np.clip(track.direction @ _direction(earlier, observation.box), -1.0, 1.0))
        agreement = (math.pi / 2 - math.acos(cosine)) / math.pi
        return MOMENTUM_WEIGHT * agreement * min(max(observation.score, 0.0), 1.0)

    def _refind(
        self, step: int, tracks: list[Track], wanted: list[int], observations: list[Observation], embeddings: np.ndarray
    ) -> list[tuple[int, int]]:
        """(track position, observation index) pairs of lost tracks re-found by appearance."""
        if not tracks or not wanted:
            return []
        blocked = 10.0
        cost = np.full((len(tracks), len(wanted)), blocked)
        for ti, track in enumerate(tracks):
            means = track.smoothed_embedding[None]
            for column, di in enumerate(wanted):
                cosine = float(pair_distance(means, embeddings[di][None])[0]) ** 2 / 2.0
                if cosine > REFIND_COSINE or track.gating_distance(step, observations[di].box) > REFIND_GATE:
                    continue
                cost[ti, column] = cosine
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
