"""A gallery: FAISS indexes of embeddings whose ids are row ids of an SQLite table of items.

Folder layout::

    gallery.db                    items, meta (model, dimension, threshold, index), shards, segments
    index-GGGGGGGG-xxxx.faiss     an index snapshot (one per shard) named by the database
    vec-GGGGGGGG-xxxx.f16         the float16 embeddings beside an IVF-PQ snapshot
    template-GGGGGGGG-xxxx.faiss  trained, empty IVF / IVF-PQ index new shards start from
    seg-GGGGGGGG-xxxx.bin         batches added since the active shard's snapshot (ids + vectors)
    .lock                         the writers' file lock

The database is the single commit point.  A writer takes the lock, writes its new files
(temporary name, fsync, rename), then commits one SQLite transaction that inserts the items
and names the new files.  A crash before that commit leaves the database (rolled back by
SQLite's journal) naming only the old files, which are still there; files no commit names
are deleted by the next writer.  On open, every named file's size and checksum are checked
and the ids in the indexes, taken together, must be exactly the ids in the items table.

A gallery is one or more shards (see :mod:`reid.gallery.shards`): sealed ones in the
``shards`` table, and the active one, which takes new items, in ``meta``.

This module holds what keeps that promise: :class:`Gallery` takes the lock, catches up
with the disk, writes files and commits (:meth:`Gallery._writing`, :meth:`Gallery._commit`).
The rest lives beside it: the SQL in :mod:`reid.gallery.catalogue`, search and identity
scoring in :mod:`reid.gallery.search`, the self-check and recall in
:mod:`reid.gallery.check`, export in :mod:`reid.gallery.export`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from reid.errors import ConfigError, GalleryError, NameTakenError
from reid.names import identity_name, name_key
from reid.gallery.calibration import (
    DEFAULT_FAR,
    MAX_ITEMS,
    SEED,
    GalleryCalibration,
    SceneTracks,
    calibrate,
    identities_needed,
)
from reid.gallery.catalogue import DB_FILE, FORMAT, Catalogue, DiskState, facts_hash, item_row, layout_meta, now
from reid.gallery import thumbnails as thumbs
from reid.gallery.check import measure_recall, verify_files, verify_ids
from reid.gallery.device import GPU_ENV, GPU_MAX_K, GpuSearch, detect_gpus, use_gpu
from reid.gallery.export import export_suffix, write_jsonl, write_npz
from reid.gallery.files import (
    FileRecord,
    new_name,
    read_segment,
    read_snapshot,
    read_vectors,
    write_file_atomic,
    write_segment,
    write_snapshot,
)
from reid.gallery.index import (
    TRAINED_KINDS,
    IndexSpec,
    TrainingPlan,
    apply_search_params,
    auto_nlist,
    ivf_nlist,
    new_index,
    plan_training,
    search_settings,
    supports_remove,
)
from reid.gallery.lock import LOCK_FILE, gallery_lock
from reid.gallery.records import (
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
from reid.gallery.search import IdentityLabels, check_search, nearest_identities, nearest_items, rerank
from reid.gallery.shards import (
    Shard,
    ShardRecord,
    Written,
    build_shard,
    search_index,
    train_template,
    write_shard,
)
from reid.paths import TEMP_MARK, check_output_file, resolve_named

DEFAULT_GALLERIES = Path("galleries")
FILE_PREFIXES = ("index-", "seg-", "vec-", "template-")

# Segments are folded into a new snapshot once they hold this share of its items (so
# rewrites stay proportional to growth), or once there are this many files to open.
COMPACT_SHARE = 0.25
COMPACT_MIN_ITEMS = 4096
COMPACT_MAX_SEGMENTS = 64


def resolve_gallery_path(spec: str | Path) -> Path:
    """A gallery folder from a path (``./g``, ``a/g``: that path), or from a bare name under ``galleries/``."""
    return resolve_named(spec, DEFAULT_GALLERIES)


@dataclass
class _Layout:
    """The shards in memory and the files they were last written to."""

    sealed: list[tuple[Shard, ShardRecord]]
    active: Shard
    active_record: ShardRecord
    template: FileRecord | None = None

    def shards(self) -> list[Shard]:
        return [shard for shard, _ in self.sealed] + [self.active]

    def names(self) -> set[str]:
        named = {name for _, record in self.sealed for name in record.names()}
        named |= set(self.active_record.names())
        return named | ({self.template.name} if self.template else set())


class Gallery:
    """An open gallery.  Create one with :meth:`create`, :meth:`open` or :meth:`open_or_create`.

    Searching uses the copy loaded in memory; :meth:`refresh` picks up what other processes
    committed since.  Writes (:meth:`add`, :meth:`remove_identity`, :meth:`remove_item`,
    :meth:`rename_identity`, :meth:`reindex`) first
    catch up with the disk under the lock, so concurrent writers never lose each other's work.
    ``gpu`` (default: the ``REID_FAISS_GPU`` environment variable, else ``auto``) says
    whether searches run on GPUs; see :mod:`reid.gallery.device`.

    Embeddings are float32 (N, D) rows, L2-normalized on the way in; distances are
    Euclidean between unit embeddings, 0..2.  Every method raises GalleryError for a
    damaged, tampered or unwritable gallery (naming the file) and ConfigError for a bad
    argument; a failed write leaves the gallery as it was.
    """

    def __init__(self, folder: Path, lock_timeout: float, gpu: str | None = None) -> None:
        self.folder = Path(folder)
        self.db_path = self.folder / DB_FILE
        self.lock_timeout = lock_timeout
        support = detect_gpus()
        self._gpu = GpuSearch(support.devices) if use_gpu(gpu or os.environ.get(GPU_ENV), support) else None
        self._catalogue = Catalogue(self.folder)
        self.meta: GalleryMeta
        self.spec = IndexSpec()
        self._layout: _Layout
        self._searcher: faiss.Index
        self._template: tuple[str, faiss.Index] | None = None
        self._generation = -1
        self._segments: list[int] = []
        self._labels = IdentityLabels()
        self._stale = True
        self._fresh_calibration: tuple[tuple[Any, ...], GalleryCalibration | None] | None = None

    # ----------------------------------------------------------------- opening

    @classmethod
    def create(
        cls,
        folder: str | Path,
        card: ModelFacts,
        spec: IndexSpec | None = None,
        lock_timeout: float = 120.0,
        gpu: str | None = None,
        thumbnails: bool = True,
    ) -> Gallery:
        """A new, empty gallery for embeddings of the model ``card`` describes; with
        ``thumbnails`` it keeps a small JPEG of each enrolled crop (:mod:`reid.gallery.thumbnails`).

        A failed creation leaves nothing: no database, no lock, no folder it made.  Raises
        GalleryError when a gallery is already there, ConfigError for a card without a
        fingerprint or dimension, or an index ``spec`` that does not fit it.
        """
        folder = Path(folder)
        with (
            _made_for(folder),
            gallery_lock(folder, exclusive=True, timeout=lock_timeout),
            _new_removed_on_error(folder),
        ):
            with _closed_on_error(cls(folder, lock_timeout, gpu)) as gallery:
                if gallery._catalogue.has_meta():
                    raise GalleryError(f"{folder}: a gallery already exists here")
                gallery._initialize(card, spec or IndexSpec())
                gallery._load()
                if thumbnails:
                    thumbs.enable(folder)
        return gallery

    @classmethod
    def open(cls, folder: str | Path, lock_timeout: float = 120.0, gpu: str | None = None) -> Gallery:
        """Open an existing gallery, verifying its files against its database."""
        folder = Path(folder)
        if not (folder / DB_FILE).is_file():
            raise GalleryError(f"{folder}: no gallery here (no {DB_FILE}); create one with reid enroll")
        with gallery_lock(folder, exclusive=False, timeout=lock_timeout), _closed_on_error(cls(folder, lock_timeout, gpu)) as gallery:
            if not gallery._catalogue.has_meta():
                raise GalleryError(f"{gallery.db_path}: empty gallery database (was its creation interrupted?)")
            gallery._load()
        return gallery

    @classmethod
    def open_or_create(
        cls,
        folder: str | Path,
        card: ModelFacts,
        spec: IndexSpec | None = None,
        lock_timeout: float = 120.0,
        gpu: str | None = None,
        thumbnails: bool = True,
    ) -> Gallery:
        """Open the gallery at ``folder`` (checking it was made with ``card``'s model) or create it
        (keeping thumbnails unless ``thumbnails`` is False, as :meth:`create`).

        ``spec`` applies when the gallery is new; for an existing one it must equal the
        gallery's own (change that with :meth:`reindex`).
        """
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise GalleryError(f"{folder}: not a folder")
        with (
            _made_for(folder),
            gallery_lock(folder, exclusive=True, timeout=lock_timeout),
            _new_removed_on_error(folder),
        ):
            with _closed_on_error(cls(folder, lock_timeout, gpu)) as gallery:
                if not gallery._catalogue.has_meta():
                    gallery._initialize(card, spec or IndexSpec())
                    if thumbnails:
                        thumbs.enable(folder)
                gallery._load()
                gallery.check_model(card)
                if spec is not None and spec != gallery.spec:
                    raise ConfigError(
                        f"{folder}: gallery has a {_describe(gallery.spec, spec)} index, not "
                        f"{_describe(spec, gallery.spec)}; change it with reid gallery reindex"
                    )
        return gallery

    @classmethod
    def discard_if_empty(cls, folder: str | Path, lock_timeout: float = 120.0) -> bool:
        """Delete the gallery at ``folder`` when it holds no item (one created for work that
        then added nothing), and the folder when nothing else is in it; True when deleted."""
        folder = Path(folder)
        with gallery_lock(folder, exclusive=True, timeout=lock_timeout), cls(folder, lock_timeout, "off") as gallery:
            if gallery._catalogue.has_meta() and gallery._catalogue.has_items():
                return False
            gallery.close()
            _remove_gallery_files(folder)
        with suppress(OSError):
            folder.rmdir()
        return True

    @classmethod
    def destroy(cls, folder: str | Path, lock_timeout: float = 120.0) -> int:
        """Delete the gallery at ``folder`` with every item in it (its files only, and the
        folder when nothing else is left in it); returns how many items it held.

        Raises GalleryError when ``folder`` holds no gallery or its lock cannot be taken.
        """
        folder = Path(folder)
        if not (folder / DB_FILE).is_file():
            raise GalleryError(f"{folder}: no gallery here (no {DB_FILE})")
        with gallery_lock(folder, exclusive=True, timeout=lock_timeout), cls(folder, lock_timeout, "off") as gallery:
            catalogue = gallery._catalogue
            count = sum(summary.items for summary in catalogue.identities()) if catalogue.has_meta() else 0
            gallery.close()
            _remove_gallery_files(folder)
        with suppress(OSError):
            folder.rmdir()
        return count

    def close(self) -> None:
        self._catalogue.close()

    def __enter__(self) -> Gallery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- facts

    def __len__(self) -> int:
        return sum(len(shard) for shard in self._layout.shards())

    @property
    def dim(self) -> int:
        return self.meta.dim

    @property
    def threshold(self) -> float | None:
        """The model's threshold when the gallery was created (a distance in (0, 2]), or None."""
        return self.meta.threshold

    @property
    def calibration(self) -> GalleryCalibration | None:
        """The threshold this gallery calibrated on its own identities and stored
        (:meth:`calibrate`), or None; GalleryError when the stored value is malformed."""
        text = self._catalogue.read_calibration()
        if text is None:
            return None
        try:
            return GalleryCalibration.from_json(text)
        except ValueError as exc:
            raise GalleryError(
                f"{self.db_path}: the stored calibration is malformed ({exc}); store a new one with "
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
        scene_part = None if scene is None else scene.calibrate(far)
        if not store:
            return self._calibrate(far, max_items, seed).with_scene(scene_part)
        with self._writing():
            calibration = replace(self._calibrate(far, max_items, seed).with_scene(scene_part), stored=True)
            text = calibration.to_json()

            def write() -> None:
                self._catalogue.begin()
                self._catalogue.set_calibration(text)
                self._catalogue.commit()

            self._transaction(write)
        return calibration

    def current_calibration(self) -> GalleryCalibration | None:
        """The gallery's own threshold a query answers at unless given one, or None.

        The stored calibration while the gallery holds what it was computed on; after a
        later write, one computed now at the stored rate.  A gallery that stored none
        calibrates now at :data:`~reid.gallery.calibration.DEFAULT_FAR` once it holds
        enough identities for the estimate (:func:`~reid.gallery.calibration.identities_needed`).
        """
        stored = self.calibration
        last_id = int(self._labels.ids[-1]) if len(self._labels.ids) else 0
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
            fresh = self._calibrate(stored.far if stored is not None else DEFAULT_FAR, MAX_ITEMS, SEED).with_scene(
                None if stored is None else stored.scene
            )
        except ConfigError:
            return None
        chosen = fresh if stored is not None or fresh.enough else None
        self._fresh_calibration = (key, chosen)
        return chosen

    def _calibrate(self, far: float, max_items: int, seed: int) -> GalleryCalibration:
        labels = self._labels
        return calibrate(labels.ids, labels.codes, self._originals, far, max_items, seed, created=now())

    @property
    def index_kind(self) -> str:
        """What the index really is ("flat" while an IVF gallery is too small to train);
        kinds joined by "+" when shards differ."""
        return "+".join(dict.fromkeys(shard.kind for shard in self._layout.shards()))

    @property
    def shard_count(self) -> int:
        return len(self._layout.sealed) + 1

    @property
    def identity_count(self) -> int:
        return self._labels.identity_count

    def check_model(self, card: ModelFacts) -> None:
        """Raise GalleryError unless ``card`` is the model this gallery was made with.

        Galleries made before fingerprints covered the model card recorded the fingerprint
        of the weights alone; for them the weights are what can be checked.
        """
        stored = self.meta.model_fingerprint
        legacy = bool(card.weights_fingerprint) and card.weights_fingerprint == stored
        if (card.fingerprint != stored and not legacy) or card.embedding_dim != self.meta.dim:
            raise GalleryError(
                f"{self.folder}: gallery was made with model {self.meta.model_name!r} "
                f"(fingerprint {self.meta.model_fingerprint}, dim {self.meta.dim}), not model {card.name!r} "
                f"(fingerprint {card.fingerprint}, dim {card.embedding_dim}); use that model or another gallery"
            )

    def info(self) -> GalleryInfo:
        size = sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file() and p.name != LOCK_FILE)
        return GalleryInfo(
            path=str(self.folder),
            items=len(self),
            identities=self.identity_count,
            dim=self.meta.dim,
            index=self.spec.kind,
            index_built=self.index_kind,
            index_params=self.spec.to_dict(),
            model_fingerprint=self.meta.model_fingerprint,
            model_name=self.meta.model_name,
            model_kind=self.meta.model_kind,
            threshold=self.meta.threshold,
            calibration=None if (stored := self.calibration) is None else stored.to_dict(),
            created=self.meta.created,
            generation=self._generation,
            segments=len(self._segments),
            bytes=size,
            shards=self.shard_count,
            search_device=self._device(),
        )

    def identities(self) -> list[IdentitySummary]:
        return self._catalogue.identities()

    def items(self, identity: str | None = None, limit: int | None = None) -> list[GalleryItem]:
        return self._catalogue.items(identity, limit)

    def get_items(self, ids: Sequence[int]) -> dict[int, GalleryItem]:
        return self._catalogue.get_items(ids)

    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` are already stored (a hint; :meth:`add` checks again under the lock)."""
        return self._catalogue.known_hashes(hashes)

    def embeddings(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored embeddings of ``ids`` (float32; float16 precision for IVF-PQ shards)."""
        return self._originals(np.asarray(ids, dtype=np.int64))

    # ----------------------------------------------------------------- search

    def search_items(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest items of each query (Q, D): (distances (Q, k) float64, Euclidean
        between unit embeddings, inf where none; item ids (Q, k) int64, -1 pads short rows)."""
        check_search(k)
        queries = self._check_vectors(queries)
        return nearest_items(queries, k, self._nearest, len(self))

    def search(self, queries: np.ndarray, k: int = 5, score: str = "best") -> list[list[IdentityMatch]]:
        """The ``k`` nearest identities of each query (Q, D), nearest first.

        ``score="best"``: an identity's distance (Euclidean between unit embeddings, 0..2)
        is that of its nearest item.  ``"mean"``: the mean distance to all its items
        (identities are drawn from the nearest items).  See :mod:`reid.gallery.search`.
        """
        check_search(k, score)
        queries = self._check_vectors(queries)
        return nearest_identities(queries, k, score, self._nearest, len(self), self._labels, self._originals)

    def _nearest(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Similarities and ids of the ``k`` nearest items; IVF-PQ candidates re-ranked exactly."""
        refine = self.spec.refine if any(not s.exact for s in self._layout.shards()) else 0
        fetch = min(k * refine, len(self)) if refine else k
        with search_settings(len(queries)):
            sims, ids = self._search_index(fetch).search(queries, fetch)
        return rerank(queries, ids, k, self._originals) if refine else (sims, ids)

    def _search_index(self, k: int) -> faiss.Index:
        if self._gpu is None or k > GPU_MAX_K:
            return self._searcher
        shards = self._layout.shards()
        copies = self._gpu.copies([shard.index for shard in shards])
        indexes = [copy if copy is not None else shard.index for copy, shard in zip(copies, shards, strict=True)]
        return search_index(indexes, self.meta.dim, threaded=True)

    # ----------------------------------------------------------------- writing

    @contextmanager
    def _writing(self) -> Iterator[int]:
        """Hold the writers' lock, catch up with the disk, clear crashed writers' leftovers
        and upgrade an old format; yields the generation this write will commit."""
        with gallery_lock(self.folder, exclusive=True, timeout=self.lock_timeout):
            self._sync()
            self._remove_orphans()
            if self.meta.format < FORMAT:
                self._transaction(lambda: self._catalogue.upgrade(self.meta.format))
                self.meta.format = FORMAT
            yield self._generation + 1

    def _transaction(self, write: Callable[[], object], written: Sequence[Path] = ()) -> None:
        """Run ``write`` (which commits); on any error roll back, delete the files ``written``
        for it, and raise a database error as one GalleryError (the gallery is unchanged)."""
        try:
            write()
        except BaseException as exc:
            self._catalogue.rollback()
            for path in written:
                path.unlink(missing_ok=True)
            error = self._catalogue.write_error(exc)
            if error is not None:
                raise error from exc
            raise

    def add(
        self,
        embeddings: np.ndarray,
        items: Sequence[ItemMeta],
        skip_duplicates: bool = True,
        crops: Sequence[np.ndarray] | None = None,
    ) -> AddResult:
        """Store one batch atomically: after a crash either all of it is there or none.

        ``embeddings`` (N, D) float32, one row per item.  ``crops`` (RGB uint8, one per
        item) become the added items' thumbnails when the gallery keeps them, after the commit.  Items whose ``image_hash`` is
        already stored (or repeats within the batch) are skipped when ``skip_duplicates``;
        their positions come back in ``duplicates``.  Raises ConfigError for a count or
        shape mismatch, an empty identity or non-finite values.
        """
        vectors = self._check_vectors(embeddings)
        if len(vectors) != len(items):
            raise ConfigError(f"{len(vectors)} embeddings for {len(items)} items")
        items = _named(items)
        with self._writing() as generation:
            self._check_case({item.identity for item in items})
            keep, duplicates = self._split_duplicates(items) if skip_duplicates else (list(range(len(items))), [])
            if crops is not None and len(crops) != len(items):
                raise ConfigError(f"{len(crops)} crops for {len(items)} items")
            if not keep:
                return AddResult([], duplicates)
            kept_vectors = vectors[keep]
            enrolled = now()
            rows = [item_row(items[i], enrolled) for i in keep]
            path = self.folder / new_name("seg", generation, ".bin")
            added: list[tuple[np.ndarray, FileRecord, int]] = []

            def write() -> None:
                catalogue = self._catalogue
                catalogue.begin()
                # AUTOINCREMENT hands out consecutive ids (checked by insert_items).
                ids = np.asarray(catalogue.insert_items(rows), dtype=np.int64)
                record = write_segment(path, ids, kept_vectors)
                seq = catalogue.insert_segment(record, len(ids))
                catalogue.set_meta({"generation": str(generation)})
                catalogue.commit()
                added.append((ids, record, seq))

            self._transaction(write, [path])
            ids, record, seq = added[0]
            try:
                # IVF-PQ keeps reading these embeddings until compaction: from the mapped
                # segment, not from memory.
                originals = None if self._layout.active.exact else read_segment(path, record, self.meta.dim)[1]
                self._layout.active.add(ids, kept_vectors, originals)
                self._grown(ids, kept_vectors)
                self._labels.extend([(int(i), items[j].identity) for i, j in zip(ids, keep, strict=True)])
                self._segments.append(seq)
                self._generation = generation
                self._maintain()
            except BaseException:
                self._stale = True
                raise
            if crops is not None:
                thumbs.write(self.folder, ids.tolist(), [crops[i] for i in keep])
        return AddResult(ids.tolist(), duplicates)

    def remove_identity(self, identity: str) -> int:
        """Remove every item of ``identity``; returns how many were removed.

        The items are found by reading the whole table and by the identity index; when
        the two disagree the database is damaged and nothing is removed.  Afterwards both
        must find no item of ``identity`` left.  Raises GalleryError otherwise.
        """
        with self._writing() as generation:
            ids = np.asarray(self._catalogue.identity_ids(identity), dtype=np.int64)
            if len(ids) == 0:
                raise GalleryError(f"{self.folder}: no identity {identity!r} in the gallery")
            self._remove_ids(ids, generation)
            thumbs.remove(self.folder, ids)
            self._labels.drop(identity)
            rows_left = len(self._catalogue.identity_ids(identity))
            self._check_removed(ids, rows_left, repr(identity))
        return len(ids)

    def remove_item(self, item_id: int) -> GalleryItem:
        """Remove the one item ``item_id`` (its row and its embedding); returns it as it was.

        Raises GalleryError when there is no such item, or when it is still found afterwards.
        """
        with self._writing() as generation:
            item = self._catalogue.get_items([int(item_id)]).get(int(item_id))
            if item is None:
                raise GalleryError(f"{self.folder}: no item {item_id} in the gallery")
            ids = np.asarray([item.id], dtype=np.int64)
            self._remove_ids(ids, generation)
            thumbs.remove(self.folder, ids)
            self._labels.drop_ids(ids)
            rows_left = len(self._catalogue.get_items([item.id]))
            self._check_removed(ids, rows_left, f"item {item.id}")
        return item

    def rename_identity(self, identity: str, new_name: str) -> int:
        """Give every item of ``identity`` the label ``new_name``; returns how many items.

        One commit rewrites the rows (with their checksums) and names a rewritten active
        shard, so other processes holding the gallery reload its labels.  Raises
        GalleryError when ``identity`` has no items and ConfigError when ``new_name`` is
        empty or already an identity of the gallery (renaming never merges two people).
        """
        new_name = identity_name(new_name, "the new identity name")
        with self._writing() as generation:
            ids = self._catalogue.identity_ids(identity)
            if not ids:
                raise GalleryError(f"{self.folder}: no identity {identity!r} in the gallery")
            if new_name != identity and self._catalogue.identity_ids(new_name):
                raise ConfigError(f"{self.folder}: identity {new_name!r} already exists; choose another name")
            self._check_case({new_name}, leaving=identity)
            written: list[Written] = []
            try:
                with _removed_on_error(written):
                    written.append(self._without(self._layout.active, np.zeros(0, np.int64), generation))
                    layout = _Layout(list(self._layout.sealed), written[-1].shard, written[-1].record, self._layout.template)
                self._commit(layout, generation, written, relabel=(identity, new_name))
                self._labels.rename(identity, new_name)
            except BaseException:
                self._stale = True
                raise
        return len(ids)

    def _check_case(self, labels: set[str], leaving: str | None = None) -> None:
        """ConfigError when a label of ``labels`` that is not an identity of the gallery
        compares equal (:func:`reid.names.name_key`: case-folded) to one that is (other than
        ``leaving``, the one being renamed) or to another of ``labels``."""
        present = self._labels.present()
        new = sorted(labels - present)
        if not new:
            return
        keys = {name_key(name): name for name in present if name != leaving}
        for label in new:
            other = keys.setdefault(name_key(label), label)
            if other != label:
                raise NameTakenError(
                    f"{self.folder}: identity {label!r} differs from the identity {other!r} only in case; "
                    f"names compare case-insensitively: use {other!r}, or rename it"
                )

    def _remove_ids(self, ids: np.ndarray, generation: int) -> None:
        """Rewrite the shards holding ``ids`` without them and commit that with the rows'
        deletion (the caller holds the lock, inside :meth:`_writing`)."""
        written: list[Written] = []
        try:
            with _removed_on_error(written):
                sealed = []
                for shard, record in self._layout.sealed:
                    gone = ids[shard.holds(ids)]
                    if not len(gone):
                        sealed.append((shard, record))
                    elif len(gone) < len(shard):
                        written.append(self._without(shard, gone, generation))
                        sealed.append((written[-1].shard, written[-1].record))
                # The active shard is rewritten either way, which folds its segments in.
                active = self._layout.active
                written.append(self._without(active, ids[active.holds(ids)], generation))
                layout = _Layout(sealed, written[-1].shard, written[-1].record, self._layout.template)
            self._commit(layout, generation, written, delete_ids=ids)
        except BaseException:
            # Shards may have lost items in memory without the commit: reload them.
            self._stale = True
            raise

    def _check_removed(self, ids: np.ndarray, rows_left: int, what: str) -> None:
        """Raise GalleryError when removed ``ids`` are still in the database or the index."""
        index_left = sum(int(shard.holds(ids).sum()) for shard in self._layout.shards())
        if rows_left or index_left:
            self._stale = True
            raise GalleryError(
                f"{self.db_path}: after removing {what}, {rows_left} of its items are still in the "
                f"database and {index_left} in the index (see reid gallery info --check)"
            )

    def reindex(self, spec: IndexSpec) -> None:
        """Rebuild the index as ``spec`` says (e.g. flat to IVF-PQ, or into shards), keeping every item."""
        spec.check_dim(self.meta.dim)
        with self._writing() as generation:
            ids = self._labels.ids
            per_shard = spec.shard_size or max(len(ids), 1)
            plan = plan_training(spec, min(len(ids), per_shard))
            written: list[Written] = []
            extra: list[Path] = []
            with _removed_on_error(written, extra):
                template, template_record = None, None
                if plan is not None:
                    template = train_template(spec, self.meta.dim, plan, ids, self._originals)
                    extra.append(self.folder / new_name("template", generation, ".faiss"))
                    template_record = write_snapshot(template, extra[-1])
                # Full shards are sealed; the rest, possibly none, is the active shard.
                sealed_count = len(ids) // per_shard if spec.shard_size else 0
                groups = [ids[n * per_shard : (n + 1) * per_shard] for n in range(sealed_count)]
                groups.append(ids[sealed_count * per_shard :])
                for group in groups:
                    written.append(
                        build_shard(spec, self.meta.dim, group, self._originals, self.folder, generation, template)
                    )
                sealed = [(w.shard, w.record) for w in written[:-1]]
                layout = _Layout(sealed, written[-1].shard, written[-1].record, template_record)
            self._commit(layout, generation, written, extra, spec=spec)
            self._template = (template_record.name, template) if template_record and template else None

    def refresh(self) -> bool:
        """Catch up with what other processes committed; True when something changed."""
        with gallery_lock(self.folder, exclusive=False, timeout=self.lock_timeout):
            return self._sync()

    # ----------------------------------------------------------------- checking, export

    def check(self, queries: int = 1000, k: int = 10, seed: int = 0) -> CheckReport:
        """Re-verify everything on disk, then measure the index's recall against exact search.

        Verified: the size and SHA-256 of every file the database names; SQLite's full
        integrity check (every page, and every table row against every index entry); every
        item row's column types and checksum, and the checksum of the gallery's fixed facts
        (format 3 on); and, reloading the index files from disk, that their ids are exactly
        the items' ids, each once.  Raises GalleryError with the first problem found and how
        many more there are.
        """
        with gallery_lock(self.folder, exclusive=False, timeout=self.lock_timeout):
            self._sync()
            files = verify_files(self.folder, self._read_state().records())
            problems = self._catalogue.problems(self.meta.format)
            if not problems:
                # A full reload compares the index files' ids with the item rows afresh.
                self._stale = True
                self._sync()
        if problems:
            more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
            raise GalleryError(f"{self.db_path}: database check failed: {problems[0]}{more}")
        return CheckReport(
            database="ok",
            items=len(self),
            recall=self.recall(queries, k, seed),
            files=files,
            identities=self.identity_count,
            checksums=self.meta.format >= FORMAT,
        )

    def recall(self, queries: int = 1000, k: int = 10, seed: int = 0) -> RecallReport:
        """Recall@1 and @k of the index against exact search, with stored items as queries
        (:func:`reid.gallery.check.measure_recall`; the exact answers come from a pass over
        all stored embeddings, a chunk at a time)."""
        chunks = (chunk for shard in self._layout.shards() for chunk in shard.chunks())
        return measure_recall(
            self.index_kind, self._labels.ids, self._nearest, self._originals, chunks, queries, k, seed
        )

    def export(self, path: str | Path) -> int:
        """Write the items to ``path``: ``.npz`` with embeddings, or ``.jsonl`` metadata only
        (:mod:`reid.gallery.export`); returns how many items were written.

        Both are written a chunk at a time, so a gallery larger than memory exports too; writers
        wait for the export (it holds the gallery's lock shared) to see one consistent state.
        Raises ConfigError for another suffix or a path that cannot be written.
        """
        path = Path(path)
        suffix = export_suffix(path)
        check_output_file(path, "the export")
        with gallery_lock(self.folder, exclusive=False, timeout=self.lock_timeout):
            self._sync()
            if suffix == ".jsonl":
                write_file_atomic(path, lambda handle: write_jsonl(handle, self._catalogue))
            else:
                ids, dim, info = self._labels.ids, self.meta.dim, self.info()
                write_file_atomic(path, lambda handle: write_npz(handle, self._catalogue, ids, dim, self._originals, info))
        return len(self)

    # ----------------------------------------------------------------- loading and syncing

    def _initialize(self, card: ModelFacts, spec: IndexSpec) -> None:
        if card.embedding_dim < 1:
            raise ConfigError(f"model {card.name!r}: embedding dimension must be positive")
        if not card.fingerprint:
            raise ConfigError(f"model {card.name!r}: no fingerprint; a gallery could not tell its embeddings apart")
        spec.check_dim(card.embedding_dim)
        index = new_index(spec, card.embedding_dim)
        path = self.folder / new_name("index", 0, ".faiss")
        record = write_snapshot(index, path)
        self._transaction(lambda: self._catalogue.initialize(card, spec, ShardRecord(record, 0)), [path])

    def _read_state(self) -> DiskState:
        """The state the database records (its facts become :attr:`meta`)."""
        self.meta, state = self._catalogue.read_state()
        return state

    def _read_shard(self, record: ShardRecord, spec: IndexSpec) -> Shard:
        path = self.folder / record.index.name
        index = read_snapshot(path, record.index)
        if index.d != self.meta.dim:
            raise GalleryError(f"{path}: index dimension {index.d}, gallery says {self.meta.dim}")
        stored = None
        if record.vectors is not None:
            stored = read_vectors(self.folder / record.vectors.name, record.vectors, self.meta.dim)
        shard = Shard(index, stored)
        if not shard.exact and stored is None:
            raise GalleryError(f"{path}: IVF-PQ index without its vector file in the database")
        if stored is not None and not np.array_equal(stored.ids, shard.ids):
            raise GalleryError(f"{stored.path}: vector file holds other items than its index {path.name}")
        apply_search_params(index, spec)
        return shard

    def _load(self) -> None:
        """Load shards, segments and labels from disk and verify them against each other.

        Sealed shards already in memory are kept: their files never change under one name.
        """
        state = self._read_state()
        known = {} if self._stale else {record.index.name: shard for shard, record in self._layout.sealed}
        sealed = []
        for record in state.sealed:
            shard = known.get(record.index.name) or self._read_shard(record, state.spec)
            apply_search_params(shard.index, state.spec)
            sealed.append((shard, record))
        active = self._read_shard(state.active, state.spec)
        for _, record, _ in state.segments:
            ids, vectors = read_segment(self.folder / record.name, record, self.meta.dim)
            active.add(ids, vectors)
        labels = IdentityLabels()
        for rows in self._catalogue.label_rows():
            labels.extend(rows)
        layout = _Layout(sealed, active, state.active, state.template)
        verify_ids(self.folder, layout.shards(), labels.ids)
        self._layout, self._labels, self.spec = layout, labels, state.spec
        self._generation = state.generation
        self._segments = [seq for seq, _, _ in state.segments]
        self._searcher = search_index([shard.index for shard in layout.shards()], self.meta.dim)
        self._stale = False

    def _sync(self) -> bool:
        """Bring the in-memory shards up to the committed state (the caller holds the lock)."""
        state = self._read_state()
        if not self._stale and state.generation == self._generation:
            return False
        seqs = [seq for seq, _, _ in state.segments]
        same_files = state.active.index.name == self._layout.active_record.index.name and [
            r.index.name for r in state.sealed
        ] == [r.index.name for _, r in self._layout.sealed]
        if self._stale or not same_files or seqs[: len(self._segments)] != self._segments:
            self._load()
            return True
        for seq, record, _ in state.segments[len(self._segments) :]:
            ids, vectors = read_segment(self.folder / record.name, record, self.meta.dim)
            self._layout.active.add(ids, vectors)
            self._grown(ids, vectors)
            self._segments.append(seq)
        last = int(self._labels.ids[-1]) if len(self._labels.ids) else 0
        for rows in self._catalogue.label_rows(after=last):
            self._labels.extend(rows)
        self._generation = state.generation
        if len(self) != len(self._labels.ids):
            self._load()
        return True

    # ----------------------------------------------------------------- maintenance and commit

    def _maintain(self) -> None:
        """After an add: train the active shard, fold segments in, or seal it, when due."""
        active = self._layout.active
        plan = self._training_due()
        full = bool(self.spec.shard_size) and len(active) >= self.spec.shard_size
        if plan is None and not full and not self._needs_compaction():
            return
        generation = self._generation + 1
        dim, folder = self.meta.dim, self.folder
        written: list[Written] = []
        extra: list[Path] = []
        with _removed_on_error(written, extra):
            template, template_record = None, self._layout.template
            if plan is not None:
                template = train_template(self.spec, dim, plan, active.ids, active.originals)
                extra.append(folder / new_name("template", generation, ".faiss"))
                template_record = write_snapshot(template, extra[-1])
                written.append(build_shard(self.spec, dim, active.ids, active.originals, folder, generation, template))
            else:
                written.append(write_shard(active, folder, generation))
            sealed = list(self._layout.sealed)
            if full:
                sealed.append((written[-1].shard, written[-1].record))
                empty = np.zeros(0, np.int64)
                start = template if template is not None else self._template_index()
                written.append(build_shard(self.spec, dim, empty, self._originals, folder, generation, start))
            layout = _Layout(sealed, written[-1].shard, written[-1].record, template_record)
        self._commit(layout, generation, written, extra)
        if template_record is not None and template is not None:
            self._template = (template_record.name, template)

    def _training_due(self) -> TrainingPlan | None:
        """The training plan of an IVF or IVF-PQ active shard that should (re)train now: first
        once it holds enough items, then whenever it has grown to want twice the lists."""
        active = self._layout.active
        if self.spec.kind not in TRAINED_KINDS:
            return None
        if active.kind == "flat":
            return plan_training(self.spec, len(active))
        if self.spec.nlist == 0 and auto_nlist(len(active)) >= 2 * ivf_nlist(active.index):
            return plan_training(self.spec, len(active))
        return None

    def _needs_compaction(self) -> bool:
        pending = len(self._layout.active) - self._layout.active_record.count
        if len(self._segments) >= COMPACT_MAX_SEGMENTS:
            return True
        if self._layout.active.kind == "hnsw":
            # Opening replays segments into the graph at HNSW's slow insertion rate, so
            # HNSW galleries keep at most a fixed number of items outside the snapshot.
            return pending >= COMPACT_MIN_ITEMS
        return pending >= max(COMPACT_MIN_ITEMS, COMPACT_SHARE * self._layout.active_record.count)

    def _template_index(self) -> faiss.Index | None:
        """The trained, empty index new shards start from (read from its file when first needed)."""
        record = self._layout.template
        if record is None:
            return None
        if self._template is None or self._template[0] != record.name:
            self._template = (record.name, read_snapshot(self.folder / record.name, record))
        return self._template[1]

    def _without(self, shard: Shard, gone: np.ndarray, generation: int) -> Written:
        """``shard`` less the items ``gone``, written: removed in place, or rebuilt from its embeddings."""
        if not len(gone) or supports_remove(shard.index):
            if len(gone):
                shard.remove(gone)
            return write_shard(shard, self.folder, generation)
        keep = shard.ids[~np.isin(shard.ids, gone)]
        plan = plan_training(self.spec, len(keep)) if shard.kind in TRAINED_KINDS else None
        template = train_template(self.spec, self.meta.dim, plan, keep, shard.originals) if plan else None
        return build_shard(self.spec, self.meta.dim, keep, shard.originals, self.folder, generation, template)

    def _commit(
        self,
        layout: _Layout,
        generation: int,
        written: Sequence[Written],
        extra: Sequence[Path] = (),
        spec: IndexSpec | None = None,
        delete_ids: np.ndarray | None = None,
        relabel: tuple[str, str] | None = None,
    ) -> None:
        """Name ``layout``'s files in one transaction (dropping all segments), then use it;
        the same transaction deletes the rows ``delete_ids`` and renames the identity
        ``relabel`` (old, new).

        Until the commit the new files (``written`` and ``extra``) are deleted on failure;
        after it they are the gallery, and only the files it no longer names are deleted.
        """
        old = self._read_state().names()
        meta = {"generation": str(generation), **layout_meta(layout.active_record, layout.template)}
        if spec is not None:
            meta["index_spec"] = json.dumps(spec.to_dict())
            meta["facts_sha256"] = facts_hash({**self._catalogue.read_meta(), **meta})

        def write() -> None:
            catalogue = self._catalogue
            catalogue.begin()
            if delete_ids is not None:
                catalogue.delete_items(delete_ids)
            if relabel is not None:
                catalogue.rename_identity(*relabel)
            catalogue.set_meta(meta)
            catalogue.replace_shards([record for _, record in layout.sealed])
            catalogue.commit()

        self._transaction(write, [*(p for item in written for p in item.paths), *extra])
        for item in written:
            if item.stored is not None:
                item.shard.attach(item.stored)
        if spec is not None:
            self.spec = spec
        for shard in layout.shards():
            apply_search_params(shard.index, self.spec)
        self._layout, self._generation, self._segments = layout, generation, []
        self._searcher = search_index([shard.index for shard in layout.shards()], self.meta.dim)
        for name in old - layout.names():
            (self.folder / name).unlink(missing_ok=True)

    def _remove_orphans(self) -> None:
        """Delete files no commit names: leftovers of writers that crashed (caller holds the lock)."""
        named = self._read_state().names()
        for path in self.folder.iterdir():
            name = path.name
            leftover = (name.startswith(FILE_PREFIXES) and name not in named) or (
                name.startswith(tuple("." + p for p in FILE_PREFIXES)) and TEMP_MARK in name
            )
            if leftover and path.is_file():
                path.unlink(missing_ok=True)

    def _grown(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """The active shard took these items: let an ``IndexShards`` and a GPU copy have them too."""
        if isinstance(self._searcher, faiss.IndexShards):
            self._searcher.syncWithSubIndexes()
        if self._gpu is not None:
            self._gpu.added(self._layout.active.index, ids, vectors)

    def _originals(self, ids: np.ndarray) -> np.ndarray:
        """Stored embeddings of ``ids``, from whichever shards hold them."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty((len(ids), self.meta.dim), np.float32)
        left = np.ones(len(ids), bool)
        for shard in self._layout.shards():
            mine = np.flatnonzero(left & shard.holds(ids))
            if len(mine):
                out[mine] = shard.originals(ids[mine])
                left[mine] = False
        if left.any():
            raise GalleryError(f"{self.folder}: no item {int(ids[left][0])} in the gallery")
        return out

    def _device(self) -> str:
        if self._gpu is None:
            return "cpu"
        on_gpu = sum(copy is not None for copy in self._gpu.copies([s.index for s in self._layout.shards()]))
        return f"gpu ({on_gpu} of {self.shard_count} shards, {self._gpu.devices} GPUs)"

    def _split_duplicates(self, items: Sequence[ItemMeta]) -> tuple[list[int], list[int]]:
        known = self.known_hashes([i.image_hash for i in items if i.image_hash])
        keep, duplicates = [], []
        for position, item in enumerate(items):
            if item.image_hash and item.image_hash in known:
                duplicates.append(position)
            else:
                keep.append(position)
                if item.image_hash:
                    known.add(item.image_hash)
        return keep, duplicates

    def _check_vectors(self, embeddings: np.ndarray) -> np.ndarray:
        vectors = np.asarray(embeddings, dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors[None, :]
        if vectors.ndim != 2 or vectors.shape[1] != self.meta.dim:
            raise ConfigError(
                f"{self.folder}: embeddings of shape {vectors.shape}, gallery dimension is {self.meta.dim}"
            )
        if not np.isfinite(vectors).all():
            raise ConfigError(f"{self.folder}: embeddings contain NaN or infinity")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


def _named(items: Sequence[ItemMeta]) -> list[ItemMeta]:
    """``items`` with their identities in the one naming rule's form (:func:`reid.names.identity_name`,
    NFC); ConfigError naming the item's source for a label the rule refuses."""
    canonical: dict[str, str] = {}
    named = []
    for item in items:
        label = canonical.get(item.identity) if isinstance(item.identity, str) else None
        if label is None:
            try:
                label = canonical[item.identity] = identity_name(item.identity)
            except ConfigError as exc:
                raise ConfigError(f"{item.source or 'item'}: {exc}") from None
        named.append(item if label == item.identity else replace(item, identity=label))
    return named


@contextmanager
def _made_for(folder: Path) -> Iterator[None]:
    """Make ``folder`` (and missing parents) for the block; if the block fails, remove the
    folders it made that are left empty."""
    made = [path for path in (folder, *folder.parents) if not path.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for path in made:
            with suppress(OSError):
                path.rmdir()
        raise


@contextmanager
def _new_removed_on_error(folder: Path) -> Iterator[None]:
    """If ``folder`` holds no gallery yet and the block fails, remove the gallery files the
    block left there (the caller holds the lock, so no other process is creating one)."""
    new = not (folder / DB_FILE).is_file() or (folder / DB_FILE).stat().st_size == 0
    try:
        yield
    except BaseException:
        if new:
            _remove_gallery_files(folder)
        raise


def _remove_gallery_files(folder: Path) -> None:
    """Delete the files a gallery keeps in ``folder`` (never anything else there)."""
    thumbs.remove_all(folder)
    for path in folder.iterdir():
        name = path.name
        ours = name in (DB_FILE, f"{DB_FILE}-journal", LOCK_FILE) or name.lstrip(".").startswith(FILE_PREFIXES)
        if ours and (path.is_file() or path.is_symlink()):
            path.unlink(missing_ok=True)


@contextmanager
def _closed_on_error(gallery: Gallery) -> Iterator[Gallery]:
    """``gallery``, closed again if the block raises (a half-opened gallery holds its database)."""
    try:
        yield gallery
    except BaseException:
        gallery.close()
        raise


@contextmanager
def open_gallery(folder: str | Path, lock_timeout: float = 120.0, gpu: str | None = None) -> Iterator[Gallery]:
    """``with open_gallery(path) as g:`` — open, verify, and close on exit."""
    gallery = Gallery.open(folder, lock_timeout, gpu)
    try:
        yield gallery
    finally:
        gallery.close()


def _describe(spec: IndexSpec, other: IndexSpec) -> str:
    """``spec``'s kind, with the options where it differs from ``other``."""
    theirs = other.to_dict()
    differ = [f"{k}={v}" for k, v in spec.to_dict().items() if k != "kind" and v != theirs[k]]
    return spec.kind + (f" ({', '.join(differ)})" if differ and spec.kind == other.kind else "")


def _unlink(written: Sequence[Written], extra: Sequence[Path] = ()) -> None:
    for path in [*(p for item in written for p in item.paths), *extra]:
        path.unlink(missing_ok=True)


@contextmanager
def _removed_on_error(written: Sequence[Written], extra: Sequence[Path] = ()) -> Iterator[None]:
    """Delete the files written in the block (``written`` and ``extra`` as they are when it
    fails): no commit names them yet."""
    try:
        yield
    except BaseException:
        _unlink(written, extra)
        raise
