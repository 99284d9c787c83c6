"""What the HTTP routes call: the served galleries, models and detectors, and one method
per operation.  Every rule is the library's (:mod:`reid.gallery`, :mod:`reid.pipeline`,
:mod:`reid.decision`, :mod:`reid.data.io`); this module only finds the gallery, model and
detector a request is for and shapes the answers as plain data.

Methods block (decoding, detection, embedding, SQLite, FAISS, a database's answers) and run
on the worker pool's threads.  SQLite handles and database connections belong to the thread
that opened them, so each thread opens its own handle of a gallery and refreshes it before
each use, which is also how it sees what other threads, processes and hosts committed; writes
serialize through the gallery's lock (a PostgreSQL gallery's: a transaction-level advisory
lock every host takes).  Galleries are found where :mod:`reid.serve.places` says.
"""

from __future__ import annotations

import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from reid.data.io import ImageLimits, bounded_bytes, decode_image
from reid.decision import Threshold, nearest_identity, pair_distance, resolve_threshold
from reid.detect import Detection, Detector
from reid.draw import label_layout, make_label
from reid.errors import ConfigError, GalleryBusyError, GalleryError, ReidError
from reid.gallery import DB_FILE, GalleryBackend, IndexSpec, destroy_gallery, open_gallery
from reid.gallery.opener import backend_module, gallery_names
from reid.models import Encoder, load_encoder
from reid.models.encoder import embed_images
from reid.pipeline import DUPLICATE, EnrolConfig, EnrolEntry, SubjectRule, Subjects, enrol, photo_rule
from reid.names import (
    FORBIDDEN_CATEGORIES,
    MAX_IDENTITY,
    check_identity_id,
    identity_id,
    identity_name,
    name_key,
)
from reid.serve.config import GallerySettings, ServeConfig
from reid.serve.keys import AdminKey, ApiKey, KeyStore
from reid.serve.places import GalleryPlaces
from reid.serve.redact import hide_paths
from reid.serve.watches import Watch, Watches

MAX_UPLOAD_NAME = 200
# Gallery handles a pool thread keeps open (each holds its database file open): those of
# the galleries it used last.
HANDLES_PER_THREAD = 8


class ServeError(ReidError):
    """A request the service refuses: ``status`` (HTTP) and ``code`` say how."""

    status = 400
    code = "bad_request"


class NotFound(ServeError):
    status, code = 404, "not_found"


class Conflict(ServeError):
    status, code = 409, "conflict"


@dataclass(frozen=True)
class Upload:
    """One uploaded image: the name it came with and its bytes."""

    name: str
    data: bytes


def upload_names(uploads: Sequence[Upload]) -> list[str]:
    """A name per upload, as enrolment records and reports it: the file's own name (no
    folders, no control or invisible characters, at most 200 characters), made unique within the request."""
    names: list[str] = []
    taken: set[str] = set()
    for number, upload in enumerate(uploads, 1):
        base = upload.name.replace("\\", "/").rsplit("/", 1)[-1]
        base = "".join(c for c in base if unicodedata.category(c) not in FORBIDDEN_CATEGORIES).strip()[:MAX_UPLOAD_NAME]
        name = base or f"upload-{number}"
        candidate, n = name, 2
        while candidate in taken:
            candidate, n = f"{name} ({n})", n + 1
        taken.add(candidate)
        names.append(candidate)
    return names


class LockedDetector:
    """A detector shared by the pool's threads, one call at a time: OpenCV's DNN nets and
    cascades are not safe to call from several threads at once."""

    def __init__(self, detector: Detector) -> None:
        self.detector, self.kind, self.confident_score = detector, detector.kind, detector.confident_score
        self._lock = threading.Lock()

    def detect(self, image: np.ndarray) -> list[Detection]:
        with self._lock:
            return self.detector.detect(image)


# A photo's crop rule is found by the gallery's detect, detector and no_face settings and the
# served model (whose card says whether faces are aligned, and what a detector must find).
RuleKey = tuple[str, str | None, str, str]


def _rule_key(settings: GallerySettings, model: str) -> RuleKey:
    return settings.detect, settings.detector, settings.no_face, model


def crop_rules(config: ServeConfig, models: dict[str, Encoder]) -> dict[RuleKey, SubjectRule]:
    """The crop rule (:func:`reid.pipeline.photo_rule`) of the defaults and of every
    gallery's settings, for each model of ``models`` the settings may serve with, their
    detectors built and locked for the pool's threads.  Raises ConfigError naming the
    setting and model, or ModelError for a detector that cannot run here."""
    rules: dict[RuleKey, SubjectRule] = {}
    for where, settings in (("defaults", config.defaults), *((f"gallery {g}", s) for g, s in config.galleries.items())):
        for model in [settings.model] if settings.model is not None else list(models):
            key = _rule_key(settings, model)
            if key in rules:
                continue
            encoder = models[model]
            try:
                rule = photo_rule(
                    settings.detect, settings.detector, settings.no_face, encoder.aligned_face_size, kind=encoder.card.kind
                )
            except ConfigError as exc:
                raise ConfigError(f"{where} with model {model}: {exc}") from None
            if rule.detector is not None:
                rule = replace(rule, detector=LockedDetector(rule.detector))
            rules[key] = rule
    return rules


class Service:
    """The served root: models by name, each gallery setting's crop rule per model, the
    keys, the admin key.

    Build it with :meth:`load` (which loads every model and detector, so a server is ready
    before its port opens).  Methods raise ServeError subclasses, and the library's
    ReidError subclasses with their one line.
    """

    def __init__(
        self,
        config: ServeConfig,
        models: dict[str, Encoder],
        rules: dict[RuleKey, SubjectRule],
        keys: KeyStore,
        admin: AdminKey | None,
    ) -> None:
        self.config, self.models, self.rules, self.keys, self.admin = config, models, rules, keys, admin
        self.places = places_of(config)
        self.limits = ImageLimits.from_env()
        self.watches = Watches(config)
        self._local = threading.local()

    @classmethod
    def load(cls, config: ServeConfig, admin: AdminKey | None = None) -> Service:
        """Load the models ``config`` names and the detectors of every gallery setting's crop
        rule (:func:`reid.pipeline.photo_rule`, for each model the setting may serve with);
        ConfigError/ModelError with one line when one cannot be loaded, or when no model is
        named."""
        if not config.models:
            raise ConfigError("no model to serve: name one under 'models' in serve.yaml, or give --model")
        if admin is None and not config.no_auth:
            raise ConfigError(
                "no admin key: set REID_SERVE_ADMIN_KEY or REID_SERVE_ADMIN_KEY_FILE (or --admin-key-file), "
                "or serve a loopback host with --no-auth"
            )
        # The galleries' root, their places and the keys first: a wrong path or location is
        # named before a published model is downloaded.
        try:
            config.root.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ConfigError(f"{config.root}: the root of the galleries must be a folder, and is a file") from None
        places = places_of(config)
        lite = places.lite_files()
        if lite and config.workers > 1:
            raise ConfigError(f"workers: {lite[0]} is a milvus-lite file, which one process at a time opens; serve it with workers: 1")
        # This process holds each milvus-lite file from now on: a second server of one is refused here, in one line.
        for location in lite:
            gallery_names(location)
        keys = KeyStore(config.keys_path)
        # Keys made before keys were bound to a gallery's id: bound to the gallery there now.
        keys.bind(places.uid)
        models = {name: load_encoder(path) for name, path in config.models.items()}
        rules = crop_rules(config, models)
        return cls(config, models, rules, keys, admin)

    # ----------------------------------------------------------------- galleries

    def location(self, name: str) -> str | Path:
        """Where gallery ``name`` is kept (:meth:`reid.serve.places.GalleryPlaces.location`)."""
        return self.places.location(name)

    def gallery_names(self) -> list[str]:
        """The galleries served (:meth:`reid.serve.places.GalleryPlaces.names`), sorted."""
        return self.places.names()

    def exists(self, name: str) -> bool:
        return self.places.exists(name)

    def gallery_uid(self, name: str) -> str:
        """The id gallery ``name`` was made with (:attr:`reid.gallery.GalleryBackend.uid`);
        NotFound when there is none."""
        uid = self.places.uid(name)
        if uid is None:
            raise NotFound(f"no gallery {name!r}")
        return uid

    def key_opens(self, key: ApiKey) -> bool:
        """True when the gallery ``key`` was made for is still there: the same name *and*
        the same gallery id (a gallery deleted and made again under its name is another).
        A folder's id is read from its database; a backend's from this thread's handle,
        refreshed (one query), which the request then uses.  GalleryBusyError when its
        database or server cannot be reached: an outage is no revoked key."""
        if not key.gallery_uid:
            return False
        try:
            if self.places.is_folder(key.gallery):
                return self.places.uid(key.gallery) == key.gallery_uid
            return self._handle(key.gallery).uid == key.gallery_uid
        except GalleryBusyError:
            raise
        except ReidError:
            return False

    def create_key(self, gallery: str, scopes: Sequence[str]) -> tuple[ApiKey, str]:
        """A new key of ``gallery`` (bound to its id), made under the keys file's lock, which
        deleting a gallery holds too: a key is never made for a gallery being deleted."""
        return self.keys.create(gallery, tuple(scopes), self.gallery_uid)

    def _handle(self, name: str) -> GalleryBackend:
        """This thread's handle of gallery ``name``, caught up with every commit; NotFound
        when the gallery is not there (or was deleted since the handle was opened).  A
        thread keeps the handles of the :data:`HANDLES_PER_THREAD` galleries it used last
        and closes the others, so the files and connections a server holds open do not
        grow with the number of galleries.

        A folder's handle is the one of its database file (a folder made again has another
        file).  A backend's handle refreshes; when that fails (the gallery was dropped, the
        connection lost) it is opened again, and NotFound when the gallery is not there."""
        location = self.location(name)
        handles: OrderedDict[str, tuple[int | None, GalleryBackend]] = self._local.__dict__.setdefault("handles", OrderedDict())
        folder = backend_module(location) is None
        inode = _inode(Path(location)) if folder else None
        held = handles.get(name)
        if held is not None and folder and held[0] != inode:
            self._drop_handle(name)
            held = None
        if folder and inode is None:
            raise NotFound(f"no gallery {name!r}")
        if held is not None:
            handles.move_to_end(name)
            try:
                held[1].refresh()
                return held[1]
            except GalleryError:
                if folder:
                    raise
                self._drop_handle(name)
        while len(handles) >= HANDLES_PER_THREAD:
            handles.popitem(last=False)[1][1].close()
        try:
            gallery = open_gallery(location, lock_timeout=self.config.lock_timeout)
        except GalleryError:
            if not folder and self.places.uid(name) is None:
                raise NotFound(f"no gallery {name!r}") from None
            raise
        handles[name] = (inode, gallery)
        return gallery

    def _drop_handle(self, name: str) -> None:
        """Close this thread's handle of gallery ``name``, if it holds one."""
        held = self._local.__dict__.get("handles", {}).pop(name, None)
        if held is not None:
            held[1].close()

    def _model(self, name: str, gallery: GalleryBackend) -> tuple[str, Encoder]:
        """The served model that made ``gallery``: its settings' model, else the one whose
        fingerprint it records; Conflict when none is loaded."""
        wanted = self.config.settings(name).model
        candidates = [wanted] if wanted is not None else list(self.models)
        for model in candidates:
            try:
                gallery.check_model(self.models[model].card)
            except GalleryError:
                continue
            return model, self.models[model]
        raise Conflict(
            f"gallery {name!r} was made with model {gallery.meta.model_name!r} "
            f"(fingerprint {gallery.meta.model_fingerprint}), which this server has not loaded"
        )

    def _rule(self, name: str, model: str) -> SubjectRule:
        """The crop rule of gallery ``name`` served by ``model`` (the largest detection of
        a photo, aligned as the model's card asks), built at start (:func:`crop_rules`)."""
        key = _rule_key(self.config.settings(name), model)
        if key not in self.rules:
            raise ConfigError(f"gallery {name!r}: no crop rule was loaded for model {model!r}; build the service with crop_rules")
        return self.rules[key]

    def _shown(self, name: str, threshold: Threshold) -> dict[str, Any]:
        """``threshold`` as an answer says it, the gallery named by its name: a detail or note
        that names the gallery by its location (a folder, a database) is no client's business."""
        known = {str(self.location(name)): f"gallery {name}"}
        return {
            "value": threshold.value,
            "source": threshold.source,
            "detail": hide_paths(threshold.detail, known) if threshold.detail else threshold.detail,
            "note": hide_paths(threshold.note, known) if threshold.note else threshold.note,
        }

    def given_threshold(self, name: str, request: float | None = None) -> tuple[float | None, str]:
        """The threshold a request of gallery ``name`` gives (``request``), else the one its
        serve settings give, with which of them gave it: the ``given`` of
        :func:`reid.decision.resolve_threshold`, which decides the rest."""
        if request is not None:
            return request, "request"
        return self.config.settings(name).threshold, "serve settings"

    def info(self, name: str) -> dict[str, Any]:
        gallery = self._handle(name)
        facts = gallery.info()
        settings = self.config.settings(name)
        model, threshold = None, None
        try:
            model, encoder = self._model(name, gallery)
            given, detail = self.given_threshold(name)
            threshold = resolve_threshold(given, encoder.card, gallery, given_detail=detail)
        except (Conflict, ConfigError):
            pass
        return {
            "name": name,
            "items": facts.items,
            "identities": facts.identities,
            "model": model,
            "model_name": facts.model_name,
            "model_fingerprint": facts.model_fingerprint,
            "model_kind": facts.model_kind,
            "dim": facts.dim,
            "index": facts.index,
            "created": facts.created,
            "threshold": None if threshold is None else self._shown(name, threshold),
            "detect": settings.detect,
            "detector": settings.detector,
            "no_face": settings.no_face,
            "thumbnails": gallery.keeps_thumbnails,
        }

    def create_gallery(
        self, name: str, model: str | None = None, index: str | None = None, keep_thumbnails: bool = True
    ) -> dict[str, Any]:
        """A new, empty gallery ``name`` for ``model`` (default: the first model served),
        keeping a thumbnail of each enrolled crop unless ``keep_thumbnails`` is False."""
        location = self.location(name)
        model = model or self.config.settings(name).model or next(iter(self.models))
        if model not in self.models:
            raise ConfigError(f"model {model[:80]!r} is not served; choose one of {', '.join(self.models)}")
        if self.exists(name):
            raise Conflict(f"gallery {name!r} already exists")
        same = [other for other in self.gallery_names() if name_key(other) == name_key(name)]
        if same:
            raise Conflict(
                f"gallery {name!r} differs from the gallery {same[0]!r} only in case; gallery names compare case-insensitively"
            )
        spec = IndexSpec(kind=index) if index is not None else None
        try:
            open_gallery(
                location, self.models[model].card, spec, create=True, lock_timeout=self.config.lock_timeout,
                thumbnails=keep_thumbnails,
            ).close()
        except GalleryError as exc:
            raise Conflict(str(exc)) from None
        return self.info(name)

    def delete_gallery(self, name: str) -> int:
        """Delete gallery ``name`` with its items and its keys; how many items it held.  The
        gallery is deleted and its keys revoked under the keys file's lock (see :meth:`create_key`)."""

        def destroy() -> int:
            if not self.exists(name):
                raise NotFound(f"no gallery {name!r}")
            self._drop_handle(name)
            return destroy_gallery(self.location(name), self.config.lock_timeout)

        return self.keys.revoke_gallery(name, destroy)

    # ----------------------------------------------------------------- identities

    def identities(self, name: str, offset: int, limit: int) -> dict[str, Any]:
        summaries = self._handle(name).identities()
        page = summaries[offset : offset + limit]
        return {
            "identities": [
                {"identity": s.identity, "id": identity_id(s.identity), "items": s.items,
                 "first_enrolled": s.first_enrolled, "last_enrolled": s.last_enrolled}
                for s in page
            ],  # fmt: skip
            "total": len(summaries),
            "offset": offset,
            "limit": limit,
        }

    def label(self, name: str, identity: str) -> str:
        """The stored label of the identity ``identity`` names in gallery ``name``: the exact
        label, else its NFC form (the one rule's form, :func:`reid.names.identity_name`);
        never another identity (case is not folded here).  NotFound when neither has items."""
        gallery = self._handle(name)
        for label in dict.fromkeys((identity, unicodedata.normalize("NFC", identity))):
            if gallery.items(label, limit=1):
                return label
        raise NotFound(f"no identity {identity[:MAX_IDENTITY]!r} in gallery {name!r}")

    def label_of_id(self, name: str, ident: str) -> str:
        """The stored label whose :func:`reid.names.identity_id` is ``ident``; NotFound when
        no identity of gallery ``name`` has it (Conflict, never a guess, if two had)."""
        check_identity_id(ident)
        labels = [s.identity for s in self._handle(name).identities() if identity_id(s.identity) == ident]
        if not labels:
            raise NotFound(f"no identity with id {ident} in gallery {name!r}")
        if len(labels) > 1:
            raise Conflict(f"{len(labels)} identities of gallery {name!r} have the id {ident}; address them by name")
        return labels[0]

    def identity(self, name: str, identity: str) -> dict[str, Any]:
        label = self.label(name, identity)
        items = self._handle(name).items(label)
        return {"identity": label, "id": identity_id(label), "items": [_item(i) for i in items]}

    def rename(self, name: str, identity: str, new_name: str) -> dict[str, Any]:
        new_name = identity_name(new_name, "the new name")
        label = self.label(name, identity)
        try:
            count = self._handle(name).rename_identity(label, new_name)
        except ConfigError as exc:
            raise Conflict(str(exc)) from None
        return {"identity": new_name, "id": identity_id(new_name), "renamed": label, "items": count}

    def delete_identity(self, name: str, identity: str) -> dict[str, Any]:
        """Delete every item of the identity ``identity`` names (:meth:`label`); the answer
        names exactly the label deleted."""
        label = self.label(name, identity)
        return {"deleted": label, "id": identity_id(label), "items": self._handle(name).remove_identity(label)}

    def delete_item(self, name: str, identity: str, item_id: int) -> dict[str, Any]:
        identity = self.label(name, identity)
        gallery = self._handle(name)
        item = gallery.get_items([item_id]).get(item_id)
        if item is None or item.identity != identity:
            raise NotFound(f"no item {item_id} of identity {identity[:MAX_IDENTITY]!r} in gallery {name!r}")
        return _item(gallery.remove_item(item_id))

    def thumbnail(self, name: str, item_id: int) -> bytes:
        """The JPEG thumbnail of item ``item_id``; NotFound when the item or its thumbnail is not there."""
        gallery = self._handle(name)
        if item_id not in gallery.get_items([item_id]):
            raise NotFound(f"no item {item_id} in gallery {name!r}")
        thumbnail = gallery.thumbnail(item_id)
        if thumbnail is None:
            raise NotFound(f"item {item_id} of gallery {name!r} has no thumbnail")
        return thumbnail

    def start_watch(self, name: str, source: str, max_frames: int | None = None) -> Watch:
        """Start a tracked query of ``source`` against gallery ``name`` (see :mod:`reid.serve.watches`)."""
        gallery = self._handle(name)
        _, encoder = self._model(name, gallery)
        return self.watches.start(name, self.location(name), gallery.uid, encoder, source, self.config.settings(name), max_frames)

    # ----------------------------------------------------------------- images

    def enrol(self, name: str, identity: str, uploads: Sequence[Upload]) -> dict[str, Any]:
        """Enrol ``uploads`` as ``identity``, in one batch (one commit: all of them that are
        usable, or none), through :func:`reid.pipeline.enrol`; per file: added, duplicate or
        skipped with the reason, and for a photo in which several were found, a note of how
        many and the box of the one enrolled (the largest)."""
        identity = identity_name(identity)
        gallery = self._handle(name)
        model, encoder = self._model(name, gallery)
        rule = self._rule(name, model)
        names = upload_names(uploads)
        entries = [EnrolEntry(Path(n), identity, data=u.data) for n, u in zip(names, uploads, strict=True)]
        # Without a detector the rule takes photos whole, which "none" says to enrol.
        detect = "auto" if rule.detector is not None else "none"
        config = EnrolConfig(batch_size=max(len(entries), 1), no_face=rule.none_found, detect=detect)
        report = enrol(gallery, encoder, entries, config, detector=rule.detector)
        reasons, notes = dict(report.skipped), dict(report.several_subjects)
        files = []
        for n in names:
            reason = reasons.get(n)
            outcome = "added" if reason is None else "duplicate" if reason == DUPLICATE else "skipped"
            files.append({"name": n, "outcome": outcome, "reason": reason, "note": notes.get(n) if reason is None else None})
        return {
            "identity": identity,
            "id": identity_id(identity),
            "added": report.added,
            "duplicates": report.duplicates,
            "skipped": report.unreadable + report.no_detection,
            "files": files,
            "gallery_items": len(gallery),
        }

    def search(self, name: str, upload: Upload, top_k: int | None = None, threshold: float | None = None) -> dict[str, Any]:
        """Every subject of the photo (each detection, or the whole photo without a
        detector or when nothing is found and ``no_face`` is "whole"): its box, the top-k
        identities, and the decision at the threshold; ``note`` says when the detector found
        nothing.  DataError naming the upload when nothing is found and ``no_face`` is "error"."""
        gallery = self._handle(name)
        model, encoder = self._model(name, gallery)
        given, detail = self.given_threshold(name, threshold)
        chosen = resolve_threshold(given, encoder.card, gallery, given_detail=detail)
        k = top_k or self.config.settings(name).top_k
        boxes, scores, features, note, frame = self._subjects(name, model, upload, encoder)
        found = gallery.search(features, k) if len(features) and len(gallery) else [[] for _ in boxes]
        subjects = []
        for box, score, top in zip(boxes, scores, found, strict=True):
            nearest = top[0] if top else None
            identity = nearest_identity(top, chosen)
            subjects.append({
                "box": list(box),
                "detection_score": score,
                "identity": identity,
                "decision": "unknown" if identity is None else "known",
                "distance": None if nearest is None else round(nearest.distance, 6),
                "matches": [{**m.to_dict(), "item": m.item_id} for m in top],
            })  # fmt: skip
        # Numbered from 1, as the page lists them; laid out as the annotated video's labels.
        labels = [make_label(one["box"], n + 1, one["identity"], one["distance"]) for n, one in enumerate(subjects)]
        for subject, label in zip(subjects, label_layout(labels, frame), strict=True):
            subject["label"] = label
        return {"gallery": name, "model": model, "threshold": self._shown(name, chosen), "subjects": subjects, "note": note}

    def verify(
        self, name: str, image: Upload, other: Upload | None = None, identity: str | None = None,
        threshold: float | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """1:1: the subject of ``image`` against that of ``other`` or against the enrolled
        ``identity`` (its nearest item); the distance and same or different.  A photo in
        which nothing is found is a DataError naming it unless ``no_face`` is "whole" (as
        ``reid verify`` of two images: a pair is compared or nothing is)."""
        if (other is None) == (identity is None):
            raise ConfigError("verify one image against a second image or against an identity, not both or neither")
        gallery = self._handle(name)
        model, encoder = self._model(name, gallery)
        given, detail = self.given_threshold(name, threshold)
        chosen = resolve_threshold(given, encoder.card, gallery, given_detail=detail)
        probe = self._subject(name, model, image, encoder)
        if other is not None:
            distance = float(pair_distance(probe, self._subject(name, model, other, encoder))[0])
        else:
            items = gallery.items(self.label(name, str(identity)))
            enrolled = gallery.embeddings([i.id for i in items])
            distance = float(pair_distance(np.repeat(probe, len(enrolled), axis=0), enrolled).min())
        return {
            "distance": round(distance, 6),
            "same": distance <= chosen.value,
            "identity": identity,
            "model": model,
            "threshold": self._shown(name, chosen),
        }

    def embed(self, name: str, upload: Upload) -> dict[str, Any]:
        """The embedding (unit float32 rows, as lists) of every subject of the photo, with
        the model's fingerprint."""
        gallery = self._handle(name)
        model, encoder = self._model(name, gallery)
        boxes, scores, features, note, _ = self._subjects(name, model, upload, encoder)
        return {
            "model": model,
            "fingerprint": encoder.card.fingerprint,
            "dim": encoder.dim,
            "subjects": [
                {"box": list(b), "detection_score": s, "embedding": [float(v) for v in f]}
                for b, s, f in zip(boxes, scores, features, strict=True)
            ],
            "note": note,
        }

    def _decode(self, upload: Upload) -> np.ndarray:
        return decode_image(bounded_bytes(upload.data, upload.name, self.limits), upload.name, self.limits)

    def _subjects(
        self, name: str, model: str, upload: Upload, encoder: Encoder
    ) -> tuple[list[Any], list[float | None], np.ndarray, str | None, tuple[int, int]]:
        """Boxes, detector scores and embeddings of every subject of the photo, the
        photo's note (:meth:`reid.pipeline.Subjects.note`) and its (height, width) in
        pixels; the crops a face model refuses go by ``no_face`` as in
        :func:`reid.models.encoder.embed_images`."""
        rule = replace(self._rule(name, model), pick="all")
        image = self._decode(upload)
        frame = (int(image.shape[0]), int(image.shape[1]))
        cut: Subjects = rule.apply(image, upload.name)
        if cut.skipped:
            return [], [], np.zeros((0, encoder.dim), np.float32), cut.note(), frame
        labels = [f"{upload.name} subject {n}" for n in range(len(cut.crops))]
        embedded = embed_images(encoder, cut.crops, labels, rule.none_found)
        boxes = [cut.boxes[p] for p in embedded.kept]
        scores = [None if cut.scores[p] is None else round(float(cut.scores[p]), 4) for p in embedded.kept]
        return boxes, scores, embedded.features, cut.note(), frame

    def _subject(self, name: str, model: str, upload: Upload, encoder: Encoder) -> np.ndarray:
        """The (1, D) embedding of a photo of one subject: the largest detection, as in
        enrolment, or the whole photo; DataError naming the upload when nothing is found
        (or a face model refuses it) unless ``no_face`` is "whole"."""
        rule = self._rule(name, model)
        policy = "whole" if rule.none_found == "whole" else "error"
        subject = replace(rule, none_found=policy).apply(self._decode(upload), upload.name)
        return embed_images(encoder, subject.crops, [upload.name], policy).features


def places_of(config: ServeConfig) -> GalleryPlaces:
    """Where ``config``'s galleries are kept (:mod:`reid.serve.places`)."""
    named = {name: settings.location for name, settings in config.galleries.items() if settings.location is not None}
    return GalleryPlaces(config.root, config.gallery_location, named)


def _inode(folder: Path) -> int | None:
    """The inode of ``folder``'s gallery database, or None when there is none."""
    try:
        return (folder / DB_FILE).stat().st_ino
    except OSError:
        return None




def _item(item: Any) -> dict[str, Any]:
    return {
        "id": item.id,
        "identity": item.identity,
        # Enrolled on the host (reid enroll), a source may be the server's own path: its name only.
        "source": hide_paths(item.source),
        "box": None if item.box is None else list(item.box),
        "enrolled": item.enrolled,
    }
