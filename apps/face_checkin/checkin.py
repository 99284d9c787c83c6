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

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import numpy as np

from reid import ConfigError, DataError, check_distance_threshold
from reid.data import read_image
from reid.detect import DEFAULT_MARGIN, Box, Detector, build_detector, crop
from reid.gallery import Gallery, IdentityMatch, ItemMeta
from reid.models import Encoder, embed_images
from reid.pipeline import MediaSource, open_source, plan_enrolment

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
            raise ConfigError(f"--detect {self.detect!r}: choose one of {', '.join(DETECT_MODES)}")
        check_distance_threshold(self.threshold)
        if self.claim is not None and not self.claim.strip():
            raise ConfigError("--claim must name an enrolled person")
        if self.top_k < 1 or self.batch_size < 1:
            raise ConfigError("--top-k and the batch size must be at least 1")

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
    """Applies the ``detect`` mode to enrolment photos, incoming photos and frames."""

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

    @staticmethod
    def whole(image: np.ndarray) -> Face:
        return Face((0, 0, int(image.shape[1]), int(image.shape[0])), image, "whole")

    def _detected(self, image: np.ndarray) -> list[Face]:
        if self.detector is None:
            return []
        faces = [Face(d.box, crop(image, d.box, self.margin), "detected") for d in self.detector.detect(image)]
        return [f for f in faces if f.image.size]

    def photo(self, image: np.ndarray) -> list[Face]:
        """Every face of a photo; the whole photo when it is taken as a crop or none is found."""
        if self.mode != "face":
            return [self.whole(image)]
        return self._detected(image) or [self.whole(image)]

    def enrolment_photo(self, image: np.ndarray) -> Face:
        """The face an enrolment photo shows: its largest one (bystanders are smaller)."""
        return max(self.photo(image), key=lambda f: f.box[2] * f.box[3])

    def frame(self, image: np.ndarray) -> list[Face]:
        """The faces of a video or camera frame; none when the detector finds none."""
        if self.mode == "none":
            return [self.whole(image)]
        return self._detected(image)


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


@dataclass
class EnrolSummary:
    """What enrolment did; ``skipped`` lists (photo, reason) for every photo not added."""

    gallery: str
    photos: int = 0
    added: int = 0
    duplicates: int = 0
    per_person: Counter[str] = field(default_factory=Counter)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "gallery": self.gallery,
            "photos": self.photos,
            "added": self.added,
            "duplicates": self.duplicates,
            "people": dict(sorted(self.per_person.items())),
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "seconds": round(self.seconds, 3),
        }


def enrol_people(
    gallery: Gallery, encoder: Encoder, people: Path, finder: FaceFinder, batch_size: int = 32
) -> EnrolSummary:
    """Add ``people/<person>/<photo>`` to the gallery, one atomic batch at a time.

    Photos already enrolled (same SHA-256 of the file) are skipped, so enrolling the same
    folder again adds only what is new; unreadable photos and photos the encoder refuses are
    skipped and listed.
    """
    entries = plan_enrolment([people])
    summary = EnrolSummary(str(gallery.folder), photos=len(entries))
    started = time.perf_counter()
    seen: set[str] = set()
    for start in range(0, len(entries), batch_size):
        batch = entries[start : start + batch_size]
        digests = {e.path: hashlib.sha256(e.path.read_bytes()).hexdigest() for e in batch if e.path.is_file()}
        known = gallery.known_hashes(list(digests.values()))
        faces, items = [], []
        for entry in batch:
            digest = digests.get(entry.path)
            if digest is None:
                summary.skipped.append((str(entry.path), "cannot read the file"))
                continue
            if digest in known or digest in seen:
                summary.duplicates += 1
                continue
            try:
                face = finder.enrolment_photo(read_image(entry.path))
            except DataError as exc:
                summary.skipped.append((str(entry.path), str(exc)))
                continue
            seen.add(digest)
            faces.append(face)
            items.append(ItemMeta(entry.identity, source=str(entry.path), box=face.box, image_hash=digest))
        if not faces:
            continue
        embeddings, problems = embed_each(encoder, [f.image for f in faces])
        good = [i for i, problem in enumerate(problems) if problem is None]
        summary.skipped += [(items[i].source, p) for i, p in enumerate(problems) if p is not None]
        if good:
            gallery.add(embeddings[good], [items[i] for i in good])
            summary.added += len(good)
            summary.per_person.update(items[i].identity for i in good)
    summary.seconds = time.perf_counter() - started
    return summary


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
    """The threshold and where it came from: --threshold, else the card, else the gallery."""
    if config.threshold is not None:
        return float(config.threshold), config.threshold_source
    # The card wins over the gallery: recalibrating a model keeps its fingerprint, so an
    # older gallery would otherwise keep answering at the old threshold.
    if encoder.threshold is not None:
        return float(encoder.threshold), encoder.card.threshold_source or "model card"
    if gallery.threshold is not None:
        return float(gallery.threshold), f"gallery {gallery.folder}"
    raise ConfigError(
        f"model {encoder.card.name!r} has no calibrated threshold; calibrate it "
        "(python -m apps.face_checkin.calibrate, or reid calibrate) or pass --threshold"
    )


@dataclass
class _Pending:
    source: str
    frame: int | None
    time: float | None
    face: Face


def _faces_of(source: MediaSource, finder: FaceFinder) -> Iterator[_Pending]:
    photos = source.kind == "images"
    for frame in source.frames():
        faces = finder.photo(frame.image) if photos else finder.frame(frame.image)
        for face in faces:
            yield _Pending(frame.source, None if photos else frame.index, frame.time, face)


@dataclass
class CheckinResult:
    decisions: Counter[str] = field(default_factory=Counter)
    threshold: float = 0.0
    threshold_source: str = ""
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "decisions": dict(sorted(self.decisions.items())),
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
            named = nearest is not None and nearest.distance <= self.threshold
            decision.identity = nearest.identity if named and nearest is not None else None
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
                for pending in _faces_of(source, finder):
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
