"""Enrolment: images of known people into a gallery, one atomic batch at a time.

Identities come from ``--id NAME`` or from folders: a folder argument must hold
``<identity>/<image>`` sub-folders, and a file (or glob match) belongs to the identity named
by its parent folder.  A labelled data set, named as every command names one
(``market1501:PATH``, ``dukemtmc:PATH``, ``msmt17:PATH``, ``folder:PATH``, ``synthetic``;
:func:`reid.data.load_dataset`), gives its gallery images (Market-1501's
``bounding_box_test``), each under its identity number (``0002``), leaving out distractors
and junk; ``folder:PATH`` gives its identity folders (its ``gallery/`` when it is split).
Duplicate images (same SHA-256 of the file bytes, in the gallery or earlier in the run, or
the same pixels in another file, as the gallery judges them:
:meth:`reid.gallery.GalleryBackend.screen`), images the gallery holds under another
identity, and unreadable, empty, oversized or corrupt images are skipped and counted; so are
images where a detector finds nobody or a face model finds no face
(``no_face``: "skip"; "whole" takes the whole image instead; "error" stops at the first,
keeping the batches committed before it).  Entries of the folders given that are not
images (hidden and system files, other kinds of files, unreadable links and folders)
are named in the report too.
"""

from __future__ import annotations

import glob as globbing
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from reid.data import data_layout, data_spec_kind, load_dataset, looks_like_data_spec, parse_data_spec
from reid.data.cameras import camera_from_name
from reid.data.folders import identity_folders
from reid.data.io import ImageLimits, bounded_bytes, decode_image, is_image_file, list_media, read_bytes
from reid.detect import Detector
from reid.detect.base import largest_detection
from reid.errors import ConfigError, ConfigValueError, DataError
from reid.gallery import GalleryBackend, IndexSpec, ItemMeta, open_gallery, thumbnails
from reid.names import identity_name
from reid.models.encoder import Encoder, embed_images
from reid.pipeline.frames import ChooseCrop, whole_box
from reid.pipeline.configs import EnrolConfig as EnrolConfig
from reid.pipeline.subject import SubjectRule, photo_rule
from reid.pipeline.sources import GLOB_CHARS


@dataclass(frozen=True)
class EnrolEntry:
    """One image to enrol and the identity it shows; ``data``: its bytes when it arrived in
    memory (an upload), and then ``path`` is only its name."""

    path: Path
    identity: str
    camera: str | None = None
    data: bytes | None = None


# The reason an image already in the gallery is listed among the skipped.
DUPLICATE = "duplicate of an enrolled image"
# The reason an image is refused when the gallery holds it (the same pixels) under another identity.
OTHER_IDENTITY = "the same image is enrolled as"


class EnrolPlan(list[EnrolEntry]):
    """The images to enrol (a list of entries) and, in ``skipped``, every entry of the
    folders and globs given that is not taken, with the reason."""

    def __init__(self, entries: Sequence[EnrolEntry] = (), skipped: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(entries)
        self.skipped: list[tuple[str, str]] = list(skipped)


@dataclass
class EnrolReport:
    """What an enrolment did; ``skipped`` lists (path, reason) for every image not added,
    ``several_subjects`` (path, note) for every photo in which the detector found more than
    one subject (the note says how many and the box of the one enrolled).  ``other_identity``
    counts images refused as enrolled under another identity, ``near_duplicates`` the added
    ones that are near duplicates of an item of their own identity."""

    gallery: str
    images: int = 0
    added: int = 0
    duplicates: int = 0
    other_identity: int = 0
    near_duplicates: int = 0
    unreadable: int = 0
    no_detection: int = 0
    not_images: int = 0
    several_subjects: list[tuple[str, str]] = field(default_factory=list)
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
            "other_identity": self.other_identity,
            "near_duplicates": self.near_duplicates,
            "unreadable": self.unreadable,
            "no_detection": self.no_detection,
            "not_images": self.not_images,
            "several_subjects": [{"path": p, "note": n} for p, n in self.several_subjects],
            "identities": dict(sorted(self.per_identity.items())),
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "seconds": round(self.seconds, 3),
        }


def camera_of(path: Path) -> str | None:
    """The camera of an image file as ``c<N>`` (see :func:`reid.data.cameras.camera_from_name`)."""
    camera = camera_from_name(path.name)
    return None if camera is None else f"c{camera}"


def plan_enrolment(paths: Sequence[str | Path], identity: str | None = None) -> EnrolPlan:
    """Resolve files, folders and globs into images with identities; raise DataError on bad layout."""
    if not paths:
        raise ConfigError("give at least one image, folder or glob to enrol")
    if identity is not None:
        try:
            identity = identity_name(identity)
        except ConfigError as exc:
            raise ConfigValueError("identity", str(exc).removeprefix("identity "), sep=" ") from None
    entries: list[EnrolEntry] = []
    skipped: list[tuple[str, str]] = []
    for spec in paths:
        text = str(spec)
        path = Path(text)
        if looks_like_data_spec(text) and not path.exists():
            parse_data_spec(text)  # an unknown kind is answered as such, before anything else
            if identity is not None:
                raise ConfigValueError(
                    "identity", f"{identity}: a data set ({text}) names its own identities; give images or a folder", sep=" "
                )
            entries += _dataset_entries(text, skipped)
        elif GLOB_CHARS & set(text) and not path.exists():
            found = sorted(Path(p) for p in globbing.glob(text, recursive=True))
            matches = [p for p in found if is_image_file(p)]
            if not matches:
                raise DataError(f"{text}: no images match this pattern")
            skipped += [(str(p), "not an image file") for p in found if p not in matches and not p.is_dir()]
            entries += [_entry(p, identity or p.parent.name) for p in matches]
        elif path.is_dir():
            if identity is None and data_layout(path) is not None:
                parse_data_spec(text)  # a published layout is no folder of identities: its KIND is named
            entries += _folder_entries(path, identity, skipped)
        elif path.is_file():
            entries.append(_entry(path, identity or path.parent.resolve().name))
        else:
            raise DataError(f"{path}: no such file or folder")
    seen: set[Path] = set()
    unique = []
    for entry in entries:
        try:
            # A folder's name is an identity only when it follows the naming rule (reid.names).
            entry = replace(entry, identity=identity_name(entry.identity))
        except ConfigError as exc:
            skipped.append((str(entry.path), f"its folder's name is no identity name ({exc})"))
            continue
        key = entry.path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(entry)
    return EnrolPlan(unique, skipped)


def _dataset_entries(spec: str, skipped: list[tuple[str, str]]) -> list[EnrolEntry]:
    """The images a data set gives to enrol (module docstring), read by the one parser of
    data sets; raises as :func:`reid.data.load_dataset` (a missing folder named)."""
    dataset = load_dataset(spec)
    if data_spec_kind(spec) == "folder":
        root = dataset.root / "gallery" if (dataset.root / "gallery").is_dir() else dataset.root
        return _folder_entries(root, None, skipped)
    # Distractors (pid 0) are nobody to enrol, as junk is (the reader drops it); what the
    # reader left out of the gallery's folders (files of other kinds) is named.
    folders = {r.path.parent for r in dataset.gallery}
    skipped += [(str(path), reason) for path, reason in dataset.skipped if path.parent in folders]
    entries = [_entry(r.path, f"{r.pid:04d}") for r in dataset.gallery if r.pid > 0]
    if not entries:
        raise DataError(f"{dataset.root}: the data set has no gallery images of known identities to enrol")
    return entries


def _entry(path: Path, identity: str) -> EnrolEntry:
    return EnrolEntry(path, identity, camera_of(path))


def _folder_entries(folder: Path, identity: str | None, skipped: list[tuple[str, str]]) -> list[EnrolEntry]:
    if identity is not None:
        listing = list_media(folder)
        skipped += [(str(p), reason) for p, reason in listing.skipped]
        if not listing.files:
            raise DataError(f"{folder}: folder holds no images")
        return [_entry(p, identity) for p in listing.files]
    outside: list[tuple[Path, str]] = []
    subfolders = identity_folders(folder, outside)
    loose = [p for p, _ in outside if is_image_file(p)]
    if loose:
        raise DataError(
            f"{folder}: images lie directly in the folder ({loose[0].name}, ...); "
            "expected ROOT/<identity>/<image> sub-folders, or give --id NAME"
        )
    skipped += [(str(p), reason) for p, reason in outside]
    entries = []
    for sub in subfolders:
        listing = list_media(sub)
        skipped += [(str(p), reason) for p, reason in listing.skipped]
        entries += [_entry(p, sub.name) for p in listing.files]
    if not entries:
        raise DataError(f"{folder}: no images in ROOT/<identity>/<image> sub-folders")
    return entries


def enrol(
    gallery: GalleryBackend,
    encoder: Encoder,
    entries: Sequence[EnrolEntry],
    config: EnrolConfig | None = None,
    detector: Detector | None = None,
    on_progress: Callable[[int], None] | None = None,
    choose: ChooseCrop = largest_detection,
) -> EnrolReport:
    """Embed ``entries`` and add them to ``gallery`` batch by batch.

    Each photo is cut to its subject by the one crop rule: with a ``detector`` (else the
    one ``config`` names, see :class:`EnrolConfig`), to the detection ``choose`` picks (by
    default the largest: an enrolment photo shows one person, bystanders are smaller),
    aligned when the encoder's card asks for aligned faces.

    Each batch is committed atomically, so an interrupted enrolment keeps every batch
    finished before the interruption.  ``on_progress(n)`` is called as n images are handled.
    ``entries`` from :func:`plan_enrolment` bring the folder entries not taken into the report.
    Raises ModelError on non-finite embeddings, before the batch is committed.
    """
    config = config or EnrolConfig()
    gallery.check_model(encoder.card)
    if detector is None:
        rule = photo_rule(
            config.detect, config.detector, config.no_face, encoder.aligned_face_size, config.margin, choose, encoder.card.kind
        )
    else:
        rule = SubjectRule(detector, config.margin, choose, config.no_face, encoder.aligned_face_size)
    limits = ImageLimits.from_env()
    report = EnrolReport(gallery=gallery.location, images=len(entries))
    if isinstance(entries, EnrolPlan):
        report.not_images = len(entries.skipped)
        report.skipped += entries.skipped
    started = time.perf_counter()
    seen: set[str] = set()
    for start in range(0, len(entries), config.batch_size):
        batch = entries[start : start + config.batch_size]
        embedded = _Embedded(encoder, config.no_face, report, seen)
        for entry in batch:
            # One file's bytes and one decoded photo at a time (the last one is let go
            # before the next is decoded, also when it was skipped).
            image = subjects = None
            payload = _read_bytes(entry, limits)
            digest = hashlib.sha256(payload).hexdigest() if isinstance(payload, bytes) else ""
            if digest and (digest in seen or gallery.known_hashes([digest])):
                report.duplicates += 1
                report.skipped.append((str(entry.path), DUPLICATE))
                continue
            try:
                if isinstance(payload, DataError):
                    raise payload
                image = decode_image(payload, entry.path, limits)
            except DataError as exc:
                report.unreadable += 1
                report.skipped.append((str(entry.path), _reason(exc, entry.path)))
                continue
            del payload
            box = whole_box(image)
            if rule.detector is not None:
                subjects = rule.apply(image, entry.path)
                note = subjects.note()
                if subjects.skipped:
                    report.no_detection += 1
                    report.skipped.append((str(entry.path), note or f"no {rule.kind} found"))
                    continue
                if note is not None and subjects.found > 1:
                    report.several_subjects.append((str(entry.path), note))
                image, box = subjects.crops[0], subjects.boxes[0]
            seen.add(digest)
            embedded.hold(image, ItemMeta(entry.identity, source=str(entry.path), camera=entry.camera, box=box, image_hash=digest))
        embedded.flush()
        if embedded.items:
            # A photo is enrolled once: the same pixels again are a duplicate, under another name refused.
            features = np.concatenate(embedded.features)
            result = gallery.add(features, embedded.items, crops=embedded.thumbs, same_image="skip")
            for position in result.duplicates:
                report.duplicates += 1
                report.skipped.append((embedded.items[position].source, DUPLICATE))
            for position, other in result.conflicts:
                report.other_identity += 1
                report.skipped.append((embedded.items[position].source, f"{OTHER_IDENTITY} {other!r}"))
            report.near_duplicates += result.near_duplicates
            added = set(range(len(embedded.items))) - set(result.duplicates) - {p for p, _ in result.conflicts}
            report.added += len(added)
            report.per_identity.update(embedded.items[i].identity for i in added)
        if on_progress is not None:
            on_progress(len(batch))
    report.seconds = time.perf_counter() - started
    return report


# Decoded pixels a batch holds before they are embedded: a crop keeps its whole decoded
# photo alive, so photos are embedded as soon as this much is held (a photo over it alone),
# and only their thumbnail-sized crops are kept until the batch's commit.
EMBED_BYTES = 64 << 20


class _Embedded:
    """The embedded part of one enrolment batch: features (each (n, D) float32), items and
    thumbnail-sized crops; crops waiting to be embedded are held up to :data:`EMBED_BYTES`."""

    def __init__(self, encoder: Encoder, no_face: str, report: EnrolReport, seen: set[str]) -> None:
        self.encoder, self.no_face, self.report, self.seen = encoder, no_face, report, seen
        self.features: list[np.ndarray] = []
        self.items: list[ItemMeta] = []
        self.thumbs: list[np.ndarray] = []
        self._crops: list[np.ndarray] = []
        self._metas: list[ItemMeta] = []
        self._held = 0

    def hold(self, crop: np.ndarray, meta: ItemMeta) -> None:
        self._crops.append(crop)
        self._metas.append(meta)
        self._held += _held_bytes(crop)
        if self._held >= EMBED_BYTES:
            self.flush()

    def flush(self) -> None:
        """Embed the crops held; a crop the encoder refuses is skipped (or raises) by ``no_face``."""
        if not self._crops:
            return
        crops, metas = self._crops, self._metas
        self._crops, self._metas, self._held = [], [], 0
        result = embed_images(self.encoder, crops, [m.source for m in metas], self.no_face)
        for position, reason in result.failures:
            self.report.no_detection += 1
            self.report.skipped.append((metas[position].source, reason))
            self.seen.discard(metas[position].image_hash or "")
        self.features.append(result.features)
        self.items += [metas[p] for p in result.kept]
        self.thumbs += [thumbnails.shrink(crops[p]) for p in result.kept]


def _held_bytes(array: np.ndarray) -> int:
    """The bytes ``array`` keeps alive: those of the array it is a view of, if it is one."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array.nbytes


def enrol_into(
    location: str | Path,
    encoder: Encoder,
    entries: Sequence[EnrolEntry],
    spec: IndexSpec | None = None,
    config: EnrolConfig | None = None,
    detector: Detector | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> EnrolReport:
    """Open the gallery at ``location`` (a folder, or a URI :func:`reid.gallery.open_gallery`
    takes), or create it (index ``spec``) for ``encoder``'s model, and :func:`enrol`
    ``entries`` into it.

    A gallery this call creates is deleted again when nothing was added to it (every image
    unusable, or a failure before the first batch), so a failed enrolment leaves no gallery
    behind.  Raises what :func:`reid.gallery.open_gallery` and :func:`enrol` raise.
    """
    gallery = open_gallery(location, encoder.card, spec)
    report: EnrolReport | None = None
    try:
        with gallery:
            report = enrol(gallery, encoder, entries, config, detector, on_progress)
            report.gallery_items, report.gallery_identities = len(gallery), gallery.identity_count
    finally:
        if gallery.created and (report is None or report.added == 0):
            gallery.remove_if_empty()
    return report


def _read_bytes(entry: EnrolEntry, limits: ImageLimits) -> bytes | DataError:
    try:
        if entry.data is not None:
            return bounded_bytes(entry.data, entry.path, limits)
        return read_bytes(entry.path, limits)
    except DataError as exc:
        return exc


def _reason(exc: DataError, path: Path) -> str:
    """The problem without the file name the report already gives beside it."""
    return str(exc).removeprefix(f"{path}: ")
