"""Face check-in: enrol people from a folder of face photos, then decide for every incoming
face who it is (1:N) or whether it is the person it claims to be (1:1).

Only names that reid's subpackages export are used: :func:`reid.pipeline.plan_enrolment`
and :func:`reid.pipeline.open_source` resolve the inputs, :func:`reid.detect.build_detector`
finds faces, the Encoder embeds them and :class:`reid.gallery.Gallery` stores and searches.

Where faces come from (``detect``):

* ``auto`` (default): photos (enrolment photos and incoming image files) are taken whole,
  as face crops, the way face sets such as ORL are cut; frames of videos and cameras show
  scenes, so OpenCV's Haar face detector finds the faces in them.
* ``face``: the detector runs on photos too.  A photo where it finds no face falls back to
  the whole photo (logged as ``"face": "whole"``): the cascade misses about one tightly
  cropped face in nine (46 of the 400 ORL faces), and such a photo is most often a crop.
* ``none``: every photo and every frame is taken whole.

The decision rule is the calibration's: a face is the person when its distance (Euclidean
between L2-normalized embeddings) is at most the threshold.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import numpy as np

from reid import ConfigError, ConfigValueError, Threshold, check_distance_threshold, nearest_identity
from reid.detect import DEFAULT_MARGIN, Box, Detector, build_detector
from reid.gallery import Gallery, IdentityMatch
from reid.models import Encoder, embed_images
from reid.pipeline import (
    EnrolConfig,
    EnrolReport,
    Frame,
    FramePipeline,
    MediaSource,
    enrol,
    gallery_threshold,
    open_source,
    plan_enrolment,
)

DETECT_MODES = ("auto", "face", "none")
MODES = ("1:N", "1:1")


@dataclass
class CheckinConfig:
    """``gallery`` None: ``out/gallery``.  ``claim``: the name a 1:1 check compares every face
    with (None: 1:N).  ``threshold`` None: the model card's, else the gallery's."""

    people: Path | None
    out: Path
    sources: list[str]
    gallery: Path | None = None
    claim: str | None = None
    threshold: float | None = None
    threshold_source: str = "--threshold"
    detect: str = "auto"
    face_detector: str | None = None
    every: int = 1
    max_frames: int | None = None
    top_k: int = 3
    margin: float = DEFAULT_MARGIN["face"]
    batch_size: int = 32
    append: bool = False

    def __post_init__(self) -> None:
        if self.detect not in DETECT_MODES:
            raise ConfigValueError("detect", f"{self.detect!r}: choose one of {', '.join(DETECT_MODES)}", sep=" ")
        check_distance_threshold(self.threshold, "threshold")
        if self.claim is not None and not self.claim.strip():
            raise ConfigValueError("claim", "must name an enrolled person", sep=" ")
        for key in ("top_k", "batch_size"):
            if getattr(self, key) < 1:
                raise ConfigValueError(key, f"must be at least 1, got {getattr(self, key)}", sep=" ")

    @property
    def gallery_path(self) -> Path:
        return self.gallery if self.gallery is not None else self.out / "gallery"

    @property
    def mode(self) -> str:
        return "1:1" if self.claim is not None else "1:N"


@dataclass(frozen=True)
class Face:
    """A face to embed: its box in the image, the crop, and how it was found
    ("detected" by the face detector, or the "whole" image taken as the face)."""

    box: Box
    image: np.ndarray = field(repr=False)
    how: str


class FaceFinder:
    """Applies the ``detect`` mode to enrolment photos, incoming photos and frames, through
    reid's frame loop (:class:`reid.pipeline.FramePipeline`) and enrolment
    (:func:`reid.pipeline.enrol`)."""

    def __init__(
        self,
        mode: str,
        margin: float = DEFAULT_MARGIN["face"],
        detector: Detector | None = None,
        detector_name: str | None = None,
    ) -> None:
        if mode not in DETECT_MODES:
            raise ConfigError(f"--detect {mode!r}: choose one of {', '.join(DETECT_MODES)}")
        self.mode = mode
        self.margin = margin
        self.detector = detector if detector is not None or mode == "none" else build_detector(detector_name, "face")

    def for_photos(self) -> Detector | None:
        """The detector photos go through (None: taken whole); a photo where it finds no
        face is taken whole."""
        return self.detector if self.mode == "face" else None

    def for_source(self, source: MediaSource) -> Detector | None:
        """The detector a source's frames go through (None: taken whole)."""
        if self.mode == "none":
            return None
        return self.for_photos() if source.kind == "images" else self.detector

    def faces(
        self,
        source: MediaSource,
        dropped: Callable[[int], None] | None = None,
        align_to: tuple[int, int] | None = None,
    ) -> Iterator[tuple[Frame, Face]]:
        """Every face of every kept frame of ``source``, in order; ``dropped(n)`` hears
        how many frames of a live source were skipped because the desk was behind.
        ``align_to`` (height, width): aligned face chips where the detector gives landmarks
        (an encoder's ``aligned_face_size``)."""
        photos = source.kind == "images"
        items = FramePipeline(source, self.for_source(source), self.margin, whole_if_none=photos, align_to=align_to)
        try:
            for item in items:
                for image, box, score in zip(item.crops, item.boxes, item.scores, strict=True):
                    yield item.frame, Face(box, image, "whole" if score is None else "detected")
        finally:
            items.close()
            if dropped is not None:
                dropped(items.dropped)


def embed_each(encoder: Encoder, images: list[np.ndarray]) -> tuple[np.ndarray, list[str | None]]:
    """Embed a batch; an image the encoder refuses (dlib-face finding no face) gets a zero
    row and its reason.  Non-finite embeddings raise ModelError."""
    names = [f"image {i + 1} of {len(images)}" for i in range(len(images))]
    result = embed_images(encoder, images, names, no_face="skip")
    rows = np.zeros((len(images), encoder.dim), np.float32)
    rows[result.kept] = result.features
    problems: list[str | None] = [None] * len(images)
    for position, reason in result.failures:
        problems[position] = reason
    return rows, problems


def enrol_people(
    gallery: Gallery, encoder: Encoder, people: Path, finder: FaceFinder, batch_size: int = 32
) -> EnrolReport:
    """Add ``people/<person>/<photo>`` to the gallery, one atomic batch at a time.

    Photos already enrolled (same SHA-256 of the file) are skipped, so enrolling the same
    folder again adds only what is new; unreadable photos and photos the encoder refuses are
    skipped and listed.  A photo where the face detector finds no face is enrolled whole
    (photo sets such as ORL are cut tightly around the face).
    """
    config = EnrolConfig(batch_size=batch_size, margin=finder.margin, no_face="skip", no_detection="whole")
    return enrol(gallery, encoder, plan_enrolment([people]), config, finder.for_photos())


@dataclass
class Decision:
    """One face's answer, as logged.  ``decision``: "identified" or "unknown" (1:N),
    "accepted" or "rejected" (1:1), or "no_face" when the encoder found no face to embed.
    ``distance``: to the nearest person (1:N) or to the claimed person (1:1)."""

    source: str
    frame: int | None
    time: float | None
    box: Box
    face: str
    mode: str
    claim: str | None
    identity: str | None
    distance: float | None
    threshold: float
    decision: str
    top_k: list[IdentityMatch] = field(default_factory=list)
    at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "frame": self.frame,
            "time": None if self.time is None else round(self.time, 3),
            "box": list(self.box),
            "face": self.face,
            "mode": self.mode,
            "claim": self.claim,
            "identity": self.identity,
            "distance": None if self.distance is None else round(self.distance, 6),
            "threshold": round(self.threshold, 6),
            "decision": self.decision,
            "top_k": [m.to_dict() for m in self.top_k],
            "at": self.at,
        }


def resolve_threshold(config: CheckinConfig, encoder: Encoder, gallery: Gallery) -> tuple[float, str]:
    """The threshold and where it came from: --threshold, else the gallery's own calibration,
    else the card, else the gallery (:func:`reid.pipeline.gallery_threshold`)."""
    chosen = gallery_threshold(config.threshold, encoder.card, gallery, given_detail=config.threshold_source)
    return chosen.value, chosen.describe()


@dataclass
class _Pending:
    source: str
    frame: int | None
    time: float | None
    face: Face


def _faces_of(
    source: MediaSource, finder: FaceFinder, result: CheckinResult, align_to: tuple[int, int] | None
) -> Iterator[_Pending]:
    photos = source.kind == "images"

    def count(dropped: int) -> None:
        result.dropped += dropped

    for frame, face in finder.faces(source, count, align_to):
        yield _Pending(frame.source, None if photos else frame.index, frame.time, face)


@dataclass
class CheckinResult:
    decisions: Counter[str] = field(default_factory=Counter)
    threshold: float = 0.0
    threshold_source: str = ""
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False
    dropped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "decisions": dict(sorted(self.decisions.items())),
            "dropped": self.dropped,
            "faces": sum(self.decisions.values()),
            "threshold": self.threshold,
            "threshold_source": self.threshold_source,
            "unreadable": [{"path": p, "reason": r} for p, r in self.unreadable],
            "seconds": round(self.seconds, 3),
            "interrupted": self.interrupted,
        }


class CheckinDesk:
    """Answers faces against an open gallery and writes each decision to a JSON-lines log."""

    def __init__(self, gallery: Gallery, encoder: Encoder, config: CheckinConfig) -> None:
        gallery.check_model(encoder.card)
        self.gallery, self.encoder, self.config = gallery, encoder, config
        self.threshold, self.threshold_source = resolve_threshold(config, encoder, gallery)
        if config.claim is not None and config.claim not in {s.identity for s in gallery.identities()}:
            raise ConfigError(f"--claim {config.claim!r}: nobody of that name is enrolled in {gallery.folder}")

    def _decide(self, pending: _Pending, embedding: np.ndarray | None, found: list[IdentityMatch]) -> Decision:
        cfg = self.config
        decision = Decision(
            source=pending.source,
            frame=pending.frame,
            time=pending.time,
            box=pending.face.box,
            face=pending.face.how,
            mode=cfg.mode,
            claim=cfg.claim,
            identity=None,
            distance=None,
            threshold=self.threshold,
            decision="no_face",
            at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        )
        if embedding is None:
            return decision
        decision.top_k = found[: cfg.top_k]
        if cfg.claim is None:
            nearest = found[0] if found else None
            decision.distance = nearest.distance if nearest is not None else None
            decision.identity = nearest_identity(found, Threshold(self.threshold, self.threshold_source))
            named = decision.identity is not None
            decision.decision = "identified" if named else "unknown"
        else:
            claimed = next((m for m in found if m.identity == cfg.claim), None)
            decision.distance = claimed.distance if claimed is not None else None
            accepted = claimed is not None and claimed.distance <= self.threshold
            decision.identity = cfg.claim if accepted else None
            decision.decision = "accepted" if accepted else "rejected"
        return decision

    def answer(self, batch: list[_Pending]) -> list[Decision]:
        """Embed a batch of faces, search them, and decide each."""
        if not batch:
            return []
        embeddings, problems = embed_each(self.encoder, [p.face.image for p in batch])
        good = [i for i, problem in enumerate(problems) if problem is None]
        # 1:1 needs the distance to the claimed person wherever it ranks, so every
        # identity is fetched; 1:N needs only the nearest few.
        k = self.gallery.identity_count if self.config.claim is not None else self.config.top_k
        matches = self.gallery.search(embeddings[good], max(1, k)) if good else []
        by_row = dict(zip(good, matches, strict=True))
        return [
            self._decide(pending, embeddings[i] if i in by_row else None, by_row.get(i, []))
            for i, pending in enumerate(batch)
        ]

    def run(self, log: IO[str], on_decision: Callable[[Decision], None] | None = None) -> CheckinResult:
        """Answer every face of every source, writing (and flushing) each batch's decisions."""
        cfg = self.config
        result = CheckinResult(threshold=self.threshold, threshold_source=self.threshold_source)
        finder = FaceFinder(cfg.detect, cfg.margin, detector_name=cfg.face_detector)
        sources = [open_source(spec, every=cfg.every, max_frames=cfg.max_frames) for spec in cfg.sources]
        started = time.perf_counter()

        def flush(batch: list[_Pending]) -> None:
            for decision in self.answer(batch):
                log.write(json.dumps(decision.to_dict()) + "\n")
                result.decisions[decision.decision] += 1
                if on_decision is not None:
                    on_decision(decision)
            log.flush()
            batch.clear()

        batch: list[_Pending] = []
        try:
            for source in sources:
                for pending in _faces_of(source, finder, result, self.encoder.aligned_face_size):
                    batch.append(pending)
                    # A live camera is answered face by face; files wait for a full batch.
                    if source.live or len(batch) >= cfg.batch_size:
                        flush(batch)
                flush(batch)
                result.unreadable += source.unreadable
        except KeyboardInterrupt:
            result.interrupted = True
            flush(batch)
        result.seconds = time.perf_counter() - started
        return result
