"""Query: find enrolled people in images, videos, cameras and streams.

For each kept frame: detect people or faces (or take the whole image as one crop), embed
the crops in batches, search the gallery's top-k identities, and label each detection
with the nearest identity when its distance is at most the threshold, ``unknown`` (None)
otherwise.  :class:`QueryRun` yields one :class:`FrameResult` per frame, in order, and
keeps running totals and per-stage timings in :attr:`QueryRun.stats`.

On videos, cameras and streams the detections are linked into tracks
(:class:`reid.track.Tracker`) and each tracked detection is decided by its track's mean
embedding so far, so one person walking through the scene keeps one answer that only
grows surer; the detections of one frame name each enrolled identity at most once
(``QueryConfig.one_per_frame``: the nearest of two tracks that look alike gets the name),
and each track is summarized (:class:`TrackSummary`) once it ends, with the decision of
its last frame.  Detection,
linking and embedding are the tracked-detection stream's
(:class:`reid.pipeline.stream.DetectionStream`); a query searches what it gives and decides.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from contextlib import closing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from reid.decision import nearest_identity, one_identity_each, resolve_threshold, taken_from
from reid.detect import Box, Detector, SSDLiteConfig, build_detector
from reid.errors import ConfigError
from reid.gallery import GalleryBackend, IdentityMatch
from reid.models.encoder import Encoder
from reid.pipeline.frames import ScaledDetector
from reid.pipeline.sources import MediaSource
from reid.pipeline.configs import QueryConfig as QueryConfig, TopK as TopK
from reid.pipeline.stages import intra_op_threads, stage_timer
from reid.pipeline.stream import DetectionStream, Sighting, TrackedFrame
from reid.pipeline.subject import ALIGNING_FACE_DETECTOR
from reid.track import Track, Tracker


@dataclass
class DetectionResult:
    """One detected (or given) crop and what the gallery says about it.

    For a tracked detection, ``identity``, ``distance`` and ``top_k`` answer the mean
    embedding of its track up to this frame, and ``track`` is the track's number.
    """

    box: Box
    identity: str | None
    distance: float
    top_k: list[IdentityMatch]
    detection_score: float | None
    crop: np.ndarray = field(repr=False)
    track: int | None = None

    @property
    def label(self) -> str:
        return self.identity if self.identity is not None else "unknown"


@dataclass(frozen=True)
class TrackSummary:
    """One ended track: its frames (first, last), times in seconds (None for images),
    latest decision (identity None: unknown; distance Euclidean between unit embeddings,
    0..2, None when it was never searched), boxes in it, its largest box and its (D,)
    float32 unit mean embedding (None: none of its crops was embedded), which joins
    tracklets in ``--mot`` output (:func:`reid.track.mot.link_tracklets`)."""

    source: str
    track: int
    start_frame: int
    end_frame: int
    start: float | None
    end: float | None
    identity: str | None
    distance: float | None
    frames: int
    box: Box
    embedding: np.ndarray | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, source: str, track: Track, until: int | None = None) -> TrackSummary | None:
        """The summary of ``track`` over its boxes in frames up to ``until`` (None: all);
        None when it has none there."""
        seen = [o for o in track.observations if until is None or o.frame <= until]
        if not seen:
            return None
        # The first of the largest boxes, as the track's own best box is chosen.
        best = max(seen, key=lambda o: o.box[2] * o.box[3])
        first, last = seen[0], seen[-1]
        return cls(
            source, track.id, first.frame, last.frame, first.time, last.time,
            track.identity, track.distance, len(seen), best.box,
            track.embedding if track.embedding_sum is not None else None,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "track": self.track,
            "start_frame": self.start_frame,
            "end_frame": self.end_frame,
            "start": None if self.start is None else round(self.start, 3),
            "end": None if self.end is None else round(self.end, 3),
            "identity": self.identity,
            "distance": None if self.distance is None else round(self.distance, 6),
            "frames": self.frames,
            "box": list(self.box),
        }


@dataclass
class FrameResult:
    """One answered frame; ``ended_tracks`` are the tracks known to have ended by it."""

    source: str
    frame: int
    time: float | None
    image: np.ndarray = field(repr=False)
    detections: list[DetectionResult] = field(default_factory=list)
    ended_tracks: list[TrackSummary] = field(default_factory=list)

    def events(self) -> list[dict[str, Any]]:
        """The JSON-lines events of this frame: one object per detection."""
        return [
            {
                "source": self.source,
                "frame": self.frame,
                "time": None if self.time is None else round(self.time, 3),
                "box": list(d.box),
                "identity": d.identity,
                "distance": None if not np.isfinite(d.distance) else round(d.distance, 6),
                "top_k": [m.to_dict() for m in d.top_k],
                "detection_score": None if d.detection_score is None else round(d.detection_score, 4),
                "track": d.track,
            }
            for d in self.detections
        ]


@dataclass
class QueryStats:
    """Running totals of a query; stage times are seconds spent in each stage (busy time:
    on threads the stages overlap, so their sum may exceed ``wall_seconds``); ``dropped``
    counts the frames of a live source skipped because the pipeline was behind;
    ``embedded`` the crops given to the encoder (with ``embed_every`` above 1, only the
    crops of one in that many of each track's boxes)."""

    frames: int = 0
    detections: int = 0
    embedded: int = 0
    identified: int = 0
    unknown: int = 0
    tracks: int = 0
    per_identity: Counter[str] = field(default_factory=Counter)
    stage_seconds: dict[str, float] = field(default_factory=stage_timer)
    wall_seconds: float = 0.0
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    # Crops the encoder refused (a face model finding no face): readable, not embedded.
    no_face: list[tuple[str, str]] = field(default_factory=list)
    dropped: int = 0

    @property
    def fps(self) -> float:
        return self.frames / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "detections": self.detections,
            "embedded": self.embedded,
            "identified": self.identified,
            "unknown": self.unknown,
            "tracks": self.tracks,
            "identities": dict(sorted(self.per_identity.items())),
            "stage_seconds": {k: round(v, 4) for k, v in self.stage_seconds.items()},
            "wall_seconds": round(self.wall_seconds, 4),
            "fps": round(self.fps, 3),
            "dropped": self.dropped,
            "unreadable": [{"path": p, "reason": r} for p, r in self.unreadable],
            "no_face": [{"path": p, "reason": r} for p, r in self.no_face],
        }


def choose_detector(config: QueryConfig, source: MediaSource, encoder: Encoder) -> Detector | None:
    if config.detect == "none":
        return None
    options = [SSDLiteConfig(min_height=config.min_height)] if config.min_height is not None else []
    if config.detect == "auto":
        if source.kind == "images":
            if config.detector is not None or config.min_height is not None:
                raise ConfigError(
                    f"{source.spec}: image files are taken as ready crops; add --detect person or --detect face "
                    "to run --detector or --min-height on them"
                )
            # A model trained on aligned face chips is given aligned chips of photos too.
            return build_detector(ALIGNING_FACE_DETECTOR, "face") if encoder.aligned_face_size else None
        kind = encoder.card.kind if encoder.card.kind in ("person", "face") else "person"
    else:
        kind = config.detect
    name = config.detector
    if name is None and kind == "face" and encoder.aligned_face_size:
        # Faces for a model trained on aligned chips: the detector whose landmarks align them.
        name = ALIGNING_FACE_DETECTOR
    return build_detector(name, kind, options)


def distance_of(identity: str | None, top: list[IdentityMatch]) -> float:
    """The distance (Euclidean between unit embeddings, 0..2) of a decision: the named
    identity's in ``top`` (not always the nearest when a frame names each identity once),
    else the nearest's; infinite for an empty ``top``."""
    named = [m.distance for m in top if identity is not None and m.identity == identity]
    return named[0] if named else top[0].distance if top else float("inf")


def query_detector(
    config: QueryConfig, source: MediaSource, encoder: Encoder, detector: Detector | None = None
) -> Detector | None:
    """The detector a query of ``source`` runs: ``detector``, else :func:`choose_detector`'s,
    shrinking frames by ``config.detect_scale`` first when it is below 1."""
    chosen = detector if detector is not None else choose_detector(config, source, encoder)
    if chosen is not None and config.detect_scale != 1:
        return ScaledDetector(chosen, config.detect_scale)
    return chosen


class QueryRun:
    """Iterate to get :class:`FrameResult` objects, in frame order; :attr:`stats` grows as
    you go.

    Detections come from the tracked-detection stream (:class:`reid.pipeline.stream.
    DetectionStream`: link, choose which crops to embed, embed in batches, attach to the
    tracks), which :attr:`stream` holds; each batch of frames it gives is searched in one
    gallery call and answered.  Live sources are answered as soon as a frame arrives.
    Leaving the iteration early (or Ctrl-C) stops the decoding and detection threads and
    releases the source.
    """

    def __init__(
        self,
        gallery: GalleryBackend,
        encoder: Encoder,
        source: MediaSource,
        config: QueryConfig | None = None,
        detector: Detector | None = None,
    ) -> None:
        self.config = config or QueryConfig()
        gallery.check_model(encoder.card)
        self.gallery, self.encoder, self.source = gallery, encoder, source
        self.chosen_threshold = resolve_threshold(self.config.threshold, encoder.card, gallery, far=self.config.far)
        self.threshold, self.threshold_source = self.chosen_threshold.value, self.chosen_threshold.describe()
        self.threshold_note = self.chosen_threshold.note
        self.detector = query_detector(self.config, source, encoder, detector)
        self.stream = DetectionStream(
            source, self.detector, encoder, self.config.stream(), self.config.margin, self.config.threaded
        )
        self.tracker: Tracker | None = self.stream.tracker
        self.margin = self.stream.margin
        self.stats = QueryStats(
            unreadable=source.unreadable, stage_seconds=self.stream.timing, no_face=self.stream.no_face
        )
        self._answered: int | None = None
        # Per track id, the identities another track seen beside it took (one_per_frame).
        self._barred: dict[int, set[str]] = defaultdict(set)
        self._started = time.perf_counter()

    def __iter__(self) -> Iterator[FrameResult]:
        self._started = time.perf_counter()
        batches = self.stream.batches()
        try:
            with closing(batches), intra_op_threads(self.config.embed_threads):
                for batch in batches:
                    yield from self._answer(batch)
        finally:
            self.stats.dropped = self.stream.dropped
            self.stats.wall_seconds = time.perf_counter() - self._started

    def _answer(self, batch: list[TrackedFrame]) -> Iterator[FrameResult]:
        """Search every sighting of ``batch`` in one gallery call and answer its frames in order."""
        self.stats.embedded, self.stats.dropped = self.stream.embedded, self.stream.dropped
        queries = [s.query for tracked in batch for s in tracked.sightings]
        found: list[list[IdentityMatch]] = []
        if queries:
            tick = time.perf_counter()
            found = self.gallery.search(np.stack(queries), self.config.top_k, self.config.score)
            self.stream.timing["search"] += time.perf_counter() - tick
        answers = iter(found)
        for tracked in batch:
            frame = tracked.frame
            result = FrameResult(frame.source, frame.index, frame.time, frame.image)
            # Tracks that ended before this frame carry the decisions of earlier frames.
            result.ended_tracks = [s for t in tracked.ended if (s := TrackSummary.of(frame.source, t)) is not None]
            self.stats.tracks += len(tracked.ended)
            tops = [next(answers) for _ in tracked.sightings]
            decided = self._decide(tracked.sightings, tops)
            for sighting, top, identity in zip(tracked.sightings, tops, decided, strict=True):
                distance = distance_of(identity, top)
                number = None
                if sighting.track is not None:
                    sighting.track.decide(identity, distance if np.isfinite(distance) else None)
                    number = sighting.track.id
                result.detections.append(
                    DetectionResult(sighting.box, identity, distance, top, sighting.score, sighting.crop, number)
                )
                self._count(identity)
            self.stats.frames += 1
            self.stats.wall_seconds = time.perf_counter() - self._started
            self._answered = frame.index
            yield result

    def _decide(self, sightings: list[Sighting], tops: list[list[IdentityMatch]]) -> list[str | None]:
        """The identity (None: unknown) named by each top-k list of one frame's detections:
        each identity at most once among tracked detections (``one_per_frame``), never one
        that another track seen beside the same track took in an earlier frame
        (:func:`reid.decision.taken_from`); else the nearest within the threshold, each alone."""
        if self.tracker is None or not self.config.one_per_frame:
            return [nearest_identity(top, self.chosen_threshold) for top in tops]
        tracks = [s.track.id if s.track is not None else None for s in sightings]
        barred = [self._barred[t] if t is not None else set() for t in tracks]
        named = one_identity_each(tops, self.chosen_threshold, barred)
        for track, lost in zip(tracks, taken_from(tops, named, self.chosen_threshold), strict=True):
            if track is not None:
                self._barred[track] |= lost
        return named

    def finish_tracks(self) -> list[TrackSummary]:
        """End every track still open (at the end of the source, or when a run is stopped)
        and summarize those long enough to report over the frames answered so far: a run
        stopped midway has linked frames of the batch it was answering that it never
        yielded, and a summary must not reach past the last answered frame."""
        if self.tracker is None or self._answered is None:
            return []
        summaries = (TrackSummary.of(self.source.spec, t, self._answered) for t in self.stream.finish())
        ended = [s for s in summaries if s is not None and s.frames >= self.config.tracker.min_boxes]
        self.stats.tracks += len(ended)
        return ended

    def _count(self, identity: str | None) -> None:
        self.stats.detections += 1
        if identity is None:
            self.stats.unknown += 1
        else:
            self.stats.identified += 1
            self.stats.per_identity[identity] += 1

