"""Face check-in: enrol people from a folder of face photos, then decide for every incoming
face who it is (1:N) or whether it is the person it claims to be (1:1).

Only names that reid's subpackages export are used: :func:`reid.pipeline.plan_enrolment`
and :func:`reid.pipeline.open_source` resolve the inputs, :func:`reid.pipeline.photo_rule`
chooses the face detector and cuts photos, the Encoder embeds them and
:class:`reid.gallery.GalleryBackend` stores and searches.

Where faces come from (``detect``, the ``--detect`` of every reid command; photos are cut by
reid's one crop rule, :func:`reid.pipeline.photo_rule`):

* ``auto`` (default): photos (enrolment photos and incoming image files) are taken whole,
  as face crops, the way face sets such as ORL are cut (aligned chips of their largest
  face when the model's card asks for aligned faces); frames of videos and cameras show
  scenes, so the face detector (``face_detector``, default OpenCV's Haar cascade) finds the
  faces in them.
* ``face``: the detector runs on photos too (enrolment: the largest face; incoming
  photos: every face).  A photo where it finds no face is what ``no_face`` says:
  ``skip`` (the default of reid's enrolment: logged as a ``no_face`` decision, or skipped
  and named at enrolment), ``whole`` (the whole photo, logged as ``"face": "whole"``; the
  cascade misses about one tightly cropped face in nine, 46 of the 400 ORL faces, and such
  a photo is most often a crop) or ``error`` (one line naming it, and the run stops).
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
from typing import IO, Any

import numpy as np

from reid import ConfigValueError, nearest_identity, resolve_threshold
from reid.detect import Box
from reid.gallery import GalleryBackend, IdentityMatch
from reid.models import Encoder, embed_images
from reid.pipeline import (
    EnrolConfig,
    EnrolPlan,
    EnrolReport,
    Frame,
    FramePipeline,
    MediaSource,
    SubjectRule,
    enrol,
    open_source,
)

from apps.face_checkin.config import CheckinConfig


@dataclass(frozen=True)
class Face:
    """A face to embed: its box in the image, the crop, and how it was found ("detected"
    by the face detector, the "whole" image taken as the face, or "none": no face found
    in a photo, so nothing to embed)."""

    box: Box
    image: np.ndarray | None = field(repr=False)
    how: str


def photo_faces(frame: Frame, rule: SubjectRule) -> list[Face]:
    """The faces of one photo by ``rule``; one ``none`` face (nothing to embed) when it finds
    none and says "skip".  Raises DataError naming the photo when it says "error"."""
    subjects = rule.apply(frame.image, frame.source)
    if subjects.skipped:
        height, width = frame.image.shape[:2]
        return [Face((0, 0, width, height), None, "none")]
    how = "whole" if subjects.whole else "detected"
    return [Face(box, crop, how) for crop, box in zip(subjects.crops, subjects.boxes, strict=True)]


def source_faces(
    source: MediaSource,
    config: CheckinConfig,
    encoder: Encoder,
    dropped: Callable[[int], None] | None = None,
) -> Iterator[tuple[Frame, Face]]:
    """Every face of every kept frame of ``source``, in order: photos by
    :meth:`CheckinConfig.photo_rule`, video and camera frames through reid's frame loop
    (:class:`reid.pipeline.FramePipeline`) with the frame detector, as aligned chips when
    ``encoder`` asks for them.  ``dropped(n)`` hears how many frames of a live source were
    skipped because the desk was behind."""
    if source.kind == "images":
        rule = config.photo_rule(encoder)
        for frame in source.frames():
            for face in photo_faces(frame, rule):
                yield frame, face
        return
    items = FramePipeline(source, config.frame_detector(encoder), config.margin, align_to=encoder.aligned_face_size)
    try:
        for item in items:
            for image, box, score in zip(item.crops, item.boxes, item.scores, strict=True):
                yield item.frame, Face(box, image, "whole" if score is None else "detected")
    finally:
        items.close()
        if dropped is not None:
            dropped(items.dropped)


def embed_each(
    encoder: Encoder, images: list[np.ndarray], names: list[str], no_face: str = "skip"
) -> tuple[np.ndarray, list[str | None]]:
    """Embed a batch of images named ``names``; an image the encoder refuses (sface or
    dlib-face finding no face) gets a zero row and its reason ("skip"), is embedded whole
    ("whole") or raises DataError naming it ("error").  Non-finite embeddings raise
    ModelError."""
    result = embed_images(encoder, images, names, no_face=no_face)
    rows = np.zeros((len(images), encoder.dim), np.float32)
    rows[result.kept] = result.features
    problems: list[str | None] = [None] * len(images)
    for position, reason in result.failures:
        problems[position] = reason
    return rows, problems


def enrol_people(gallery: GalleryBackend, encoder: Encoder, people: EnrolPlan, config: CheckinConfig) -> EnrolReport:
    """Add the photos ``people`` plans (:func:`reid.pipeline.plan_enrolment` of
    ``people/<person>/<photo>``, made before anything is written) to the gallery, one atomic
    batch at a time, each photo cut to its largest face by :meth:`CheckinConfig.photo_rule`.

    Photos already enrolled (same SHA-256 of the file) are skipped, so enrolling the same
    folder again adds only what is new; unreadable photos are skipped and listed, and so
    are photos without a face found (by the detector or by the encoder) unless
    ``config.no_face`` says "whole" (or "error": the first stops the enrolment).
    """
    rule = config.photo_rule(encoder, "largest")
    # The rule's detector is given to enrol; without one every photo is taken whole.
    enrolment = EnrolConfig(batch_size=config.batch_size, margin=config.margin, no_face=config.no_face, detect="none")
    return enrol(gallery, encoder, people, enrolment, rule.detector)


@dataclass
class Decision:
    """One face's answer, as logged.  ``decision``: "identified" or "unknown" (1:N),
    "accepted" or "rejected" (1:1), or "no_face" when the detector or the encoder found no face to embed.
    ``distance``: to the nearest person (1:N) or to the claimed person (1:1)."""

    source: str
    frame: int
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


@dataclass
class _Pending:
    source: str
    frame: int
    time: float | None
    face: Face
    photo: bool


def _faces_of(source: MediaSource, config: CheckinConfig, encoder: Encoder, result: CheckinResult) -> Iterator[_Pending]:
    photos = source.kind == "images"

    def count(dropped: int) -> None:
        result.dropped += dropped

    # A photo's frame is its place among the source's photos, as reid query writes it.
    for frame, face in source_faces(source, config, encoder, count):
        yield _Pending(frame.source, frame.index, frame.time, face, photos)


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

    def __init__(self, gallery: GalleryBackend, encoder: Encoder, config: CheckinConfig) -> None:
        gallery.check_model(encoder.card)
        self.gallery, self.encoder, self.config = gallery, encoder, config
        self.chosen_threshold = resolve_threshold(
            config.threshold, encoder.card, gallery, given_detail=config.threshold_source or "--threshold"
        )
        self.threshold, self.threshold_source = self.chosen_threshold.value, self.chosen_threshold.describe()
        if config.claim is not None and config.claim not in {s.identity for s in gallery.identities()}:
            raise ConfigValueError("claim", f"{config.claim!r}: nobody of that name is enrolled in {gallery.location}", sep=" ")

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
            decision.identity = nearest_identity(found, self.chosen_threshold)
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
        # A photo without a face found has nothing to embed; it is answered "no_face".
        faces = [i for i, p in enumerate(batch) if p.face.image is not None]
        embeddings = np.zeros((len(batch), self.encoder.dim), np.float32)
        problems: list[str | None] = ["no face found"] * len(batch)
        if faces:
            # --no-face is about photos; a frame's crop the encoder refuses is only not answered.
            # A batch holds the faces of one source (see run), so all photos or all frames.
            no_face = self.config.no_face if batch[0].photo else "skip"
            images = [batch[i].face.image for i in faces]
            rows, refused = embed_each(self.encoder, images, [batch[i].source for i in faces], no_face)  # type: ignore[arg-type]
            embeddings[faces] = rows
            for i, problem in zip(faces, refused, strict=True):
                problems[i] = problem
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
                for pending in _faces_of(source, cfg, self.encoder, result):
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
