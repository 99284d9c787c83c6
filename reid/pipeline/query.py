"""Query: find enrolled people in images, videos, cameras and streams.

For each kept frame: detect people or faces (or take the whole image as one crop), embed
the crops in batches, search the gallery's top-k identities, and label each detection
with the nearest identity when its distance is at most the threshold, ``unknown`` (None)
otherwise.  :class:`QueryRun` yields one :class:`FrameResult` per frame, in order, and
keeps running totals and per-stage timings in :attr:`QueryRun.stats`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reid.detect import DEFAULT_MARGIN, Box, Detector, build_detector, crop
from reid.errors import ConfigError
from reid.gallery import SCORES, Gallery, IdentityMatch
from reid.models.encoder import NO_FACE_CHOICES, Encoder, embed_images
from reid.pipeline.sources import Frame, MediaSource

DETECT_CHOICES = ("auto", "person", "face", "none")
# Frames waiting for their crops to fill a batch are held in memory; stretches of video
# with nobody in them must not pile up.
MAX_PENDING_FRAMES = 16

# A frame waiting to be answered, with its crops, their boxes and detection scores.
Pending = tuple[Frame, list[np.ndarray], list[Box], list[float | None]]


@dataclass
class QueryConfig:
    """Options of a query run.

    ``detect``: "auto" runs the model's kind of detector (person or face) on videos,
    cameras and streams and takes image files as ready crops; "none" takes every frame
    as one crop.  ``threshold`` (Euclidean distance between unit embeddings) defaults to
    the gallery's, which is the model card's calibrated one.
    """

    top_k: int = 5
    detect: str = "auto"
    threshold: float | None = None
    score: str = "best"
    batch_size: int = 32
    margin: float | None = None
    no_face: str = "skip"

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ConfigError(f"--top-k must be at least 1, got {self.top_k}")
        if self.detect not in DETECT_CHOICES:
            raise ConfigError(f"unknown detector {self.detect!r}; choose one of {', '.join(DETECT_CHOICES)}")
        if self.score not in SCORES:
            raise ConfigError(f"unknown identity score {self.score!r}; choose one of {', '.join(SCORES)}")
        if self.batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {self.batch_size}")
        if self.no_face not in NO_FACE_CHOICES:
            raise ConfigError(f"--no-face {self.no_face!r}: choose one of {', '.join(NO_FACE_CHOICES)}")
        if self.threshold is not None and not 0 < self.threshold <= 2:
            raise ConfigError(f"--threshold is a distance between unit embeddings, in (0, 2]; got {self.threshold}")


@dataclass
class DetectionResult:
    """One detected (or given) crop and what the gallery says about it."""

    box: Box
    identity: str | None
    distance: float
    top_k: list[IdentityMatch]
    detection_score: float | None
    crop: np.ndarray = field(repr=False)

    @property
    def label(self) -> str:
        return self.identity if self.identity is not None else "unknown"


@dataclass
class FrameResult:
    source: str
    frame: int
    time: float | None
    image: np.ndarray = field(repr=False)
    detections: list[DetectionResult] = field(default_factory=list)

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
            }
            for d in self.detections
        ]


@dataclass
class QueryStats:
    """Running totals of a query; stage times are seconds spent in each stage."""

    frames: int = 0
    detections: int = 0
    identified: int = 0
    unknown: int = 0
    per_identity: Counter[str] = field(default_factory=Counter)
    stage_seconds: dict[str, float] = field(
        default_factory=lambda: {"decode": 0.0, "detect": 0.0, "embed": 0.0, "search": 0.0}
    )
    wall_seconds: float = 0.0
    unreadable: list[tuple[str, str]] = field(default_factory=list)

    @property
    def fps(self) -> float:
        return self.frames / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "detections": self.detections,
            "identified": self.identified,
            "unknown": self.unknown,
            "identities": dict(sorted(self.per_identity.items())),
            "stage_seconds": {k: round(v, 4) for k, v in self.stage_seconds.items()},
            "wall_seconds": round(self.wall_seconds, 4),
            "fps": round(self.fps, 3),
            "unreadable": [{"path": p, "reason": r} for p, r in self.unreadable],
        }


def resolve_threshold(config: QueryConfig, gallery: Gallery, encoder: Encoder) -> float:
    """--threshold, else the model card's, else the one the gallery recorded at creation.

    The card wins over the gallery: recalibrating a model keeps its weights and so its
    fingerprint, and the gallery must then answer at the new threshold.
    """
    for value in (config.threshold, encoder.threshold, gallery.threshold):
        if value is not None:
            return float(value)
    raise ConfigError(
        f"model {encoder.card.name!r} has no calibrated threshold and gallery {gallery.folder} none either; "
        "pass --threshold (a distance between unit embeddings, e.g. 1.0)"
    )


def choose_detector(config: QueryConfig, source: MediaSource, encoder: Encoder) -> Detector | None:
    if config.detect == "none":
        return None
    if config.detect == "auto":
        if source.kind == "images":
            return None
        kind = encoder.card.kind if encoder.card.kind in ("person", "face") else "person"
        return build_detector(kind)
    return build_detector(config.detect)


class QueryRun:
    """Iterate to get :class:`FrameResult` objects; :attr:`stats` grows as you go.

    Crops of several frames are embedded together (up to ``batch_size`` crops), except for
    live sources, where each frame is answered as soon as it arrives.
    """

    def __init__(
        self,
        gallery: Gallery,
        encoder: Encoder,
        source: MediaSource,
        config: QueryConfig | None = None,
        detector: Detector | None = None,
    ) -> None:
        self.config = config or QueryConfig()
        gallery.check_model(encoder.card)
        self.gallery, self.encoder, self.source = gallery, encoder, source
        self.threshold = resolve_threshold(self.config, gallery, encoder)
        self.detector = detector if detector is not None else choose_detector(self.config, source, encoder)
        self.stats = QueryStats(unreadable=source.unreadable)
        kind = self.detector.kind if self.detector is not None else ""
        self.margin = self.config.margin if self.config.margin is not None else DEFAULT_MARGIN.get(kind, 0.0)
        self._started = time.perf_counter()

    def __iter__(self) -> Iterator[FrameResult]:
        self._started = time.perf_counter()
        timing = self.stats.stage_seconds
        pending: list[Pending] = []
        pending_crops = 0
        frames = self.source.frames()
        try:
            while True:
                tick = time.perf_counter()
                frame = next(frames, None)
                timing["decode"] += time.perf_counter() - tick
                if frame is None:
                    break
                tick = time.perf_counter()
                crops, boxes, scores = self._crops(frame)
                timing["detect"] += time.perf_counter() - tick
                pending.append((frame, crops, boxes, scores))
                pending_crops += len(crops)
                full = pending_crops >= self.config.batch_size or len(pending) >= MAX_PENDING_FRAMES
                if self.source.live or full:
                    yield from self._answer(pending)
                    pending, pending_crops = [], 0
            yield from self._answer(pending)
        finally:
            frames.close()
            self.stats.wall_seconds = time.perf_counter() - self._started

    def _crops(self, frame: Frame) -> tuple[list[np.ndarray], list[Box], list[float | None]]:
        image = frame.image
        if self.detector is None:
            return [image], [(0, 0, int(image.shape[1]), int(image.shape[0]))], [None]
        found = self.detector.detect(image)
        crops = [crop(image, d.box, self.margin) for d in found]
        keep = [i for i, c in enumerate(crops) if c.size]
        return [crops[i] for i in keep], [found[i].box for i in keep], [found[i].score for i in keep]

    def _answer(self, pending: list[Pending]) -> Iterator[FrameResult]:
        if not pending:
            return
        timing = self.stats.stage_seconds
        crops = [c for _, frame_crops, _, _ in pending for c in frame_crops]
        sources = [_crop_name(frame, n) for frame, frame_crops, _, _ in pending for n in range(len(frame_crops))]
        matches: list[list[IdentityMatch] | None] = [None] * len(crops)
        if crops:
            tick = time.perf_counter()
            embedded = embed_images(self.encoder, crops, sources, self.config.no_face)
            timing["embed"] += time.perf_counter() - tick
            self.stats.unreadable += [(sources[position], reason) for position, reason in embedded.failures]
            if embedded.kept:
                tick = time.perf_counter()
                found = self.gallery.search(embedded.features, self.config.top_k, self.config.score)
                timing["search"] += time.perf_counter() - tick
                for position, top_k in zip(embedded.kept, found, strict=True):
                    matches[position] = top_k
        at = 0
        for frame, frame_crops, boxes, scores in pending:
            result = FrameResult(frame.source, frame.index, frame.time, frame.image)
            for image, box, score in zip(frame_crops, boxes, scores, strict=True):
                top = matches[at]
                at += 1
                if top is None:
                    continue
                nearest = top[0] if top else None
                distance = nearest.distance if nearest is not None else float("inf")
                identity = nearest.identity if nearest is not None and distance <= self.threshold else None
                result.detections.append(DetectionResult(box, identity, distance, top, score, image))
                self._count(identity)
            self.stats.frames += 1
            self.stats.wall_seconds = time.perf_counter() - self._started
            yield result

    def _count(self, identity: str | None) -> None:
        self.stats.detections += 1
        if identity is None:
            self.stats.unknown += 1
        else:
            self.stats.identified += 1
            self.stats.per_identity[identity] += 1


def _crop_name(frame: Frame, number: int) -> str:
    """How a crop is named in the summary: the image file, or the frame and crop of a video."""
    if frame.time is None and number == 0:
        return frame.source
    return f"{frame.source} frame {frame.index} crop {number}"
