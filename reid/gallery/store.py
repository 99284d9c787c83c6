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
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

import faiss
import numpy as np

from reid.errors import ConfigError, GalleryError
from reid.gallery.device import GPU_ENV, GPU_MAX_K, GpuSearch, detect_gpus, use_gpu
from reid.gallery.files import (
    FileRecord,
    new_name,
    read_segment,
    read_snapshot,
    read_vectors,
    verify_file,
    write_file_atomic,
    write_segment,
    write_snapshot,
)
from reid.decision import similarity_to_distance
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
from reid.gallery.shards import (
    CHUNK,
    Shard,
    ShardRecord,
    Written,
    build_shard,
    search_index,
    train_template,
    write_shard,
)
from reid.paths import check_output_file, resolve_named

DB_FILE = "gallery.db"
# Format 2 added sealed shards, vector files and templates; format 3 a checksum of every
# item row and of the gallery's fixed facts.  Older galleries are upgraded by their first write.
FORMAT = 3
SCORES = ("best", "mean")
DEFAULT_GALLERIES = Path("galleries")
FILE_PREFIXES = ("index-", "seg-", "vec-", "template-")

SHARDS_TABLE = """CREATE TABLE IF NOT EXISTS shards (
    position INTEGER PRIMARY KEY,
    name TEXT NOT NULL, size INTEGER NOT NULL, sha256 TEXT NOT NULL, count INTEGER NOT NULL,
    vectors_name TEXT, vectors_size INTEGER, vectors_sha256 TEXT
)"""
SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE items (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        identity TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT '',
        camera TEXT,
        frame INTEGER,
        time REAL,
        box_x INTEGER, box_y INTEGER, box_w INTEGER, box_h INTEGER,
        enrolled TEXT NOT NULL,
        image_hash TEXT,
        row_sha256 TEXT
    )""",
    "CREATE INDEX items_identity ON items(identity)",
    "CREATE INDEX items_hash ON items(image_hash)",
    """CREATE TABLE segments (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL, size INTEGER NOT NULL, sha256 TEXT NOT NULL, count INTEGER NOT NULL
    )""",
    SHARDS_TABLE,
)
ITEM_COLUMNS = "id, identity, source, camera, frame, time, box_x, box_y, box_w, box_h, enrolled, image_hash"
# The meta values a gallery keeps for life (or until a reindex): their checksum is meta's facts_sha256.
FACT_KEYS = ("model_fingerprint", "model_name", "model_kind", "dim", "threshold", "created", "index_spec")
SQL_CHUNK = 900  # stays under SQLite's default limit of host parameters per statement
ROWS_CHUNK = 100_000  # rows fetched from SQLite at a time when reading whole tables
MAX_PROBLEMS = 100  # problems a database check collects before it stops looking
# An item row whose columns do not hold what the gallery writes: SQLite checks no types.
BAD_ROW = (
    "typeof(identity) != 'text' OR identity = '' OR typeof(source) != 'text' OR typeof(enrolled) != 'text'"
    " OR typeof(camera) NOT IN ('text', 'null') OR typeof(frame) NOT IN ('integer', 'null')"
    " OR typeof(time) NOT IN ('real', 'integer', 'null') OR typeof(image_hash) NOT IN ('text', 'null')"
    " OR typeof(box_x) NOT IN ('integer', 'null') OR typeof(box_y) NOT IN ('integer', 'null')"
    " OR typeof(box_w) NOT IN ('integer', 'null') OR typeof(box_h) NOT IN ('integer', 'null')"
)

# Segments are folded into a new snapshot once they hold this share of its items (so
# rewrites stay proportional to growth), or once there are this many files to open.
COMPACT_SHARE = 0.25
COMPACT_MIN_ITEMS = 4096
COMPACT_MAX_SEGMENTS = 64
# Candidates re-ranked at a time: bounds the float32 copies of their embeddings (128 MiB at 512-d).
RERANK_ROWS = 65_536


def resolve_gallery_path(spec: str | Path) -> Path:
    """A gallery folder from a path (``./g``, ``a/g``: that path), or from a bare name under ``galleries/``."""
    return resolve_named(spec, DEFAULT_GALLERIES)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class _DiskState:
    generation: int
    spec: IndexSpec
    active: ShardRecord
    sealed: list[ShardRecord]
    template: FileRecord | None
    segments: list[tuple[int, FileRecord, int]]

    def names(self) -> set[str]:
        named = {name for record in [*self.sealed, self.active] for name in record.names()}
        named |= {record.name for _, record, _ in self.segments}
        return named | ({self.template.name} if self.template else set())


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


@dataclass
class _Labels:
    """Item ids (ascending, as AUTOINCREMENT hands them out) and their identity codes."""

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    names: list[str] = field(default_factory=list)
    code_of: dict[str, int] = field(default_factory=dict)
    _count: int | None = None

    @property
    def identity_count(self) -> int:
        if self._count is None:
            self._count = len(np.unique(self.codes))
        return self._count

    def extend(self, rows: Sequence[tuple[int, str]]) -> None:
        if not rows:
            return
        codes = np.empty(len(rows), np.int32)
        for i, (_, name) in enumerate(rows):
            code = self.code_of.get(name)
            if code is None:
                code = self.code_of[name] = len(self.names)
                self.names.append(name)
            codes[i] = code
        self.ids = np.concatenate([self.ids, np.fromiter((r[0] for r in rows), np.int64, len(rows))])
        self.codes = np.concatenate([self.codes, codes])
        self._count = None

    def drop(self, identity: str) -> None:
        code = self.code_of.get(identity)
        if code is not None:
            keep = self.codes != code
            self.ids, self.codes = self.ids[keep], self.codes[keep]
            self._count = None

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.ids, ids)
        pos = np.clip(pos, 0, max(len(self.ids) - 1, 0))
        return self.codes[pos]


class Gallery:
    """An open gallery.  Create one with :meth:`create`, :meth:`open` or :meth:`open_or_create`.

    Searching uses the copy loaded in memory; :meth:`refresh` picks up what other processes
    committed since.  Writes (:meth:`add`, :meth:`remove_identity`, :meth:`reindex`) first
    catch up with the disk under the lock, so concurrent writers never lose each other's work.
    ``gpu`` (default: the ``REID_FAISS_GPU`` environment variable, else ``auto``) says
    whether searches run on GPUs; see :mod:`reid.gallery.device`.
    """

    def __init__(self, folder: Path, lock_timeout: float, gpu: str | None = None) -> None:
        self.folder = Path(folder)
        self.db_path = self.folder / DB_FILE
        self.lock_timeout = lock_timeout
        support = detect_gpus()
        self._gpu = GpuSearch(support.devices) if use_gpu(gpu or os.environ.get(GPU_ENV), support) else None
        self._db = self._connect()
        self.meta: GalleryMeta
        self.spec = IndexSpec()
        self._layout: _Layout
        self._searcher: faiss.Index
        self._template: tuple[str, faiss.Index] | None = None
        self._generation = -1
        self._segments: list[int] = []
        self._labels = _Labels()
        self._stale = True

    # ----------------------------------------------------------------- opening

    @classmethod
    def create(
        cls,
        folder: str | Path,
        card: ModelFacts,
        spec: IndexSpec | None = None,
        lock_timeout: float = 120.0,
        gpu: str | None = None,
    ) -> Gallery:
        """A new, empty gallery for embeddings of the model ``card`` describes.

        A failed creation leaves nothing: no database, no lock, no folder it made.
        """
        folder = Path(folder)
        with (
            _made_for(folder),
            gallery_lock(folder, exclusive=True, timeout=lock_timeout),
            _new_removed_on_error(folder),
        ):
            with _closed_on_error(cls(folder, lock_timeout, gpu)) as gallery:
                if gallery._has_meta():
                    raise GalleryError(f"{folder}: a gallery already exists here")
                gallery._initialize(card, spec or IndexSpec())
                gallery._load()
        return gallery

    @classmethod
    def open(cls, folder: str | Path, lock_timeout: float = 120.0, gpu: str | None = None) -> Gallery:
        """Open an existing gallery, verifying its files against its database."""
        folder = Path(folder)
        if not (folder / DB_FILE).is_file():
            raise GalleryError(f"{folder}: no gallery here (no {DB_FILE}); create one with reid enroll")
        with gallery_lock(folder, exclusive=False, timeout=lock_timeout), _closed_on_error(cls(folder, lock_timeout, gpu)) as gallery:
            if not gallery._has_meta():
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
    ) -> Gallery:
        """Open the gallery at ``folder`` (checking it was made with ``card``'s model) or create it.

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
                if not gallery._has_meta():
                    gallery._initialize(card, spec or IndexSpec())
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
            if gallery._has_meta() and gallery._query("SELECT 1 FROM items LIMIT 1"):
                return False
            gallery.close()
            _remove_gallery_files(folder)
        with suppress(OSError):
            folder.rmdir()
        return True

    def close(self) -> None:
        self._db.close()

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
        return self.meta.threshold

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
            created=self.meta.created,
            generation=self._generation,
            segments=len(self._segments),
            bytes=size,
            shards=self.shard_count,
            search_device=self._device(),
        )

    def identities(self) -> list[IdentitySummary]:
        rows = self._query(
            "SELECT identity, COUNT(*), MIN(enrolled), MAX(enrolled) FROM items GROUP BY identity ORDER BY identity"
        )
        return [IdentitySummary(r[0], r[1], r[2], r[3]) for r in rows]

    def items(self, identity: str | None = None, limit: int | None = None) -> list[GalleryItem]:
        sql = f"SELECT {ITEM_COLUMNS} FROM items"
        args: list[Any] = []
        if identity is not None:
            sql += " WHERE identity = ?"
            args.append(identity)
        sql += " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [_item(row) for row in self._query(sql, args)]

    def get_items(self, ids: Sequence[int]) -> dict[int, GalleryItem]:
        found: dict[int, GalleryItem] = {}
        ids = [int(i) for i in ids]
        for start in range(0, len(ids), SQL_CHUNK):
            chunk = ids[start : start + SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            for row in self._query(f"SELECT {ITEM_COLUMNS} FROM items WHERE id IN ({marks})", chunk):
                found[row[0]] = _item(row)
        return found

    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` are already stored (a hint; :meth:`add` checks again under the lock)."""
        known: set[str] = set()
        hashes = list(dict.fromkeys(h for h in hashes if h))
        for start in range(0, len(hashes), SQL_CHUNK):
            chunk = hashes[start : start + SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._query(f"SELECT DISTINCT image_hash FROM items WHERE image_hash IN ({marks})", chunk)
            known.update(r[0] for r in rows)
        return known

    def embeddings(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored embeddings of ``ids`` (float32; float16 precision for IVF-PQ shards)."""
        return self._originals(np.asarray(ids, dtype=np.int64))

    # ----------------------------------------------------------------- search

    def search_items(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest items of each query: (distances, item ids); id -1 pads short rows."""
        if k < 1:
            raise ConfigError(f"top-k must be at least 1, got {k}")
        queries = self._check_vectors(queries)
        if len(self) == 0:
            return np.full((len(queries), k), np.inf), np.full((len(queries), k), -1, np.int64)
        sims, ids = self._nearest(queries, min(k, len(self)))
        distances = similarity_to_distance(sims)
        distances[ids < 0] = np.inf
        return distances, ids

    def search(self, queries: np.ndarray, k: int = 5, score: str = "best") -> list[list[IdentityMatch]]:
        """The ``k`` nearest identities of each query, nearest first.

        ``score="best"``: an identity's distance is that of its nearest item.  ``"mean"``:
        the mean distance to all its items (identities are drawn from the nearest items).
        """
        if score not in SCORES:
            raise ConfigError(f"unknown identity score {score!r}; choose one of {', '.join(SCORES)}")
        if k < 1:
            raise ConfigError(f"top-k must be at least 1, got {k}")
        queries = self._check_vectors(queries)
        results: list[list[IdentityMatch]] = [[] for _ in range(len(queries))]
        total = len(self)
        if total == 0 or len(queries) == 0:
            return results
        k = min(k, self.identity_count)
        fetch = min(total, max(4 * k, 32))
        pending = np.arange(len(queries))
        while len(pending):
            sims, ids = self._nearest(queries[pending], fetch)
            short = []
            for row, query in enumerate(pending):
                found = self._group(sims[row], ids[row])
                results[query] = found if score == "mean" else found[:k]
                if len(found) < k and fetch < total:
                    short.append(query)
            pending = np.asarray(short, dtype=np.int64)
            fetch = min(total, fetch * 4)
        if score == "mean":
            results = [self._mean_scores(queries[i], found, k) for i, found in enumerate(results)]
        return results

    def _nearest(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Similarities and ids of the ``k`` nearest items; IVF-PQ candidates re-ranked exactly."""
        refine = self.spec.refine if any(not s.exact for s in self._layout.shards()) else 0
        fetch = min(k * refine, len(self)) if refine else k
        with search_settings(len(queries)):
            sims, ids = self._search_index(fetch).search(queries, fetch)
        return self._rerank(queries, ids, k) if refine else (sims, ids)

    def _search_index(self, k: int) -> faiss.Index:
        if self._gpu is None or k > GPU_MAX_K:
            return self._searcher
        shards = self._layout.shards()
        copies = self._gpu.copies([shard.index for shard in shards])
        indexes = [copy if copy is not None else shard.index for copy, shard in zip(copies, shards, strict=True)]
        return search_index(indexes, self.meta.dim, threaded=True)

    def _rerank(self, queries: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best of each row of candidate ``ids`` by exact inner product with the stored embeddings."""
        sims = np.full(ids.shape, -np.inf, np.float32)
        step = max(1, RERANK_ROWS // max(ids.shape[1], 1))
        for start in range(0, len(ids), step):
            block = ids[start : start + step]
            rows, cols = np.nonzero(block >= 0)
            unique, inverse = np.unique(block[rows, cols], return_inverse=True)
            vectors = self._originals(unique)
            sims[start + rows, cols] = np.einsum("ij,ij->i", vectors[inverse], queries[start + rows])
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        ranked = np.take_along_axis(ids, order, axis=1)
        ranked_sims = np.take_along_axis(sims, order, axis=1)
        ranked[~np.isfinite(ranked_sims)] = -1
        return ranked_sims, ranked

    def _group(self, sims: np.ndarray, ids: np.ndarray) -> list[IdentityMatch]:
        valid = ids >= 0
        sims, ids = sims[valid], ids[valid]
        codes = self._labels.lookup(ids)
        # Neighbours come nearest first, so an identity's first hit is its best.
        _, first = np.unique(codes, return_index=True)
        first = np.sort(first)
        distances = similarity_to_distance(sims[first])
        names = self._labels.names
        return [
            IdentityMatch(names[codes[pos]], float(dist), int(ids[pos]))
            for pos, dist in zip(first, distances, strict=True)
        ]

    def _mean_scores(self, query: np.ndarray, found: list[IdentityMatch], k: int) -> list[IdentityMatch]:
        # Exact means over all items of each candidate identity; the candidates are the
        # identities among the nearest items, so an identity with no near item never wins.
        scored = []
        for match in found:
            code = self._labels.code_of[match.identity]
            vectors = self._originals(self._labels.ids[self._labels.codes == code])
            mean = float(similarity_to_distance(vectors @ query).mean())
            scored.append(IdentityMatch(match.identity, mean, match.item_id))
        scored.sort(key=lambda m: m.distance)
        return scored[:k]

    # ----------------------------------------------------------------- writing

    def add(self, embeddings: np.ndarray, items: Sequence[ItemMeta], skip_duplicates: bool = True) -> AddResult:
        """Store one batch atomically: after a crash either all of it is there or none.

        Items whose ``image_hash`` is already stored (or repeats within the batch) are
        skipped when ``skip_duplicates``; their positions come back in ``duplicates``.
        """
        vectors = self._check_vectors(embeddings)
        if len(vectors) != len(items):
            raise ConfigError(f"{len(vectors)} embeddings for {len(items)} items")
        for item in items:
            if not item.identity or not item.identity.strip():
                raise ConfigError(f"{item.source or 'item'}: identity label is empty")
        with gallery_lock(self.folder, exclusive=True, timeout=self.lock_timeout):
            self._begin_write()
            keep, duplicates = self._split_duplicates(items) if skip_duplicates else (list(range(len(items))), [])
            if not keep:
                return AddResult([], duplicates)
            kept_vectors = vectors[keep]
            enrolled = _now()
            rows = [_row(items[i], enrolled) for i in keep]
            generation = self._generation + 1
            path = self.folder / new_name("seg", generation, ".bin")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                before = self._sequence()
                # AUTOINCREMENT hands out the ids after ``before`` in order (checked below).
                self._db.executemany(
                    "INSERT INTO items (identity, source, camera, frame, time, box_x, box_y, box_w, box_h, "
                    "enrolled, image_hash, row_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(*row, _row_hash(before + 1 + n, row)) for n, row in enumerate(rows)],
                )
                after = self._sequence()
                if after - before != len(rows):
                    raise GalleryError(f"{self.db_path}: item ids are not consecutive; refusing to write")
                ids = np.arange(before + 1, after + 1, dtype=np.int64)
                record = write_segment(path, ids, kept_vectors)
                seq = self._db.execute(
                    "INSERT INTO segments (name, size, sha256, count) VALUES (?, ?, ?, ?)",
                    (record.name, record.size, record.sha256, len(ids)),
                ).lastrowid
                self._set_meta({"generation": str(generation)})
                self._db.execute("COMMIT")
            except BaseException as exc:
                self._rollback()
                path.unlink(missing_ok=True)
                self._raise_write_error(exc)
                raise
            try:
                # IVF-PQ keeps reading these embeddings until compaction: from the mapped
                # segment, not from memory.
                originals = None if self._layout.active.exact else read_segment(path, record, self.meta.dim)[1]
                self._layout.active.add(ids, kept_vectors, originals)
                self._grown(ids, kept_vectors)
                self._labels.extend([(int(i), items[j].identity) for i, j in zip(ids, keep, strict=True)])
                self._segments.append(int(seq))
                self._generation = generation
                self._maintain()
            except BaseException:
                self._stale = True
                raise
        return AddResult(ids.tolist(), duplicates)

    def remove_identity(self, identity: str) -> int:
        """Remove every item of ``identity``; returns how many were removed.

        The items are found by reading the whole table and by the identity index; when
        the two disagree the database is damaged and nothing is removed.  Afterwards both
        must find no item of ``identity`` left.  Raises GalleryError otherwise.
        """
        with gallery_lock(self.folder, exclusive=True, timeout=self.lock_timeout):
            self._begin_write()
            ids = self._identity_ids(identity)
            if len(ids) == 0:
                raise GalleryError(f"{self.folder}: no identity {identity!r} in the gallery")
            generation = self._generation + 1
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
                self._labels.drop(identity)
            except BaseException:
                # Shards may have lost items in memory without the commit: reload them.
                self._stale = True
                raise
            rows_left = len(self._identity_ids(identity))
            index_left = sum(int(shard.holds(ids).sum()) for shard in self._layout.shards())
            if rows_left or index_left:
                self._stale = True
                raise GalleryError(
                    f"{self.db_path}: after removing {identity!r}, {rows_left} of its items are still in the "
                    f"database and {index_left} in the index (see reid gallery info --check)"
                )
        return len(ids)

    def _identity_ids(self, identity: str) -> np.ndarray:
        """Ids of ``identity``'s items, ascending; GalleryError when the table and its
        identity index disagree on them (a damaged database)."""
        scanned = self._query("SELECT id FROM items NOT INDEXED WHERE identity = ? ORDER BY id", [identity])
        indexed = self._query(
            "SELECT id FROM items INDEXED BY items_identity WHERE identity = ? ORDER BY id", [identity]
        )
        if scanned != indexed:
            raise GalleryError(
                f"{self.db_path}: the database is damaged: the items table holds {len(scanned)} items of "
                f"{identity!r}, its identity index {len(indexed)}; nothing changed (see reid gallery info --check)"
            )
        return np.asarray([row[0] for row in scanned], dtype=np.int64)

    def reindex(self, spec: IndexSpec) -> None:
        """Rebuild the index as ``spec`` says (e.g. flat to IVF-PQ, or into shards), keeping every item."""
        spec.check_dim(self.meta.dim)
        with gallery_lock(self.folder, exclusive=True, timeout=self.lock_timeout):
            self._begin_write()
            generation = self._generation + 1
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
            state = self._read_state()
            records = [r.index for r in [*state.sealed, state.active]]
            records += [r.vectors for r in [*state.sealed, state.active] if r.vectors is not None]
            records += [record for _, record, _ in state.segments]
            records += [state.template] if state.template is not None else []
            for record in records:
                verify_file(self.folder / record.name, record)
            problems = self._database_problems()
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
            files=len(records),
            identities=self.identity_count,
            checksums=self.meta.format >= FORMAT,
        )

    def _database_problems(self) -> list[str]:
        """What SQLite's integrity check, the item rows' types and checksums and the facts'
        checksum say is wrong (the caller holds the lock)."""
        try:
            verdicts = [row[0] for row in self._db.execute(f"PRAGMA integrity_check({MAX_PROBLEMS})")]
            if verdicts != ["ok"]:
                return [" ".join(str(v).split()) for v in verdicts]
            bad = self._db.execute(f"SELECT id FROM items NOT INDEXED WHERE {BAD_ROW} ORDER BY id").fetchall()
            problems = [f"item {row[0]} has a value of the wrong type or an empty identity" for row in bad]
            raw = self._read_meta()
            if self.meta.format >= FORMAT and raw.get("facts_sha256") != _facts_hash(raw):
                problems.append(
                    "the gallery's model, dimension, threshold or index options do not match their checksum"
                )
            # A gallery of an older format has no checksums until its first write adds them.
            if self.meta.format >= FORMAT:
                cursor = self._db.execute(f"SELECT {ITEM_COLUMNS}, row_sha256 FROM items NOT INDEXED ORDER BY id")
                while len(problems) < MAX_PROBLEMS and (rows := cursor.fetchmany(ROWS_CHUNK)):
                    problems += [
                        f"item {row[0]} does not match its checksum (changed since it was written)"
                        for row in rows
                        if row[-1] != _row_hash(row[0], row[1:-1])
                    ]
        except sqlite3.DatabaseError as exc:
            return [f"unreadable ({_one_line(exc)})"]
        return problems

    def recall(self, queries: int = 1000, k: int = 10, seed: int = 0) -> RecallReport:
        """Recall@1 and @k of the index against exact search, with stored items as queries.

        The exact answers come from a pass over all stored embeddings, a chunk at a time.
        """
        kind = self.index_kind
        ids = self._labels.ids
        if len(ids) < 2:
            return RecallReport(kind, 0, k, 1.0, 1.0, 0.0, 0.0)
        k = min(k, len(ids) - 1)
        own = np.sort(np.random.default_rng(seed).choice(ids, min(queries, len(ids)), replace=False))
        probe = self._originals(own)
        start = time.perf_counter()
        _, approx = self._nearest(probe, k + 1)
        index_time = time.perf_counter() - start
        start = time.perf_counter()
        heap = faiss.ResultHeap(len(probe), k + 1, keep_max=True)
        for chunk_ids, vectors in self._chunks():
            sims, rows = faiss.knn(probe, vectors, min(k + 1, len(chunk_ids)), metric=faiss.METRIC_INNER_PRODUCT)
            heap.add_result(sims, chunk_ids[rows])
        heap.finalize()
        exact_time = time.perf_counter() - start
        hits_1, hits_k = 0, 0.0
        for i, item in enumerate(own):
            got = [x for x in approx[i] if x != item and x >= 0][:k]
            want = [x for x in heap.I[i] if x != item and x >= 0][:k]
            hits_1 += int(bool(got) and got[0] == want[0])
            hits_k += len(set(got) & set(want)) / k
        return RecallReport(
            index=kind,
            queries=len(own),
            k=k,
            recall_at_1=hits_1 / len(own),
            recall_at_k=hits_k / len(own),
            index_qps=len(own) / max(index_time, 1e-9),
            exact_qps=len(own) / max(exact_time, 1e-9),
        )

    def export(self, path: str | Path) -> int:
        """Write the items to ``path``: ``.npz`` with embeddings, or ``.jsonl`` metadata only.

        Both are written a chunk at a time, so a gallery larger than memory exports too; writers
        wait for the export (it holds the gallery's lock shared) to see one consistent state.
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".npz", ".jsonl"):
            raise ConfigError(f"{path}: export to a .npz (embeddings and items) or a .jsonl (items) file")
        check_output_file(path, "the export")
        with gallery_lock(self.folder, exclusive=False, timeout=self.lock_timeout):
            self._sync()
            write_file_atomic(path, self._write_jsonl if suffix == ".jsonl" else self._write_npz)
        return len(self)

    def _write_jsonl(self, handle: BinaryIO) -> None:
        cursor = self._db.execute(f"SELECT {ITEM_COLUMNS} FROM items ORDER BY id")
        while rows := cursor.fetchmany(ROWS_CHUNK):
            handle.write("".join(json.dumps(_item(row).to_dict()) + "\n" for row in rows).encode())

    def _write_npz(self, handle: BinaryIO) -> None:
        ids = self._labels.ids
        with zipfile.ZipFile(handle, "w", allowZip64=True) as archive:
            _npz_member(archive, "ids", ids)
            with archive.open("embeddings.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_2_0(
                    member, {"descr": "<f4", "fortran_order": False, "shape": (len(ids), self.meta.dim)}
                )
                for start in range(0, len(ids), CHUNK):
                    member.write(self._originals(ids[start : start + CHUNK]).astype("<f4").tobytes())
            columns: list[tuple[str, str, Any]] = [
                ("identity", "identity", str),
                ("source", "source", str),
                ("camera", "COALESCE(camera, '')", str),
                ("frame", "COALESCE(frame, -1)", np.int64),
                ("time", "time", np.float64),
                ("enrolled", "enrolled", str),
                ("image_hash", "COALESCE(image_hash, '')", str),
            ]
            for name, sql, dtype in columns:
                values = [row[0] for row in self._db.execute(f"SELECT {sql} FROM items ORDER BY id")]
                _npz_member(archive, name, np.asarray(values, dtype=dtype))
            box = self._db.execute(
                "SELECT COALESCE(box_x, -1), COALESCE(box_y, -1), COALESCE(box_w, -1), COALESCE(box_h, -1) "
                "FROM items ORDER BY id"
            ).fetchall()
            _npz_member(archive, "box", np.asarray(box, dtype=np.int64).reshape(-1, 4))
            _npz_member(archive, "meta", np.asarray(json.dumps(self.info().to_dict())))

    # ----------------------------------------------------------------- internals

    def _connect(self) -> sqlite3.Connection:
        # SQLite follows links; a database or journal planted as one would be read or
        # written wherever it points.
        for name in (DB_FILE, f"{DB_FILE}-journal"):
            if (self.folder / name).is_symlink():
                raise GalleryError(f"{self.folder / name}: is a link; a gallery's database must be a plain file in it")
        try:
            db = sqlite3.connect(str(self.db_path), timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise GalleryError(f"{self.db_path}: cannot open the gallery database ({_one_line(exc)})") from exc
        try:
            db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            db.close()
            raise GalleryError(f"{self.db_path}: cannot open the gallery database ({_one_line(exc)})") from exc
        return db

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise GalleryError(f"{self.db_path}: unreadable gallery database ({_one_line(exc)})") from exc

    def _tables(self) -> set[str]:
        return {r[0] for r in self._query("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _has_meta(self) -> bool:
        return "meta" in self._tables() and bool(self._query("SELECT 1 FROM meta LIMIT 1"))

    def _initialize(self, card: ModelFacts, spec: IndexSpec) -> None:
        if card.embedding_dim < 1:
            raise ConfigError(f"model {card.name!r}: embedding dimension must be positive")
        if not card.fingerprint:
            raise ConfigError(f"model {card.name!r}: no fingerprint; a gallery could not tell its embeddings apart")
        spec.check_dim(card.embedding_dim)
        index = new_index(spec, card.embedding_dim)
        path = self.folder / new_name("index", 0, ".faiss")
        record = write_snapshot(index, path)
        meta = {
            "format": str(FORMAT),
            "model_fingerprint": card.fingerprint,
            "model_name": card.name,
            "model_kind": card.kind,
            "dim": str(card.embedding_dim),
            "threshold": "" if card.threshold is None else repr(float(card.threshold)),
            "created": _now(),
            "index_spec": json.dumps(spec.to_dict()),
            "generation": "0",
            **_active_meta(ShardRecord(record, 0)),
            **_file_meta("template", None),
        }
        meta["facts_sha256"] = _facts_hash(meta)
        try:
            self._db.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA:
                self._db.execute(statement)
            self._db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
            self._db.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            path.unlink(missing_ok=True)
            self._raise_write_error(exc)
            raise

    def _read_meta(self) -> dict[str, str]:
        return dict(self._query("SELECT key, value FROM meta"))

    def _read_state(self) -> _DiskState:
        """The gallery's state as its database records it, every value checked: a name that
        is not a gallery file name, a negative count or a dimension that is not positive
        means the database is corrupt or was tampered with, and nothing is opened."""
        raw = self._read_meta()
        try:
            self.meta = GalleryMeta(
                model_fingerprint=raw["model_fingerprint"],
                model_name=raw["model_name"],
                model_kind=raw["model_kind"],
                dim=int(raw["dim"]),
                threshold=float(raw["threshold"]) if raw["threshold"] else None,
                created=raw["created"],
                format=int(raw["format"]),
            )
            spec = IndexSpec.from_dict(json.loads(raw["index_spec"]))
            snapshot = FileRecord.from_db(raw["snapshot_name"], raw["snapshot_size"], raw["snapshot_sha256"])
            active = ShardRecord(snapshot, _count(raw["snapshot_count"]), _meta_file(raw, "snapshot_vectors"))
            template = _meta_file(raw, "template")
            generation = _count(raw["generation"])
        except (KeyError, ValueError, TypeError, ConfigError) as exc:
            raise GalleryError(f"{self.db_path}: gallery metadata is incomplete or malformed ({exc})") from exc
        except GalleryError as exc:
            raise GalleryError(f"{self.db_path}: {exc}") from None
        if self.meta.format > FORMAT:
            raise GalleryError(f"{self.db_path}: gallery format {self.meta.format} is newer than this reid reads")
        try:
            sealed = []
            if "shards" in self._tables():
                for name, size, sha, count, vname, vsize, vsha in self._query(
                    "SELECT name, size, sha256, count, vectors_name, vectors_size, vectors_sha256 "
                    "FROM shards ORDER BY position"
                ):
                    vectors = FileRecord.from_db(vname, vsize, vsha) if vname else None
                    sealed.append(ShardRecord(FileRecord.from_db(name, size, sha), _count(count), vectors))
            segments = [
                (seq, FileRecord.from_db(name, size, sha), _count(count))
                for seq, name, size, sha, count in self._query(
                    "SELECT seq, name, size, sha256, count FROM segments ORDER BY seq"
                )
            ]
        except (ValueError, TypeError) as exc:
            raise GalleryError(f"{self.db_path}: gallery corrupt or tampered ({exc})") from None
        except GalleryError as exc:
            raise GalleryError(f"{self.db_path}: {exc}") from None
        return _DiskState(generation, spec, active, sealed, template, segments)

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
        labels = _Labels()
        for rows in self._label_rows():
            labels.extend(rows)
        layout = _Layout(sealed, active, state.active, state.template)
        _verify_ids(self.folder, layout.shards(), labels.ids)
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
        for rows in self._label_rows(after=last):
            self._labels.extend(rows)
        self._generation = state.generation
        if len(self) != len(self._labels.ids):
            self._load()
        return True

    def _label_rows(self, after: int = 0) -> Iterator[list[tuple[int, str]]]:
        """(id, identity) of the items after id ``after``, ascending, a chunk at a time.

        Raises GalleryError when the table cannot be read or an identity is not text.
        """
        try:
            cursor = self._db.execute("SELECT id, identity FROM items WHERE id > ? ORDER BY id", (after,))
            while rows := cursor.fetchmany(ROWS_CHUNK):
                for item_id, identity in rows:
                    if not isinstance(identity, str) or not identity:
                        raise GalleryError(
                            f"{self.db_path}: item {item_id} has no text identity; the database is damaged "
                            "(see reid gallery info --check)"
                        )
                yield rows
        except sqlite3.DatabaseError as exc:
            raise GalleryError(f"{self.db_path}: unreadable gallery database ({_one_line(exc)})") from exc

    def _begin_write(self) -> None:
        """Catch up, clear crashed writers' leftovers and upgrade an old format (the caller holds the lock)."""
        self._sync()
        self._remove_orphans()
        if self.meta.format < FORMAT:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(SHARDS_TABLE)
                if "row_sha256" not in {row[1] for row in self._query("PRAGMA table_info(items)")}:
                    self._db.execute("ALTER TABLE items ADD COLUMN row_sha256 TEXT")
                    last = 0
                    while rows := self._query(
                        f"SELECT {ITEM_COLUMNS} FROM items WHERE id > ? ORDER BY id LIMIT ?", [last, ROWS_CHUNK]
                    ):
                        self._db.executemany(
                            "UPDATE items SET row_sha256 = ? WHERE id = ?",
                            ((_row_hash(row[0], row[1:]), row[0]) for row in rows),
                        )
                        last = rows[-1][0]
                self._set_meta({"format": str(FORMAT), "facts_sha256": _facts_hash(self._read_meta())})
                self._db.execute("COMMIT")
            except BaseException as exc:
                self._rollback()
                self._raise_write_error(exc)
                raise
            self.meta.format = FORMAT

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
    ) -> None:
        """Name ``layout``'s files in one transaction (dropping all segments), then use it.

        Until the commit the new files (``written`` and ``extra``) are deleted on failure;
        after it they are the gallery, and only the files it no longer names are deleted.
        """
        old = self._read_state().names()
        meta = {
            "generation": str(generation),
            **_active_meta(layout.active_record),
            **_file_meta("template", layout.template),
        }
        if spec is not None:
            meta["index_spec"] = json.dumps(spec.to_dict())
            meta["facts_sha256"] = _facts_hash({**self._read_meta(), **meta})
        try:
            self._db.execute("BEGIN IMMEDIATE")
            if delete_ids is not None:
                self._db.executemany("DELETE FROM items WHERE id = ?", ((int(i),) for i in delete_ids))
            self._set_meta(meta)
            self._db.execute("DELETE FROM shards")
            self._db.executemany(
                "INSERT INTO shards (position, name, size, sha256, count, vectors_name, vectors_size, "
                "vectors_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        position,
                        r.index.name,
                        r.index.size,
                        r.index.sha256,
                        r.count,
                        *((r.vectors.name, r.vectors.size, r.vectors.sha256) if r.vectors else (None, None, None)),
                    )
                    for position, (_, r) in enumerate(layout.sealed)
                ],
            )
            self._db.execute("DELETE FROM segments")
            self._db.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            _unlink(written, extra)
            self._raise_write_error(exc)
            raise
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
                name.startswith(tuple("." + p for p in FILE_PREFIXES)) and ".tmp-" in name
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

    def _chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for shard in self._layout.shards():
            yield from shard.chunks()

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

    def _sequence(self) -> int:
        row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'items'").fetchone()
        return int(row[0]) if row else 0

    def _set_meta(self, values: dict[str, str]) -> None:
        self._db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", values.items())

    def _raise_write_error(self, exc: BaseException) -> None:
        """A database that cannot be written (read-only, disk full) becomes one GalleryError;
        the transaction was rolled back, so the gallery is as it was."""
        if isinstance(exc, sqlite3.Error):
            raise GalleryError(f"{self.db_path}: cannot write ({_one_line(exc)}); the gallery is unchanged") from exc

    def _rollback(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

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


def _one_line(exc: BaseException) -> str:
    """An error's text on one line: SQLite quotes multi-line schema SQL in some of its messages."""
    return " ".join(str(exc).split())


def _describe(spec: IndexSpec, other: IndexSpec) -> str:
    """``spec``'s kind, with the options where it differs from ``other``."""
    theirs = other.to_dict()
    differ = [f"{k}={v}" for k, v in spec.to_dict().items() if k != "kind" and v != theirs[k]]
    return spec.kind + (f" ({', '.join(differ)})" if differ and spec.kind == other.kind else "")


def _file_meta(prefix: str, record: FileRecord | None) -> dict[str, str]:
    return {
        f"{prefix}_name": record.name if record else "",
        f"{prefix}_size": str(record.size) if record else "",
        f"{prefix}_sha256": record.sha256 if record else "",
    }


def _meta_file(raw: dict[str, str], prefix: str) -> FileRecord | None:
    """A file record stored under ``prefix`` in meta; absent (format 1) or empty means none."""
    name = raw.get(f"{prefix}_name", "")
    return FileRecord.from_db(name, raw[f"{prefix}_size"], raw[f"{prefix}_sha256"]) if name else None


def _count(value: Any) -> int:
    """A count read from the database: a non-negative whole number, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or int(value) < 0:
        raise ValueError(f"{value!r} is not a count")
    return int(value)


def _active_meta(record: ShardRecord) -> dict[str, str]:
    return {
        "snapshot_name": record.index.name,
        "snapshot_size": str(record.index.size),
        "snapshot_sha256": record.index.sha256,
        "snapshot_count": str(record.count),
        **_file_meta("snapshot_vectors", record.vectors),
    }


def _npz_member(archive: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


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


def _verify_ids(folder: Path, shards: Sequence[Shard], db_ids: np.ndarray) -> None:
    stored = np.sort(np.concatenate([np.zeros(0, np.int64)] + [shard.ids for shard in shards]))
    if len(stored) == len(db_ids) and np.array_equal(stored, db_ids):
        return
    missing = np.setdiff1d(db_ids, stored).size
    extra = np.setdiff1d(stored, db_ids).size
    repeated = len(stored) - len(np.unique(stored))
    raise GalleryError(
        f"{folder}: index and database disagree ({missing} items missing from the index, "
        f"{extra} index entries without an item, {repeated} repeated)"
    )


def _row(item: ItemMeta, enrolled: str) -> tuple[Any, ...]:
    """The stored columns of ``item``, typed as SQLite gives them back (so that the row's
    checksum over what was written equals the one over what is read)."""
    box = item.box if item.box is not None else (None, None, None, None)
    return (
        str(item.identity),
        str(item.source),
        None if item.camera is None else str(item.camera),
        None if item.frame is None else int(item.frame),
        None if item.time is None else float(item.time),
        *(None if v is None else int(v) for v in box),
        enrolled,
        None if item.image_hash is None else str(item.image_hash),
    )


def _row_hash(item_id: int, row: Sequence[Any]) -> str:
    """Checksum of an item row: its id and the columns of :func:`_row`, in that order."""
    return hashlib.sha256(json.dumps([int(item_id), *row]).encode()).hexdigest()[:16]


def _facts_hash(meta: dict[str, str]) -> str:
    """Checksum of the gallery's fixed facts (:data:`FACT_KEYS`) in ``meta``."""
    return hashlib.sha256(json.dumps([meta.get(key, "") for key in FACT_KEYS]).encode()).hexdigest()[:16]


def _item(row: Sequence[Any]) -> GalleryItem:
    box = None if row[6] is None else (int(row[6]), int(row[7]), int(row[8]), int(row[9]))
    return GalleryItem(
        id=int(row[0]),
        identity=row[1],
        source=row[2],
        camera=row[3],
        frame=row[4],
        time=row[5],
        box=box,
        enrolled=row[10],
        image_hash=row[11],
    )
