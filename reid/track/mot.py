"""Tracking MOTChallenge detection files and finishing tracks (joining tracklets,
interpolating gaps, smoothing).

The files themselves, their rows, reading and writing, are :mod:`reid.track.motfile`
(re-exported here).
"""

from __future__ import annotations

import configparser
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np
from scipy.linalg import solveh_banded
from scipy.optimize import linear_sum_assignment

from reid.detect import Box
from reid.errors import ConfigError, ConfigValueError, DataError
from reid.track.motfile import MAX_LINE_CHARS, MOT_DECIMALS, MotRow, read_mot, write_mot
from reid.track.tracker import REFERENCE_FPS, REFIND_GATE, KalmanBox, Observation, Track, Tracker, TrackerConfig

# Joining tracklets offline (:func:`link_tracklets`): the next tracklet's first box inside
# the 95% chi-square gate (4 degrees of freedom) of the earlier one's Kalman prediction,
# the gate the tracker re-finds lost tracks in; where both have embeddings, DeepSORT's
# largest cosine distance between the same person's embeddings (0.2) as a further gate.
LINK_GATE = REFIND_GATE
LINK_COSINE = 0.2
# Where both have embeddings, StrongSORT's AFLink window (Du et al. 2023, ``thrS``: 75
# pixels between one's last box centre and the next one's first) admits a join as well.
LINK_PIXELS = 75.0
# StrongSORT's Gaussian-smoothed interpolation (Du et al. 2023) and the noise its
# regressor adds to the kernel; tau in frames at the reference 30 fps: 30, one second,
# where StrongSORT's is 10 (a third of a second): measured over several MOTChallenge
# sequences (docs/tracking.md), tuned on PETS09-S2L1 and KITTI-13.
GSI_TAU = 30.0
STRONGSORT_TAU = 10.0
# ... and a length scale of at most one second: StrongSORT's bound (tau**2 frames, 30 s
# here) lets a short track be smoothed over many seconds, which a frame rate taken wrongly
# (a file tracked at the 30 fps default that was filmed at 7) turns into boxes lagging
# behind every turn (docs/tracking.md).
GSI_LONGEST_SECONDS = 1.0
GSI_NOISE = 1e-10
# Kernel entries of frames more than this many length scales apart (exp(-reach**2 / 2) <
# 1e-30) are dropped: far below the noise, they change no box by a measurable amount.
GSI_REACH = 11.8
# Gap filling (:func:`finish_tracks`): gaps of up to FILL_SECONDS are filled, and only
# where the box after the gap overlaps by FILL_CONSISTENCY the one before it carried on at
# the track's velocity over the CONSISTENCY_STEPS frames before the gap.  Measured on
# MOTChallenge sequences (docs/tracking.md, benchmarks/bench_mot_sequences.py).
FILL_SECONDS = 1.0
FILL_CONSISTENCY = 0.3
CONSISTENCY_STEPS = 3
# A detection file whose scores are probabilities is tracked with ByteTrack's thresholds
# (Zhang et al. 2022: confident from 0.6, new tracks from 0.1 above it) unless told
# otherwise, so that a detector's whole output (every box from 0.1) is safe to track.
FILE_HIGH_SCORE = 0.6
FILE_START_SCORE = 0.7
# MOTChallenge's sequence description: ``SEQ/seqinfo.ini`` beside ``SEQ/det/det.txt``.
SEQINFO = "seqinfo.ini"


def interpolate(rows: Iterable[MotRow], max_gap: int, consistency: float | None = None) -> list[MotRow]:
    """``rows`` with the boxes missing from short gaps of each track filled in.

    Where track ``id`` (not -1) is seen in frames ``a`` and ``b`` with ``1 < b - a <=
    max_gap + 1`` and in none between, each frame between gets a box interpolated linearly
    from the two (ByteTrack's post-processing, Zhang et al. 2022, §4.1), with the lower of
    their two scores.  With ``consistency`` (an IoU in 0..1), a gap is filled only where
    the track moved across it as it moved before: the box at ``b`` overlaps by at least
    ``consistency`` the box at ``a`` carried on at the track's velocity over its boxes of
    the :data:`CONSISTENCY_STEPS` frames before ``a`` (a gap right after a track's first
    box has no velocity and is filled).  A moving camera, or a track that changed people
    while unseen, breaks that, and a straight line between the two ends would draw boxes
    where nobody is.  Rows of id -1 come back as they are.
    """
    rows = list(rows)
    tracks: dict[int, list[MotRow]] = defaultdict(list)
    for row in rows:
        if row.id != -1:
            tracks[row.id].append(row)
    filled = list(rows)
    for seen in tracks.values():
        seen.sort(key=lambda r: r.frame)
        for position, (before, after) in enumerate(zip(seen, seen[1:], strict=False)):
            gap = after.frame - before.frame
            if not 1 < gap <= max_gap + 1:
                continue
            if consistency is not None and not _consistent(seen[:position + 1], after, consistency):
                continue
            score = min(before.score, after.score)
            for step in range(1, gap):
                t = step / gap
                box = tuple(a + t * (b - a) for a, b in zip(before.box, after.box, strict=True))
                filled.append(MotRow(before.frame + step, before.id, box, score))  # type: ignore[arg-type]
    return filled


def _consistent(earlier: list[MotRow], after: MotRow, least: float) -> bool:
    """Whether ``after`` overlaps by ``least`` the last of ``earlier`` (frame order) carried
    on at the velocity of its boxes over the :data:`CONSISTENCY_STEPS` frames before it."""
    last = earlier[-1]
    back = [r for r in earlier[:-1] if last.frame - r.frame <= CONSISTENCY_STEPS]
    if not back:
        return True
    start, end = np.asarray(back[0].box, float), np.asarray(last.box, float)
    velocity = (end - start) / (last.frame - back[0].frame)
    ahead = end + velocity * (after.frame - last.frame)
    return _iou(ahead, np.asarray(after.box, float)) >= least


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two (x, y, w, h) float boxes (0 for a box without area)."""
    if a[2] <= 0 or a[3] <= 0:
        return 0.0
    width = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    height = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    inter = max(width, 0.0) * max(height, 0.0)
    return float(inter / (a[2] * a[3] + b[2] * b[3] - inter))


def gsi_length_scale(
    boxes: int, tau: float = GSI_TAU, fps: float | None = None, longest: float | None = GSI_LONGEST_SECONDS
) -> float:
    """The length scale, in frames at ``fps`` (None: :data:`reid.track.tracker.REFERENCE_FPS`),
    that :func:`gaussian_smooth` smooths a track of ``boxes`` boxes over: StrongSORT's
    ``clip(tau * log(tau**3 / n), 1 / tau, tau**2)`` with ``n`` and the result in frames at
    the reference rate, ``n = boxes * REFERENCE_FPS / fps``, and at most ``longest``
    seconds (None: no more than StrongSORT's bound).  Raises ConfigError for a ``tau`` or
    ``fps`` that is not above 0 or fewer than 1 box."""
    if not (math.isfinite(tau) and tau > 0):
        raise ConfigError(f"the smoothing scale tau must be above 0, got {tau}")
    if fps is not None and not (math.isfinite(fps) and fps > 0):
        raise ConfigValueError("fps", f"must be above 0, got {fps}", sep=" ")
    if boxes < 1:
        raise ConfigError(f"a track to smooth needs at least 1 box, got {boxes}")
    scale = (fps or REFERENCE_FPS) / REFERENCE_FPS
    length = float(np.clip(tau * math.log(tau**3 * scale / boxes), 1 / tau, tau**2)) * scale
    return length if longest is None else min(length, longest * (fps or REFERENCE_FPS))


def gaussian_smooth(
    rows: Iterable[MotRow], tau: float = GSI_TAU, fps: float | None = None, longest: float | None = GSI_LONGEST_SECONDS
) -> list[MotRow]:
    """``rows`` with each track's boxes smoothed over time: StrongSORT's Gaussian-smoothed
    interpolation (GSI; Du et al., "StrongSORT: Make DeepSORT Great Again", IEEE TMM 2023,
    §3.4), applied after the gaps are filled.

    Each of a track's x, y, width and height (pixels) is regressed on its frame numbers by
    a Gaussian process with a radial basis kernel of length scale ``clip(tau * log(tau**3 /
    n), 1 / tau, tau**2)`` frames for a track of ``n`` boxes, and each box is replaced by the
    regression's mean at its frame (a zero-mean prior and a noise of 1e-10 on the kernel's
    diagonal, as its code runs scikit-learn's regressor).  ``tau`` is in frames at
    :data:`reid.track.tracker.REFERENCE_FPS` (:data:`GSI_TAU`, 30, one second, where the
    authors' is :data:`STRONGSORT_TAU`, 10); at ``fps`` (None: that rate) the
    track's length and the length scale are taken in those frames and converted back, so
    a track is smoothed over the same seconds at any rate, and never over more than
    ``longest`` seconds (:func:`gsi_length_scale`).  Scores, frames and ids are kept;
    rows of id -1 come back as they are.  Raises ConfigError for a ``tau`` or ``fps`` that
    is not above 0.
    """
    gsi_length_scale(1, tau, fps, longest)
    rows = list(rows)
    tracks: dict[int, list[int]] = defaultdict(list)
    for position, row in enumerate(rows):
        if row.id != -1:
            tracks[row.id].append(position)
    smoothed = list(rows)
    for positions in tracks.values():
        positions.sort(key=lambda p: rows[p].frame)
        length = gsi_length_scale(len(positions), tau, fps, longest)
        frames = np.array([rows[p].frame for p in positions], dtype=np.float64)
        if np.exp(-0.5 / length**2) < GSI_NOISE:
            # Neighbouring frames are all but uncorrelated (a long track's length scale of
            # 1 / tau): the regression gives the boxes back, so the kernel is not built.
            continue
        boxes = np.array([rows[p].box for p in positions], dtype=np.float64)
        for p, (x, y, w, h) in zip(positions, _regression_mean(frames, boxes, length).tolist(), strict=True):
            smoothed[p] = MotRow(rows[p].frame, rows[p].id, (x, y, w, h), rows[p].score)
    return smoothed


def _regression_mean(frames: np.ndarray, values: np.ndarray, length: float) -> np.ndarray:
    """The Gaussian process regression's mean at ``frames`` ((n,) increasing) of ``values``
    ((n, k)): K (K + noise I)^-1 values for the radial basis kernel K of ``length``.

    K is kept as a band: entries of frames more than :data:`GSI_REACH` length scales apart
    are below 1e-30 and left out, so a long track costs memory in its length, not its
    square, and the system is solved by a banded Cholesky factorization."""
    n = len(frames)
    reach = GSI_REACH * length
    band = 0
    while band + 1 < n and float(np.min(frames[band + 1 :] - frames[: -(band + 1)])) <= reach:
        band += 1
    # Upper banded form: row band - k holds the k-th superdiagonal, right-aligned.
    stored = np.zeros((band + 1, n))
    for k in range(band + 1):
        stored[band - k, k:] = np.exp(-0.5 * np.square((frames[k:] - frames[: n - k]) / length))
    system = stored.copy()
    system[band] += GSI_NOISE
    weights = solveh_banded(system, values)
    fitted = stored[band][:, None] * weights
    for k in range(1, band + 1):
        diagonal = stored[band - k, k:][:, None]
        fitted[:-k] += diagonal * weights[k:]
        fitted[k:] += diagonal * weights[:-k]
    return fitted


def finish_tracks(
    rows: Iterable[MotRow],
    looks: Mapping[int, np.ndarray],
    max_gap: int,
    fps: float | None,
    link: bool = True,
    fill_seconds: float = FILL_SECONDS,
    consistency: float | None = FILL_CONSISTENCY,
    tau: float = GSI_TAU,
    longest: float | None = GSI_LONGEST_SECONDS,
) -> list[MotRow]:
    """A tracker's rows made final for MOT output: tracklets that continue one another
    joined (:func:`link_tracklets` within ``max_gap`` frames, when ``link``), the gaps of
    each track of at most ``fill_seconds`` (and ``max_gap`` frames) filled where the track's
    motion is consistent across them (:func:`interpolate` with ``consistency``), then each
    track smoothed (:func:`gaussian_smooth` with ``tau`` and ``longest`` at ``fps``).
    ``reid track`` and ``reid query --mot`` both end with it."""
    rows = link_tracklets(rows, looks, max_gap) if link else list(rows)
    fill = min(max_gap, round(fill_seconds * (fps or REFERENCE_FPS)))
    return gaussian_smooth(interpolate(rows, fill, consistency), tau=tau, fps=fps, longest=longest)


@dataclass(frozen=True)
class FrameRate:
    """The frame rate a detection file is tracked at (frames a second) and where it came
    from: ``"given"`` (``--fps``), ``"seqinfo.ini"`` (``path`` names the file), ``"video"``
    (the container of the video the boxes are cut from) or ``"default"``
    (:data:`reid.track.tracker.REFERENCE_FPS`)."""

    fps: float
    source: str
    path: Path | None = None

    def describe(self) -> str:
        """One line, e.g. ``7 fps (seqinfo.ini: SEQ/seqinfo.ini)``."""
        where = f"{self.source}: {self.path}" if self.path is not None else self.source
        return f"{self.fps:g} fps ({where})"


def seqinfo_fps(detections: Path) -> FrameRate | None:
    """The ``frameRate`` of the MOTChallenge ``seqinfo.ini`` beside ``detections`` (in its
    folder, or the folder above, as ``SEQ/det/det.txt`` lies below ``SEQ/seqinfo.ini``);
    None when there is none.  Raises DataError naming the file when it is not an INI file
    or its ``[Sequence] frameRate`` is missing or not a number above 0."""
    folder = Path(detections).parent
    for candidate in (folder / SEQINFO, folder.parent / SEQINFO):
        if not candidate.is_file():
            continue
        info = configparser.ConfigParser()
        try:
            info.read_string(candidate.read_text(encoding="utf-8")[:MAX_LINE_CHARS * 100])
            text = info["Sequence"]["frameRate"]
        except (configparser.Error, KeyError, UnicodeDecodeError, OSError):
            raise DataError(f"{candidate}: no [Sequence] frameRate in this seqinfo.ini") from None
        try:
            fps = float(text)
        except ValueError:
            raise DataError(f"{candidate}: frameRate {text[:40]!r} is not a number") from None
        if not (math.isfinite(fps) and fps > 0):
            raise DataError(f"{candidate}: frameRate {text[:40]!r} must be above 0")
        return FrameRate(fps, SEQINFO, candidate)
    return None


def detections_fps(detections: Path, given: float | None = None, video_fps: float | None = None) -> FrameRate:
    """The frame rate to track ``detections`` at: ``given`` when set, else the
    :func:`seqinfo_fps` beside the file, else ``video_fps`` (the container's rate of the
    video the boxes are cut from, when known), else
    :data:`reid.track.tracker.REFERENCE_FPS`.  Raises ConfigValueError for a ``given``
    rate not above 0 and DataError for a malformed seqinfo.ini."""
    if given is not None:
        if not (math.isfinite(given) and given > 0):
            raise ConfigValueError("fps", f"must be above 0, got {given}", sep=" ")
        return FrameRate(given, "given")
    found = seqinfo_fps(detections)
    if found is not None:
        return found
    if video_fps is not None and math.isfinite(video_fps) and video_fps > 0:
        return FrameRate(video_fps, "video")
    return FrameRate(REFERENCE_FPS, "default")


def file_config(config: TrackerConfig, rows: Iterable[MotRow]) -> TrackerConfig:
    """``config`` for a detection file's ``rows``: where it sets no ``high_score`` and every
    score is a probability (0..1), ByteTrack's :data:`FILE_HIGH_SCORE` and, where it sets
    no ``start_score`` either, :data:`FILE_START_SCORE`; scores outside 0..1 are no
    probabilities (a margin, a count), and every box stays confident."""
    if config.high_score is not None or not all(0.0 <= r.score <= 1.0 for r in rows):
        return config
    start = FILE_START_SCORE if config.start_score is None else config.start_score
    return replace(config, high_score=FILE_HIGH_SCORE, start_score=start)


def track_rows(
    rows: Iterable[MotRow],
    tracker: Tracker,
    embeddings: np.ndarray | None = None,
    ended: list[Track] | None = None,
) -> list[MotRow]:
    """Link a detection file's rows into tracks with ``tracker``, frame by frame.

    Frame numbers are the tracker's steps, so a frame without detections still counts as
    one.  ``embeddings``: (len(rows), D) float32, row i's unit embedding (zeros: none), in
    the order of ``rows``.  Returns one row per detection a track took, with the
    detection's own box and score and the track's id, for tracks with at least
    ``tracker.config.min_boxes`` boxes; the ids of ``rows`` are ignored.  Boxes are rounded
    to pixels for linking only.  ``ended``, when given, receives the reported tracks.
    Raises ConfigError when ``embeddings`` has another length.
    """
    rows = list(rows)
    if embeddings is not None and len(embeddings) != len(rows):
        raise ConfigError(f"{len(embeddings)} embeddings for {len(rows)} detections")
    frames: dict[int, list[int]] = defaultdict(list)
    for position, row in enumerate(rows):
        frames[row.frame].append(position)
    linked: list[tuple[MotRow, Track]] = []
    for frame in range(1, max(frames, default=0) + 1):
        here = [rows[p] for p in frames.get(frame, [])]
        observations = [Observation(frame, None, pixel_box(r.box), r.score) for r in here]
        features = None if embeddings is None else embeddings[frames.get(frame, [])]
        for row, track in zip(here, tracker.update(frame, observations, embeddings=features), strict=True):
            if track is not None:
                linked.append((row, track))
    finished = tracker.finish()
    if ended is not None:
        ended.extend(finished)
    least = tracker.config.min_boxes
    kept = {id(t) for _, t in linked if len(t.observations) >= least}
    return [MotRow(r.frame, t.id, r.box, r.score) for r, t in linked if id(t) in kept]


def track_looks(tracks: Iterable[Track]) -> dict[int, np.ndarray]:
    """Each track's (D,) float32 unit mean embedding by track id, for :func:`link_tracklets`;
    tracks without embeddings are left out."""
    return {t.id: t.embedding for t in tracks if t.embedding_sum is not None}


def link_tracklets(
    rows: Iterable[MotRow], looks: Mapping[int, np.ndarray], max_gap: int, cosine: float = LINK_COSINE
) -> list[MotRow]:
    """``rows`` with the ids of tracklets that continue one another made one.

    Tracklet B may continue tracklet A when B starts after A ends, at most ``max_gap``
    frames later (:func:`track_detection_file` takes the tracker's lost time, StrongSORT's
    AFLink window, Du et al. 2023: at most 30 frames, 1 s at 30 fps), and:

    - without embeddings for both (``looks``: (D,) unit mean embeddings by track id,
      :func:`track_looks`): B's first box lies inside the 95% chi-square gate
      (:data:`LINK_GATE`, 4 degrees of freedom) of A's constant-velocity Kalman filter
      (the tracker's :class:`reid.track.tracker.KalmanBox`, fitted to A's boxes as the
      tracker fits it, then predicted across the gap), the motion gate DeepSORT (Wojke et
      al. 2017) matches within; the cost is that squared Mahalanobis distance over the gate;
    - with embeddings for both: their cosine distance is at most ``cosine`` (DeepSORT's
      0.2) and B's first box lies inside that gate or within :data:`LINK_PIXELS` of A's
      last box centre (AFLink's ``thrS``: appearance vouches for a person who turned while
      unseen); the cost is the cosine distance over ``cosine``.

    Each tracklet continues at most one and is continued by at most one, chosen by one
    optimal assignment on those costs (each 0..1 against its own threshold), a pair
    outside the gates costing just over 1 (DeepSORT's matching does the same); chains of
    joined tracklets take the id of their first.  Rows of id -1 are never joined.  Row
    order is kept.
    """
    rows = list(rows)
    tracklets: dict[int, list[MotRow]] = defaultdict(list)
    for row in rows:
        if row.id != -1:
            tracklets[row.id].append(row)
    for seen in tracklets.values():
        seen.sort(key=lambda r: r.frame)
    starts = sorted((seen[0].frame, i) for i, seen in tracklets.items())
    pairs: dict[tuple[int, int], float] = {}
    for before, seen in tracklets.items():
        end = seen[-1].frame
        ahead = _fitted(seen)
        predicted: list[KalmanBox] = []
        for start, after in starts:
            gap = start - end
            if not 0 < gap <= max_gap:
                continue
            first = tracklets[after][0]
            while len(predicted) < gap:
                # After the first frame unseen the height stays, as the tracker keeps it.
                ahead.predict(still_height=bool(predicted))
                predicted.append(ahead.copy())
            moved = predicted[gap - 1].gating_distance(first.box)
            if before in looks and after in looks:
                look = 1.0 - float(looks[before] @ looks[after])
                near = _centre_distance(seen[-1].box, first.box) <= LINK_PIXELS
                if look <= cosine and (near or moved <= LINK_GATE):
                    pairs[before, after] = look / max(cosine, 1e-12)
            elif moved <= LINK_GATE:
                pairs[before, after] = moved / LINK_GATE
    if not pairs:
        return rows
    heads = sorted({a for a, _ in pairs})
    tails = sorted({b for _, b in pairs})
    blocked = 1.0 + 1e-5
    row_of, column_of = {i: n for n, i in enumerate(heads)}, {i: n for n, i in enumerate(tails)}
    cost = np.full((len(heads), len(tails)), blocked)
    for (before, after), distance in pairs.items():
        cost[row_of[before], column_of[after]] = distance
    chosen, taken = linear_sum_assignment(cost)
    successor = {heads[a]: tails[b] for a, b in zip(chosen, taken, strict=True) if cost[a, b] < blocked}
    renamed: dict[int, int] = {}
    for head in set(successor) - set(successor.values()):
        follower = successor.get(head)
        while follower is not None:
            renamed[follower] = head
            follower = successor.get(follower)
    return [MotRow(r.frame, renamed.get(r.id, r.id), r.box, r.score) for r in rows]


def _centre_distance(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    return math.hypot(a[0] + a[2] / 2 - b[0] - b[2] / 2, a[1] + a[3] / 2 - b[1] - b[3] / 2)


def _fitted(seen: list[MotRow]) -> KalmanBox:
    """The Kalman filter of a tracklet's boxes (frame order) right after its last one, fed
    as the tracker feeds it: a frame unseen inside the tracklet gets the box interpolated
    between its neighbours (OC-SORT's re-update)."""
    kalman = KalmanBox(seen[0].box)
    for before, after in zip(seen, seen[1:], strict=False):
        gap = after.frame - before.frame
        start, end = np.asarray(before.box, float), np.asarray(after.box, float)
        for k in range(1, gap):
            kalman.predict()
            kalman.update(tuple(start + (end - start) * k / gap))  # type: ignore[arg-type]
        kalman.predict()
        kalman.update(after.box)
    return kalman


def pixel_box(box: tuple[float, float, float, float]) -> Box:
    """A MOT row's float box rounded to whole pixels, at least 1 x 1."""
    x, y, w, h = box
    return (round(x), round(y), max(1, round(w)), max(1, round(h)))


class Appearance(Protocol):
    """What embeds a detection file's boxes (:class:`reid.track.appearance.VideoAppearance`)."""

    embedded: int

    def embed(self, rows: list[MotRow]) -> np.ndarray:
        """(len(rows), D) float32 unit rows, zeros for a box without an embedding."""
        ...


@dataclass(frozen=True)
class TrackedFile:
    """What :func:`track_detection_file` did: detections read, frames, boxes written,
    tracks made, detections embedded (0 without appearance), and the frame rate it
    assumed and where that came from."""

    detections: int
    frames: int
    boxes: int
    tracks: int
    embedded: int = 0
    rate: FrameRate = FrameRate(REFERENCE_FPS, "default")
    config: TrackerConfig | None = None


def track_detection_file(
    detections: Path,
    out: Path,
    config: TrackerConfig | None = None,
    fps: float | None = None,
    appearance: Appearance | None = None,
    link: bool = True,
    video_fps: float | None = None,
) -> TrackedFile:
    """Track the MOT detection file ``detections`` and write the tracks to ``out`` in MOT
    format, finished by :func:`finish_tracks` (joined, gaps filled, smoothed).

    ``config`` (None: the defaults) is made the file's by :func:`file_config`: ByteTrack's
    score thresholds where it sets none and the scores are probabilities.
    ``fps``: the detections' frame rate, which turns the tracker's times in seconds into
    frames; None: the rate :func:`detections_fps` finds (a seqinfo.ini beside the file,
    else ``video_fps``, the container's rate of the video the boxes come from, else
    :data:`reid.track.tracker.REFERENCE_FPS`).  ``appearance`` (None: boxes alone) embeds
    each detection for the tracker's appearance terms.  ``link`` joins tracklets that
    continue one another
    (:func:`link_tracklets`, within the tracker's lost time, by motion and, with
    appearance, by their embeddings too) before gaps are filled.  Raises DataError for a
    malformed file or video (nothing is written).
    """
    rate = detections_fps(detections, fps, video_fps)
    rows = read_mot(detections)
    config = file_config(config or TrackerConfig(), rows)
    embeddings = None if appearance is None else appearance.embed(rows)
    tracker = Tracker(0, config, rate.fps)
    ended: list[Track] = []
    tracked = track_rows(rows, tracker, embeddings, ended)
    tracked = finish_tracks(tracked, track_looks(ended), tracker.max_lost, rate.fps, link)
    count = write_mot(out, tracked)
    return TrackedFile(
        len(rows),
        max((r.frame for r in rows), default=0),
        count,
        len({r.id for r in tracked}),
        0 if appearance is None else appearance.embedded,
        rate,
        config,
    )
