"""Enrolment: images of known people into a gallery, one atomic batch at a time.

Identities come from ``--id NAME`` or from folders: a folder argument must hold
``<identity>/<image>`` sub-folders, and a file (or glob match) belongs to the identity named
by its parent folder.  Duplicate images (same SHA-256 of the file bytes, in the gallery or
earlier in the run) and unreadable or empty images are skipped and counted; with a
detector, images where it finds nobody are skipped and counted too.
"""

from __future__ import annotations

import glob as globbing
import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from reid.data.io import is_image_file
from reid.detect import DEFAULT_MARGIN, Detector, crop
from reid.errors import ConfigError, DataError
from reid.gallery import DB_FILE, Gallery, IndexSpec, ItemMeta
from reid.models.encoder import Encoder
from reid.pipeline.sources import GLOB_CHARS

# Market-1501 style names carry the camera: 0002_c3s1_000551_01.jpg -> camera "c3".
CAMERA_TOKEN = re.compile(r"^-?\d+_c(\d+)")


@dataclass(frozen=True)
class EnrolEntry:
    """One image to enrol and the identity it shows."""

    path: Path
    identity: str
    camera: str | None = None


@dataclass
class EnrolConfig:
    """``batch_size`` images are embedded and committed together; ``margin`` grows each
    detection box by that share of its size (default: the detector kind's)."""

    batch_size: int = 32
    margin: float | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {self.batch_size}")


@dataclass
class EnrolReport:
    """What an enrolment did; ``skipped`` lists (path, reason) for every image not added."""

    gallery: str
    images: int = 0
    added: int = 0
    duplicates: int = 0
    unreadable: int = 0
    no_detection: int = 0
    per_identity: Counter[str] = field(default_factory=Counter)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    gallery_items: int = 0
    gallery_identities: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "gallery": self.gallery,
            "images": self.images,
            "added": self.added,
            "duplicates": self.duplicates,
            "unreadable": self.unreadable,
            "no_detection": self.no_detection,
            "identities": dict(sorted(self.per_identity.items())),
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "seconds": round(self.seconds, 3),
        }


def camera_of(path: Path) -> str | None:
    match = CAMERA_TOKEN.match(path.name)
    return f"c{match.group(1)}" if match else None


def plan_enrolment(paths: Sequence[str | Path], identity: str | None = None) -> list[EnrolEntry]:
    """Resolve files, folders and globs into images with identities; raise DataError on bad layout."""
    if not paths:
        raise ConfigError("give at least one image, folder or glob to enrol")
    if identity is not None and not identity.strip():
        raise ConfigError("--id must not be empty")
    entries: list[EnrolEntry] = []
    for spec in paths:
        text = str(spec)
        path = Path(text)
        if GLOB_CHARS & set(text) and not path.exists():
            matches = sorted(Path(p) for p in globbing.glob(text, recursive=True) if is_image_file(Path(p)))
            if not matches:
                raise DataError(f"{text}: no images match this pattern")
            entries += [_entry(p, identity or p.parent.name) for p in matches]
        elif path.is_dir():
            entries += _folder_entries(path, identity)
        elif path.is_file():
            entries.append(_entry(path, identity or path.parent.resolve().name))
        else:
            raise DataError(f"{path}: no such file or folder")
    seen: set[Path] = set()
    unique = []
    for entry in entries:
        key = entry.path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(entry)
    return unique


def _entry(path: Path, identity: str) -> EnrolEntry:
    return EnrolEntry(path, identity, camera_of(path))


def _folder_entries(folder: Path, identity: str | None) -> list[EnrolEntry]:
    if identity is not None:
        images = sorted(p for p in folder.rglob("*") if is_image_file(p))
        if not images:
            raise DataError(f"{folder}: folder holds no images")
        return [_entry(p, identity) for p in images]
    loose = sorted(p for p in folder.iterdir() if is_image_file(p))
    if loose:
        raise DataError(
            f"{folder}: images lie directly in the folder ({loose[0].name}, ...); "
            "expected ROOT/<identity>/<image> sub-folders, or give --id NAME"
        )
    entries = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        entries += [_entry(p, sub.name) for p in sorted(sub.rglob("*")) if is_image_file(p)]
    if not entries:
        raise DataError(f"{folder}: no images in ROOT/<identity>/<image> sub-folders")
    return entries


def enrol(
    gallery: Gallery,
    encoder: Encoder,
    entries: Sequence[EnrolEntry],
    config: EnrolConfig | None = None,
    detector: Detector | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> EnrolReport:
    """Embed ``entries`` and add them to ``gallery`` batch by batch.

    Each batch is committed atomically, so an interrupted enrolment keeps every batch
    finished before the interruption.  ``on_progress(n)`` is called as n images are handled.
    """
    config = config or EnrolConfig()
    gallery.check_model(encoder.card)
    report = EnrolReport(gallery=str(gallery.folder), images=len(entries))
    margin = config.margin if config.margin is not None else DEFAULT_MARGIN.get(getattr(detector, "kind", ""), 0.0)
    started = time.perf_counter()
    seen: set[str] = set()
    for start in range(0, len(entries), config.batch_size):
        batch = entries[start : start + config.batch_size]
        crops, items = [], []
        payloads = [_read_bytes(entry.path) for entry in batch]
        hashes = [hashlib.sha256(p).hexdigest() if p else "" for p in payloads]
        known = gallery.known_hashes([h for h in hashes if h])
        for entry, payload, digest in zip(batch, payloads, hashes, strict=True):
            if digest in known or digest in seen:
                report.duplicates += 1
                report.skipped.append((str(entry.path), "duplicate of an enrolled image"))
                continue
            image, problem = _decode(payload)
            if image is None:
                report.unreadable += 1
                report.skipped.append((str(entry.path), problem))
                continue
            box = (0, 0, int(image.shape[1]), int(image.shape[0]))
            if detector is not None:
                found = detector.detect(image)
                if not found:
                    report.no_detection += 1
                    report.skipped.append((str(entry.path), f"no {detector.kind} found"))
                    continue
                # An enrolment photo shows one person; the largest detection is that person.
                box = max(found, key=lambda d: d.area).box
                image = crop(image, box, margin)
            seen.add(digest)
            crops.append(image)
            items.append(
                ItemMeta(entry.identity, source=str(entry.path), camera=entry.camera, box=box, image_hash=digest)
            )
        if crops:
            result = gallery.add(encoder.embed(crops), items)
            for position in result.duplicates:
                report.duplicates += 1
                report.skipped.append((items[position].source, "duplicate of an enrolled image"))
            added = set(range(len(items))) - set(result.duplicates)
            report.added += len(added)
            report.per_identity.update(items[i].identity for i in added)
        if on_progress is not None:
            on_progress(len(batch))
    report.seconds = time.perf_counter() - started
    return report


def enrol_into(
    folder: str | Path,
    encoder: Encoder,
    entries: Sequence[EnrolEntry],
    spec: IndexSpec | None = None,
    config: EnrolConfig | None = None,
    detector: Detector | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> EnrolReport:
    """Open the gallery at ``folder``, or create it (index ``spec``) for ``encoder``'s
    model, and :func:`enrol` ``entries`` into it.

    A gallery this call creates is deleted again when nothing was added to it (every image
    unusable, or a failure before the first batch), so a failed enrolment leaves no gallery
    behind.  Raises what :meth:`Gallery.open_or_create` and :func:`enrol` raise.
    """
    folder = Path(folder)
    new = not (folder / DB_FILE).is_file()
    report: EnrolReport | None = None
    try:
        with Gallery.open_or_create(folder, encoder.card, spec) as gallery:
            report = enrol(gallery, encoder, entries, config, detector, on_progress)
            report.gallery_items, report.gallery_identities = len(gallery), gallery.identity_count
    finally:
        if new and (report is None or report.added == 0) and (folder / DB_FILE).is_file():
            Gallery.discard_if_empty(folder)
    return report


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _decode(payload: bytes) -> tuple[np.ndarray | None, str]:
    if not payload:
        return None, "empty or unreadable file"
    image = cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_COLOR)
    if image is None or image.size == 0:
        return None, "not a readable image"
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB), ""
