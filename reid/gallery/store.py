"""The FAISS + SQLite gallery: FAISS indexes of embeddings whose ids are row ids of an
SQLite table of items, in one folder.

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

:class:`Gallery` (a :class:`~reid.gallery.base.GalleryBackend`) keeps that promise: it
takes the lock, catches up with the disk (:meth:`Gallery._writing`) and commits in
:meth:`reid.gallery.catalogue.Catalogue.atomic` blocks.  Its jobs live beside it: the
SQLite catalogue (:mod:`~reid.gallery.catalogue`), the loaded view that search, check and
calibration read (:mod:`~reid.gallery.view`), index maintenance that writes files and
never commits (:mod:`~reid.gallery.maintenance`), export (:mod:`~reid.gallery.export`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from reid.errors import ConfigError, GalleryError
from reid.names import identity_name
from reid.gallery import maintenance, thumbnails as thumbs
from reid.gallery.base import GalleryBackend, named
from reid.gallery.catalogue import DB_FILE, FORMAT, Catalogue, DiskState, facts_hash, item_row, layout_meta, now
from reid.gallery.check import scan_duplicates, verify_files
from reid.gallery.device import GPU_ENV, GpuSearch, detect_gpus, use_gpu
from reid.gallery.export import export_suffix, write_jsonl, write_npz
from reid.gallery.files import new_name, read_segment, write_file_atomic, write_segment, write_snapshot
from reid.gallery.index import IndexSpec, new_index
from reid.gallery.lock import LOCK_FILE, gallery_lock
from reid.gallery.records import RECALL_QUERIES, AddResult, CheckReport, GalleryInfo, GalleryItem, IdentitySummary, ItemMeta, ModelFacts
from reid.gallery.shards import ShardRecord
from reid.gallery.view import LoadedView, load_view
from reid.paths import TEMP_MARK, check_output_file, resolve_named

DEFAULT_GALLERIES = Path("galleries")
FILE_PREFIXES = ("index-", "seg-", "vec-", "template-")


def resolve_gallery_path(spec: str | Path) -> Path:
    """A gallery folder from a path (``./g``, ``a/g``: that path), or from a bare name under ``galleries/``."""
    return resolve_named(spec, DEFAULT_GALLERIES)


class Gallery(GalleryBackend):
    """An open FAISS + SQLite gallery.  Open one with :meth:`create`, :meth:`open` or
    :meth:`open_or_create` (or :func:`reid.gallery.opener.open_gallery`).

    Searching uses the view loaded in memory; :meth:`refresh` picks up what other processes
    committed since.  Writes first catch up with the disk under the lock, so concurrent
    writers never lose each other's work.  ``gpu`` (default: the ``REID_FAISS_GPU``
    environment variable, else ``auto``) says whether searches run on GPUs; see
    :mod:`reid.gallery.device`.  Raises as :class:`~reid.gallery.base.GalleryBackend` says,
    GalleryError naming the file.
    """

    def __init__(self, folder: Path, lock_timeout: float, gpu: str | None = None) -> None:
        self.folder = Path(folder)
        self.location = str(self.folder)
        self.db_path = self.folder / DB_FILE
        self.catalogue_at = str(self.db_path)
        self.lock_timeout = lock_timeout
        support = detect_gpus()
        self._gpu = GpuSearch(support.devices) if use_gpu(gpu or os.environ.get(GPU_ENV), support) else None
        self._catalogue = Catalogue(self.folder)
        self._view: LoadedView | None = None  # None until loaded, and after a write failed midway

    # ----------------------------------------------------------------- opening

    @classmethod
    def create(cls, folder: str | Path, card: ModelFacts, *args: Any, **kwargs: Any) -> Gallery:
        """A new, empty gallery: :meth:`open_or_create` (same arguments) where none is there
        yet, GalleryError where one is.  A failed creation leaves nothing: no database, no
        lock, no folder it made."""
        return cls.open_or_create(folder, card, *args, only_new=True, **kwargs)

    @classmethod
    def open(cls, folder: str | Path, lock_timeout: float = 120.0, gpu: str | None = None) -> Gallery:
        """Open an existing gallery, verifying its files against its database."""
        folder = Path(folder)
        if not (folder / DB_FILE).is_file():
            raise GalleryError(f"{folder}: no gallery here (no {DB_FILE}); create one with reid enroll")
        with gallery_lock(folder, exclusive=False, timeout=lock_timeout), _closed_on_error(cls(folder, lock_timeout, gpu)) as gallery:
            if not gallery._catalogue.has_meta():
                raise GalleryError(f"{gallery.db_path}: empty gallery database (was its creation interrupted?)")
            gallery._sync()
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
        only_new: bool = False,
    ) -> Gallery:
        """Open the gallery at ``folder`` (checking it was made with ``card``'s model) or create
        it, empty, for that model, with a small JPEG of each enrolled crop unless
        ``thumbnails`` is False (:mod:`reid.gallery.thumbnails`); GalleryError when one is
        there and ``only_new``.

        ``spec`` applies when the gallery is new; for an existing one it must equal the
        gallery's own (change that with :meth:`reindex`).  A failed creation leaves nothing.
        Raises ConfigError for a card without a fingerprint or dimension, or an index
        ``spec`` that does not fit it.
        """
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise GalleryError(f"{folder}: not a folder")
        with (
            _made_for(folder),
            gallery_lock(folder, exclusive=True, timeout=lock_timeout),
            _new_removed_on_error(folder),
            _closed_on_error(cls(folder, lock_timeout, gpu)) as gallery,
        ):
            exists = gallery._catalogue.has_meta()
            if exists and only_new:
                raise GalleryError(f"{folder}: a gallery already exists here")
            if not exists:
                gallery._initialize(card, spec or IndexSpec())
                if thumbnails:
                    thumbs.enable(folder)
            gallery._sync()
            gallery.created = not exists
            gallery.check_model(card)
            if spec is not None and spec != gallery.view.spec:
                raise ConfigError(
                    f"{folder}: gallery has a {_describe(gallery.view.spec, spec)} index, not "
                    f"{_describe(spec, gallery.view.spec)}; change it with reid gallery reindex"
                )
        return gallery

    @classmethod
    def discard_if_empty(cls, folder: str | Path, lock_timeout: float = 120.0) -> bool:
        """Delete the gallery at ``folder`` when it holds no item (one created for work that
        then added nothing), and the folder when nothing else is in it; True when deleted."""
        return cls._removed(Path(folder), lock_timeout, only_empty=True) is not None

    @classmethod
    def destroy(cls, folder: str | Path, lock_timeout: float = 120.0) -> int:
        """Delete the gallery at ``folder`` with every item in it (its files only, and the
        folder when nothing else is left in it); returns how many items it held.

        Raises GalleryError when ``folder`` holds no gallery or its lock cannot be taken.
        """
        folder = Path(folder)
        if not (folder / DB_FILE).is_file():
            raise GalleryError(f"{folder}: no gallery here (no {DB_FILE})")
        return cls._removed(folder, lock_timeout, only_empty=False) or 0

    @classmethod
    def _removed(cls, folder: Path, lock_timeout: float, only_empty: bool) -> int | None:
        """Delete the gallery's files (unless ``only_empty`` and it holds items: None); how many items it held."""
        with gallery_lock(folder, exclusive=True, timeout=lock_timeout):
            catalogue = Catalogue(folder)
            try:
                held = catalogue.has_meta() and catalogue.has_items()
                if only_empty and held:
                    return None
                count = sum(s.items for s in catalogue.identities()) if held else 0
            finally:
                catalogue.close()
            _remove_gallery_files(folder)
        with suppress(OSError):
            folder.rmdir()
        return count

    def remove_if_empty(self) -> bool:
        self.close()
        return self.discard_if_empty(self.folder, self.lock_timeout)

    def close(self) -> None:
        self._catalogue.close()

    # ----------------------------------------------------------------- facts

    @property
    def view(self) -> LoadedView:
        """The committed state last loaded; loaded afresh after a write that failed midway."""
        if self._view is not None:
            return self._view
        with gallery_lock(self.folder, exclusive=False, timeout=self.lock_timeout):
            return self._loaded(self._read_state())

    @property
    def spec(self) -> IndexSpec:
        return self.view.spec

    @property
    def shard_count(self) -> int:
        return len(self.view.layout.sealed) + 1

    def calibration_text(self) -> str | None:
        return self._catalogue.read_calibration()

    def locked(self) -> AbstractContextManager[int]:
        return self._writing()

    def set_calibration_text(self, text: str) -> None:
        with self._catalogue.atomic() as catalogue:
            catalogue.set_calibration(text)

    def info(self) -> GalleryInfo:
        size = sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file() and p.name != LOCK_FILE)
        view = self.view
        return self.summary(
            view.kind, view.generation, segments=len(view.segments), bytes=size, shards=self.shard_count, search_device=view.device()
        )

    def identities(self) -> list[IdentitySummary]:
        return self._catalogue.identities()

    def items(self, identity: str | None = None, limit: int | None = None) -> list[GalleryItem]:
        return self._catalogue.items(identity, limit)

    def get_items(self, ids: Sequence[int]) -> dict[int, GalleryItem]:
        return self._catalogue.get_items(ids)

    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        return self._catalogue.known_hashes(hashes)

    @property
    def keeps_thumbnails(self) -> bool:
        return thumbs.enabled(self.folder)

    def thumbnail(self, item_id: int) -> bytes | None:
        try:
            return thumbs.path_of(self.folder, item_id).read_bytes()
        except OSError:
            return None

    # ----------------------------------------------------------------- writing

    @contextmanager
    def _writing(self) -> Iterator[int]:
        """Hold the writers' lock, catch up with the disk, clear crashed writers' leftovers
        and upgrade an old format; yields the generation this write will commit.  When the
        block fails past checking its arguments, the view may hold changes no commit made:
        it is loaded afresh."""
        with gallery_lock(self.folder, exclusive=True, timeout=self.lock_timeout):
            self._sync()
            self._remove_orphans()
            if self.meta.format < FORMAT:
                with self._catalogue.atomic() as catalogue:
                    catalogue.upgrade(self.meta.format)
                self.meta.format = FORMAT
            try:
                yield self.view.generation + 1
            except ConfigError:
                raise
            except BaseException:
                self._view = None
                raise

    def insert(
        self, vectors: np.ndarray, items: Sequence[ItemMeta], crops: Sequence[np.ndarray] | None, skip: bool, same_image: str
    ) -> AddResult:
        items = named(items, identity_name)
        with self._writing() as generation:
            self.check_case({item.identity for item in items})
            keep, result = self.screen(items, vectors, skip, same_image)
            if not keep:
                return result
            kept, enrolled = vectors[keep], now()
            rows = [item_row(items[i], enrolled) for i in keep]
            path = self.folder / new_name("seg", generation, ".bin")
            with self._catalogue.atomic([path]) as catalogue:
                # AUTOINCREMENT hands out consecutive ids (checked by insert_items).
                ids = np.asarray(catalogue.insert_items(rows), dtype=np.int64)
                record = write_segment(path, ids, kept)
                seq = catalogue.insert_segment(record, len(ids))
                catalogue.set_meta({"generation": str(generation)})
            view = self.view
            # IVF-PQ keeps reading these embeddings until compaction: from the mapped segment.
            originals = None if view.layout.active.exact else read_segment(path, record, self.meta.dim)[1]
            labels = [(int(i), items[j].identity) for i, j in zip(ids, keep, strict=True)]
            view.extend(ids, kept, labels, seq, generation, originals)
            rewrite = maintenance.maintain(view, generation)
            if rewrite is not None:
                self._commit(rewrite, generation)
            if crops is not None:
                thumbs.write(self.folder, ids.tolist(), [crops[i] for i in keep])
        return replace(result, ids=ids.tolist())

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
            self._commit(maintenance.without(self.view, ids, generation), generation, delete_ids=ids)
            thumbs.remove(self.folder, ids)
            self.view.labels.drop(identity)
            self._check_removed(ids, len(self._catalogue.identity_ids(identity)), repr(identity))
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
            self._commit(maintenance.without(self.view, ids, generation), generation, delete_ids=ids)
            thumbs.remove(self.folder, ids)
            self.view.labels.drop_ids(ids)
            self._check_removed(ids, len(self._catalogue.get_items([item.id])), f"item {item.id}")
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
            self.check_case({new_name}, leaving=identity)
            rewrite = maintenance.without(self.view, np.zeros(0, np.int64), generation)
            self._commit(rewrite, generation, relabel=(identity, new_name))
            self.view.labels.rename(identity, new_name)
        return len(ids)

    def _check_removed(self, ids: np.ndarray, rows_left: int, what: str) -> None:
        """Raise GalleryError when removed ``ids`` are still in the database or the index."""
        index_left = sum(int(shard.holds(ids).sum()) for shard in self.view.layout.shards())
        if rows_left or index_left:
            raise GalleryError(
                f"{self.db_path}: after removing {what}, {rows_left} of its items are still in the "
                f"database and {index_left} in the index (see reid gallery info --check)"
            )

    def reindex(self, spec: IndexSpec) -> None:
        """Rebuild the index as ``spec`` says (e.g. flat to IVF-PQ, or into shards), keeping every item."""
        spec.check_dim(self.meta.dim)
        with self._writing() as generation:
            self._commit(maintenance.reindex(self.view, spec, generation), generation)

    def refresh(self) -> bool:
        """Catch up with what other processes committed; True when something changed."""
        with gallery_lock(self.folder, exclusive=False, timeout=self.lock_timeout):
            return self._sync()

    def _commit(
        self,
        rewrite: maintenance.Rewrite,
        generation: int,
        delete_ids: np.ndarray | None = None,
        relabel: tuple[str, str] | None = None,
    ) -> None:
        """Name ``rewrite``'s files in one transaction (dropping all segments), then use them;
        the same transaction deletes the rows ``delete_ids`` and renames the identity
        ``relabel`` (old, new).  Until the commit the new files are deleted on failure;
        after it they are the gallery, and only the files it no longer names are deleted.
        """
        layout, view = rewrite.layout, self.view
        old = self._read_state().names()
        meta = {"generation": str(generation), **layout_meta(layout.active_record, layout.template)}
        if rewrite.spec != view.spec:
            meta["index_spec"] = json.dumps(rewrite.spec.to_dict())
            meta["facts_sha256"] = facts_hash({**self._catalogue.read_meta(), **meta})
        with self._catalogue.atomic(rewrite.paths()) as catalogue:
            if delete_ids is not None:
                catalogue.delete_items(delete_ids)
            if relabel is not None:
                catalogue.rename_identity(*relabel)
            catalogue.set_meta(meta)
            catalogue.replace_shards([record for _, record in layout.sealed])
        for item in rewrite.written:
            if item.stored is not None:
                item.shard.attach(item.stored)
        view.use(layout, generation, rewrite.spec)
        if rewrite.template is not None and layout.template is not None:
            view.keep_template(layout.template.name, rewrite.template)
        for name in old - layout.names():
            (self.folder / name).unlink(missing_ok=True)

    def _remove_orphans(self) -> None:
        """Delete files no commit names: leftovers of writers that crashed (caller holds the lock)."""
        named_files = self._read_state().names()
        for path in self.folder.iterdir():
            name = path.name
            leftover = (name.startswith(FILE_PREFIXES) and name not in named_files) or (
                name.startswith(tuple("." + p for p in FILE_PREFIXES)) and TEMP_MARK in name
            )
            if leftover and path.is_file():
                path.unlink(missing_ok=True)

    # ----------------------------------------------------------------- checking, export

    def check(self, queries: int = RECALL_QUERIES, k: int = 10, seed: int = 0) -> CheckReport:
        """Re-verify everything on disk, then measure the index's recall against exact search.

        Verified: the size and SHA-256 of every file the database names; SQLite's full
        integrity check (every page, and every table row against every index entry); every
        item row's column types and checksum, and the checksum of the gallery's fixed facts
        (format 3 on); and, reloading the index files from disk, that their ids are exactly
        the items' ids, each once.  Raises GalleryError with the first problem found and how
        many more there are.  Then counts the items that are the same image as an item of
        another identity, and near duplicates (:func:`reid.gallery.check.scan_duplicates`).
        """
        with gallery_lock(self.folder, exclusive=False, timeout=self.lock_timeout):
            self._sync()
            files = verify_files(self.folder, self._read_state().records())
            problems = self._catalogue.problems(self.meta.format)
            if not problems:
                # A full reload compares the index files' ids with the item rows afresh.
                self._view = None
                self._sync()
        if problems:
            more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
            raise GalleryError(f"{self.db_path}: database check failed: {problems[0]}{more}")
        scanned, other_identity, near = scan_duplicates(self.view, seed=seed)
        return CheckReport(
            database="ok",
            items=len(self),
            recall=self.recall(queries, k, seed),
            files=files,
            identities=self.identity_count,
            checksums=self.meta.format >= FORMAT,
            scanned=scanned,
            same_image_other_identity=other_identity,
            near_duplicates=near,
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
            view = self.view
            if suffix == ".jsonl":
                write_file_atomic(path, lambda handle: write_jsonl(handle, self._catalogue))
            else:
                info = self.info()
                write_file_atomic(
                    path, lambda handle: write_npz(handle, self._catalogue, view.labels.ids, view.dim, view.originals, info)
                )
        return len(self)

    # ----------------------------------------------------------------- loading and syncing

    def _initialize(self, card: ModelFacts, spec: IndexSpec) -> None:
        if card.embedding_dim < 1:
            raise ConfigError(f"model {card.name!r}: embedding dimension must be positive")
        if not card.fingerprint:
            raise ConfigError(f"model {card.name!r}: no fingerprint; a gallery could not tell its embeddings apart")
        spec.check_dim(card.embedding_dim)
        path = self.folder / new_name("index", 0, ".faiss")
        record = write_snapshot(new_index(spec, card.embedding_dim), path)
        with self._catalogue.atomic([path]) as catalogue:
            catalogue.initialize(card, spec, ShardRecord(record, 0))

    def _read_state(self) -> DiskState:
        """The state the database records (its facts become :attr:`meta`)."""
        self.meta, state = self._catalogue.read_state()
        return state

    def _sync(self) -> bool:
        """Bring the view up to the committed state (the caller holds the lock); True when it changed."""
        state = self._read_state()
        view = self._view
        if view is not None and state.generation == view.generation:
            return False
        if view is None or not view.catch_up(state, self._catalogue):
            self._loaded(state)
        return True

    def _loaded(self, state: DiskState) -> LoadedView:
        """A new view of ``state`` (sealed shards of the current view kept), now the gallery's."""
        self._view = load_view(self.folder, self.meta.dim, state, self._catalogue, self._gpu, self._view)
        return self._view


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


def _describe(spec: IndexSpec, other: IndexSpec) -> str:
    """``spec``'s kind, with the options where it differs from ``other``."""
    theirs = other.to_dict()
    differ = [f"{k}={v}" for k, v in spec.to_dict().items() if k != "kind" and v != theirs[k]]
    return spec.kind + (f" ({', '.join(differ)})" if differ and spec.kind == other.kind else "")
