"""The gallery seam: what every gallery backend does.

:class:`GalleryBackend` is all that enrolment, query, calibration, ``reid gallery``,
``reid serve`` and the apps use of a gallery.  A backend stores items with their
embeddings (:meth:`~GalleryBackend.add`, atomically), removes and relabels them, lists
them, reports its model and thresholds, checks itself and exports; it hands search, the
recall measurement and calibration one committed state as a read-only
:class:`GalleryView`, over which the rules shared by every backend run here once
(identities from items, "best"/"mean" scores, ties, duplicates, the naming rule).  :func:`reid.gallery.opener.open_gallery` opens
one by its location.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from reid.errors import ConfigError, GalleryError, NameTakenError
from reid.gallery.calibration import DEFAULT_FAR, MAX_ITEMS, SEED, GalleryCalibration, SceneTracks, calibrate, identities_needed
from reid.gallery.catalogue import meta_uid, now
from reid.gallery.check import NEAR_DUPLICATE, SAME_IMAGE, measure_recall, nearest_kept
from reid.gallery.spec import IndexSpec
from reid.gallery.records import (
    RECALL_QUERIES,
    AddResult,
    CheckReport,
    GalleryInfo,
    GalleryItem,
    GalleryMeta,
    IdentityMatch,
    IdentitySummary,
    ItemMeta,
    ModelFacts,
    RecallReport,
)
from reid.gallery.search import GalleryView, check_search, nearest_identities, nearest_items
from reid.names import name_key


# How add treats an image the gallery already holds (see GalleryBackend.screen).
SAME_IMAGE_RULES = ("keep", "skip")


class GalleryBackend(ABC):
    """A gallery, whatever stores it.  Embeddings are float32 (N, D) rows of the gallery's
    model, L2-normalized on the way in; distances are Euclidean between unit embeddings,
    0..2.  Methods raise GalleryError for a damaged or unwritable gallery (naming where) and
    ConfigError for a bad argument; a failed write leaves the gallery as it was.
    """

    location: str  # a folder or a URI, as messages name the gallery
    catalogue_at: str  # where its items and facts are kept, as messages name them
    meta: GalleryMeta
    created: bool = False  # whether opening it made it
    # The calibration computed now for a state of the gallery: (state, calibration)
    _fresh_calibration: tuple[tuple[object, ...], GalleryCalibration | None] | None = None

    # ----------------------------------------------------------------- what a backend stores

    @property
    @abstractmethod
    def view(self) -> GalleryView:
        """The committed state last loaded (:meth:`refresh` loads a newer one)."""

    @abstractmethod
    def insert(
        self, vectors: np.ndarray, items: Sequence[ItemMeta], crops: Sequence[np.ndarray] | None, skip: bool, same_image: str
    ) -> AddResult:
        """:meth:`add` once its arguments are checked (``vectors``: unit float32 rows): under
        the writers' lock, the naming and case rules, :meth:`screen` (``skip``: skip_duplicates)
        of the named items, one commit."""

    @abstractmethod
    def remove_identity(self, identity: str) -> int:
        """Remove every item of ``identity``; how many.  GalleryError when it has none."""

    @abstractmethod
    def remove_item(self, item_id: int) -> GalleryItem:
        """Remove one item; it as it was.  GalleryError when there is no such item."""

    @abstractmethod
    def rename_identity(self, identity: str, new_name: str) -> int:
        """Relabel ``identity``'s items ``new_name`` (never merging two identities); how many."""

    @abstractmethod
    def identities(self) -> list[IdentitySummary]: ...

    @abstractmethod
    def items(self, identity: str | None = None, limit: int | None = None) -> list[GalleryItem]: ...

    @abstractmethod
    def get_items(self, ids: Sequence[int]) -> dict[int, GalleryItem]: ...

    @abstractmethod
    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` are stored (a hint; :meth:`add` checks again atomically)."""

    @abstractmethod
    def calibration_text(self) -> str | None:
        """The stored calibration's JSON text (:meth:`GalleryCalibration.to_json`), or None."""

    @abstractmethod
    def locked(self) -> AbstractContextManager[object]:
        """The block holds the writers' lock, with the view caught up with the committed state."""

    @abstractmethod
    def set_calibration_text(self, text: str) -> None:
        """Store a calibration's JSON text (inside :meth:`locked`)."""

    @abstractmethod
    def info(self) -> GalleryInfo: ...

    def summary(self, built: str, generation: int, **backend: Any) -> GalleryInfo:
        """What every backend's :meth:`info` says (items, identities, model, index, threshold,
        calibration), with the index kind ``built`` now, the committed ``generation`` and the
        backend's own fields (``segments``, ``bytes``, ``shards``, ``search_device``)."""
        view, stored = self.view, self.calibration
        return GalleryInfo(
            path=self.location,
            items=len(view),
            identities=self.identity_count,
            dim=self.meta.dim,
            index=view.spec.kind,
            index_built=built,
            index_params=view.spec.to_dict(),
            model_fingerprint=self.meta.model_fingerprint,
            model_name=self.meta.model_name,
            model_kind=self.meta.model_kind,
            threshold=self.meta.threshold,
            calibration=None if stored is None else stored.to_dict(),
            created=self.meta.created,
            generation=generation,
            **backend,
        )

    @abstractmethod
    def check(self, queries: int = RECALL_QUERIES, k: int = 10, seed: int = 0) -> CheckReport:
        """Verify everything stored, then measure recall; GalleryError with the first problem."""

    @abstractmethod
    def export(self, path: str | Path) -> int:
        """Write the items to a ``.npz`` (with embeddings) or ``.jsonl``; how many."""

    @abstractmethod
    def refresh(self) -> bool:
        """Load what other processes committed; True when something changed."""

    @abstractmethod
    def reindex(self, spec: IndexSpec) -> None:
        """Rebuild the index as ``spec`` says, keeping every item."""

    @property
    @abstractmethod
    def keeps_thumbnails(self) -> bool: ...

    @abstractmethod
    def thumbnail(self, item_id: int) -> bytes | None:
        """The JPEG thumbnail of item ``item_id``, or None."""

    @abstractmethod
    def remove_if_empty(self) -> bool:
        """Delete the gallery when it holds no item (closing this handle); True when deleted."""

    @abstractmethod
    def close(self) -> None: ...

    # ----------------------------------------------------------------- the same on every backend

    def __enter__(self) -> GalleryBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.view)

    @property
    def dim(self) -> int:
        return self.meta.dim

    @property
    def uid(self) -> str:
        """The id this gallery was made with, stored in it (:func:`reid.gallery.catalogue.uid_of`:
        its creation time for a gallery made before ids); a gallery dropped and made again
        under the same location has another."""
        return meta_uid(self.meta)

    @property
    def threshold(self) -> float | None:
        """The model's threshold when the gallery was created (a distance in (0, 2]), or None."""
        return self.meta.threshold

    @property
    def identity_count(self) -> int:
        return self.view.labels.identity_count

    @property
    def index_kind(self) -> str:
        return self.view.kind

    def add(
        self,
        embeddings: np.ndarray,
        items: Sequence[ItemMeta],
        skip_duplicates: bool = True,
        crops: Sequence[np.ndarray] | None = None,
        same_image: str = "keep",
    ) -> AddResult:
        """Store one batch atomically: after a crash either all of it is there or none.

        ``embeddings`` (N, D) float32, one row per item.  ``crops`` (RGB uint8, one per
        item) become the added items' thumbnails when the gallery keeps them, after the
        commit.  With ``skip_duplicates``, :meth:`screen` leaves out duplicates (their
        positions in ``duplicates``), and with ``same_image="skip"`` judges photos by
        content, refusing images the gallery holds under another identity (``conflicts``).
        Raises ConfigError for a count or shape mismatch, an empty identity or non-finite values.
        """
        vectors = self.checked_vectors(embeddings)
        if len(vectors) != len(items):
            raise ConfigError(f"{len(vectors)} embeddings for {len(items)} items")
        if crops is not None and len(crops) != len(items):
            raise ConfigError(f"{len(crops)} crops for {len(items)} items")
        if same_image not in SAME_IMAGE_RULES:
            raise ConfigError(f"same_image={same_image!r}: choose one of {', '.join(SAME_IMAGE_RULES)}")
        return self.insert(vectors, items, crops, skip_duplicates, same_image)

    def check_model(self, card: ModelFacts) -> None:
        """Raise GalleryError unless ``card`` is the model this gallery was made with.

        Galleries made before fingerprints covered the model card recorded the fingerprint
        of the weights alone; for them the weights are what can be checked.
        """
        stored = self.meta.model_fingerprint
        legacy = bool(card.weights_fingerprint) and card.weights_fingerprint == stored
        if (card.fingerprint != stored and not legacy) or card.embedding_dim != self.meta.dim:
            raise GalleryError(
                f"{self.location}: gallery was made with model {self.meta.model_name!r} "
                f"(fingerprint {self.meta.model_fingerprint}, dim {self.meta.dim}), not model {card.name!r} "
                f"(fingerprint {card.fingerprint}, dim {card.embedding_dim}); use that model or another gallery"
            )

    def embeddings(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored embeddings of ``ids`` (float32; float16 precision for IVF-PQ)."""
        return self.view.originals(np.asarray(ids, dtype=np.int64))

    def search_items(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest items of each query (Q, D): (distances (Q, k) float64, Euclidean
        between unit embeddings, inf where none; item ids (Q, k) int64, -1 pads short rows)."""
        check_search(k)
        return nearest_items(self.view, self.checked_vectors(queries), k)

    def search(self, queries: np.ndarray, k: int = 5, score: str = "best") -> list[list[IdentityMatch]]:
        """The ``k`` nearest identities of each query (Q, D), nearest first (ties: the identity
        of the lower item id first).  ``score="best"``: an identity's distance (0..2) is its
        nearest item's; ``"mean"``: the mean distance to all its items (:mod:`reid.gallery.search`)."""
        check_search(k, score)
        return nearest_identities(self.view, self.checked_vectors(queries), k, score)

    def recall(self, queries: int = RECALL_QUERIES, k: int = 10, seed: int = 0) -> RecallReport:
        """Recall@1 and @k of the index against exact search, with stored items as queries
        (:func:`reid.gallery.check.measure_recall`)."""
        return measure_recall(self.view, queries, k, seed)

    @property
    def calibration(self) -> GalleryCalibration | None:
        """The threshold this gallery calibrated on its own identities and stored
        (:meth:`calibrate`), or None; GalleryError when the stored value is malformed."""
        text = self.calibration_text()
        try:
            return None if text is None else GalleryCalibration.from_json(text)
        except ValueError as exc:
            raise GalleryError(
                f"{self.catalogue_at}: the stored calibration is malformed ({exc}); store a new one with "
                "reid gallery calibrate"
            ) from None

    def calibrate(
        self,
        far: float = DEFAULT_FAR,
        max_items: int = MAX_ITEMS,
        seed: int = SEED,
        store: bool = True,
        scene: SceneTracks | None = None,
    ) -> GalleryCalibration:
        """The threshold at false-accept rate ``far`` on the impostor pairs of this gallery's
        identities (:mod:`reid.gallery.calibration`: ``max_items`` sampled items, from
        ``seed``), and with ``scene`` the tighter of that and the scene's threshold at the
        same rate on its tracks' pairs; stored in the gallery when ``store`` (under the
        writers' lock, on the state it has then).  Raises ConfigError as
        :func:`reid.gallery.calibration.calibrate`, and when no two of the scene's tracks
        share a frame.
        """
        part = None if scene is None else scene.calibrate(far)
        if not store:
            return self.calibrated(far, max_items, seed).with_scene(part)
        with self.locked():
            calibration = replace(self.calibrated(far, max_items, seed).with_scene(part), stored=True)
            self.set_calibration_text(calibration.to_json())
        return calibration

    def calibrated(self, far: float, max_items: int = MAX_ITEMS, seed: int = SEED) -> GalleryCalibration:
        """The threshold at ``far`` on the impostor pairs of the loaded state's identities
        (:func:`reid.gallery.calibration.calibrate`), not stored."""
        labels = self.view.labels
        return calibrate(labels.ids, labels.codes, self.view.originals, far, max_items, seed, created=now())

    def current_calibration(self) -> GalleryCalibration | None:
        """The gallery's own threshold a query answers at unless given one, or None.

        The stored calibration while the gallery holds what it was computed on; after a
        later write, one computed now at the stored rate.  A gallery that stored none
        calibrates now at :data:`~reid.gallery.calibration.DEFAULT_FAR` once it holds
        enough identities for the estimate (:func:`~reid.gallery.calibration.identities_needed`).
        """
        stored = self.calibration
        ids = self.view.labels.ids
        last_id = int(ids[-1]) if len(ids) else 0
        if stored is not None and stored.current(len(self), self.identity_count, last_id):
            return stored
        if stored is None and self.identity_count < identities_needed(DEFAULT_FAR):
            return None
        # A service asks before every request: compute once per state of the gallery.
        key = (len(self), self.identity_count, last_id, stored)
        if self._fresh_calibration is not None and self._fresh_calibration[0] == key:
            return self._fresh_calibration[1]
        try:
            # The scene's pairs do not change with the gallery's items: it stays part of it.
            fresh = self.calibrated(stored.far if stored is not None else DEFAULT_FAR)
            fresh = fresh.with_scene(None if stored is None else stored.scene)
        except ConfigError:
            return None
        chosen = fresh if stored is not None or fresh.enough else None
        self._fresh_calibration = (key, chosen)
        return chosen

    # ----------------------------------------------------------------- checks of what comes in

    def checked_vectors(self, embeddings: np.ndarray) -> np.ndarray:
        """``embeddings`` as C-contiguous float32 (N, D) unit rows; ConfigError for another
        dimension or non-finite values."""
        vectors = np.asarray(embeddings, dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors[None, :]
        if vectors.ndim != 2 or vectors.shape[1] != self.meta.dim:
            raise ConfigError(
                f"{self.location}: embeddings of shape {vectors.shape}, gallery dimension is {self.meta.dim}"
            )
        if not np.isfinite(vectors).all():
            raise ConfigError(f"{self.location}: embeddings contain NaN or infinity")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)

    def check_case(self, labels: set[str], leaving: str | None = None) -> None:
        """NameTakenError when a label of ``labels`` that is not an identity of the gallery
        compares equal (:func:`reid.names.name_key`: case-folded) to one that is (other than
        ``leaving``, the one being renamed) or to another of ``labels``."""
        present = self.view.labels.present()
        keys = {name_key(name): name for name in present if name != leaving}
        for label in sorted(labels - present):
            other = keys.setdefault(name_key(label), label)
            if other != label:
                raise NameTakenError(
                    f"{self.location}: identity {label!r} differs from the identity {other!r} only in case; "
                    f"names compare case-insensitively: use {other!r}, or rename it"
                )

    def screen(
        self, items: Sequence[ItemMeta], vectors: np.ndarray, skip_duplicates: bool = True, same_image: str = "keep"
    ) -> tuple[list[int], AddResult]:
        """The positions of ``items`` (with unit ``vectors``) to store, and what was left out;
        call it under the writers' lock, so the view is the committed state.

        With ``skip_duplicates`` an item whose ``image_hash`` is stored or repeats in the
        batch is a duplicate.  With ``same_image="skip"`` as well, photos (items with an
        image hash) are judged by content: one within :data:`~reid.gallery.check.SAME_IMAGE`
        of a stored item or an earlier photo of the batch is the same image (the same pixels
        saved as another file): of its own identity a duplicate, of another refused (its
        position and that identity in ``conflicts``); stored photos within
        :data:`~reid.gallery.check.NEAR_DUPLICATE` of their own identity's nearest item are
        counted in ``near_duplicates``.  ``"keep"`` judges by hash alone, as add always did
        (a search per photo saved); :meth:`check` counts what it let in.
        """
        if not skip_duplicates:
            return list(range(len(items))), AddResult()
        known = self.known_hashes([i.image_hash for i in items if i.image_hash])
        keep, result = [], AddResult()
        for position, item in enumerate(items):
            if item.image_hash and item.image_hash in known:
                result.duplicates.append(position)
            else:
                keep.append(position)
                known.add(item.image_hash or "")
        photos = [p for p in keep if items[p].image_hash] if same_image == "skip" else []
        for position, (distance, identity) in zip(photos, nearest_kept(self.view, items, vectors, photos), strict=True):
            own = identity == items[position].identity
            if distance <= SAME_IMAGE:
                keep.remove(position)
                if own:
                    result.duplicates.append(position)
                else:
                    result.conflicts.append((position, identity))
            elif distance <= NEAR_DUPLICATE and own:
                result.near_duplicates += 1
        result.duplicates.sort()
        return keep, result


def named(items: Sequence[ItemMeta], rule: Callable[[str], str]) -> list[ItemMeta]:
    """``items`` with their identities in the naming ``rule``'s form (the one rule,
    :func:`reid.names.identity_name`, NFC); ConfigError naming the item's source for a label
    the rule refuses."""
    canonical: dict[str, str] = {}
    out = []
    for item in items:
        label = canonical.get(item.identity) if isinstance(item.identity, str) else None
        if label is None:
            try:
                label = canonical[item.identity] = rule(item.identity)
            except ConfigError as exc:
                raise ConfigError(f"{item.source or 'item'}: {exc}") from None
        out.append(item if label == item.identity else replace(item, identity=label))
    return out
