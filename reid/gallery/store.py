"""A gallery: a FAISS index of embeddings whose ids are row ids of an SQLite table of items.

Folder layout::

    gallery.db                 items, meta (model, dimension, threshold, index), segments
    index-GGGGGGGG-xxxx.faiss  the index snapshot named by the database
    seg-GGGGGGGG-xxxx.bin      batches added since that snapshot (ids + vectors)
    .lock                      the writers' file lock

The database is the single commit point.  A writer takes the lock, writes its new files
(temporary name, fsync, rename), then commits one SQLite transaction that inserts the items
and names the new files.  A crash before that commit leaves the database (rolled back by
SQLite's journal) naming only the old files, which are still there; files no commit names
are deleted by the next writer.  On open, every named file's size and checksum are checked
and the ids in the index must be exactly the ids in the items table.
"""

from __future__ import annotations

import io
import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from reid.errors import ConfigError, GalleryError
from reid.gallery.files import (
    FileRecord,
    new_name,
    read_segment,
    read_snapshot,
    verify_file,
    write_bytes_atomic,
    write_segment,
    write_snapshot,
)
from reid.gallery.index import (
    IndexSpec,
    apply_search_params,
    auto_nlist,
    built_kind,
    index_ids,
    index_vectors,
    ivf_nlist,
    new_index,
    rebuild,
    search_settings,
    similarity_to_distance,
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

DB_FILE = "gallery.db"
FORMAT = 1
SCORES = ("best", "mean")
DEFAULT_GALLERIES = Path("galleries")

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
        image_hash TEXT
    )""",
    "CREATE INDEX items_identity ON items(identity)",
    "CREATE INDEX items_hash ON items(image_hash)",
    """CREATE TABLE segments (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL, size INTEGER NOT NULL, sha256 TEXT NOT NULL, count INTEGER NOT NULL
    )""",
)
ITEM_COLUMNS = "id, identity, source, camera, frame, time, box_x, box_y, box_w, box_h, enrolled, image_hash"
SQL_CHUNK = 900  # stays under SQLite's default limit of host parameters per statement

# Segments are folded into a new snapshot once they hold this share of its items (so
# rewrites stay proportional to growth), or once there are this many files to open.
COMPACT_SHARE = 0.25
COMPACT_MIN_ITEMS = 4096
COMPACT_MAX_SEGMENTS = 64


def resolve_gallery_path(spec: str | Path) -> Path:
    """A gallery folder from a path, or from a bare name under ``galleries/``."""
    path = Path(spec)
    if path.exists() or path.is_absolute() or len(path.parts) > 1:
        return path
    return DEFAULT_GALLERIES / path


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class _DiskState:
    generation: int
    spec: IndexSpec
    snapshot: FileRecord
    snapshot_count: int
    segments: list[tuple[int, FileRecord, int]]


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
    """

    def __init__(self, folder: Path, lock_timeout: float) -> None:
        self.folder = Path(folder)
        self.db_path = self.folder / DB_FILE
        self.lock_timeout = lock_timeout
        self._db = self._connect()
        self.meta: GalleryMeta
        self.spec = IndexSpec()
        self._index: faiss.IndexIDMap2
        self._generation = -1
        self._snapshot = ""
        self._snapshot_count = 0
        self._segments: list[int] = []
        self._labels = _Labels()
        self._stale = True

    # ----------------------------------------------------------------- opening

    @classmethod
    def create(
        cls, folder: str | Path, card: ModelFacts, spec: IndexSpec | None = None, lock_timeout: float = 120.0
    ) -> Gallery:
        """A new, empty gallery for embeddings of the model ``card`` describes."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with gallery_lock(folder, exclusive=True, timeout=lock_timeout):
            gallery = cls(folder, lock_timeout)
            if gallery._has_meta():
                gallery.close()
                raise GalleryError(f"{folder}: a gallery already exists here")
            gallery._initialize(card, spec or IndexSpec())
            gallery._load()
        return gallery

    @classmethod
    def open(cls, folder: str | Path, lock_timeout: float = 120.0) -> Gallery:
        """Open an existing gallery, verifying its files against its database."""
        folder = Path(folder)
        if not (folder / DB_FILE).is_file():
            raise GalleryError(f"{folder}: no gallery here (no {DB_FILE}); create one with reid enroll")
        with gallery_lock(folder, exclusive=False, timeout=lock_timeout):
            gallery = cls(folder, lock_timeout)
            try:
                if not gallery._has_meta():
                    raise GalleryError(f"{gallery.db_path}: empty gallery database (was its creation interrupted?)")
                gallery._load()
            except BaseException:
                gallery.close()
                raise
        return gallery

    @classmethod
    def open_or_create(
        cls, folder: str | Path, card: ModelFacts, spec: IndexSpec | None = None, lock_timeout: float = 120.0
    ) -> Gallery:
        """Open the gallery at ``folder`` (checking it was made with ``card``'s model) or create it.

        ``spec`` applies when the gallery is new; for an existing one it must name its index kind.
        """
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise GalleryError(f"{folder}: not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        with gallery_lock(folder, exclusive=True, timeout=lock_timeout):
            gallery = cls(folder, lock_timeout)
            try:
                if not gallery._has_meta():
                    gallery._initialize(card, spec or IndexSpec())
                gallery._load()
                gallery.check_model(card)
                if spec is not None and spec.kind != gallery.spec.kind:
                    raise ConfigError(
                        f"{folder}: gallery has a {gallery.spec.kind} index, not {spec.kind}; "
                        "change it with reid gallery reindex"
                    )
            except BaseException:
                gallery.close()
                raise
        return gallery

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Gallery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- facts

    def __len__(self) -> int:
        return int(self._index.ntotal)

    @property
    def dim(self) -> int:
        return self.meta.dim

    @property
    def threshold(self) -> float | None:
        return self.meta.threshold

    @property
    def index_kind(self) -> str:
        return built_kind(self._index)

    @property
    def identity_count(self) -> int:
        return self._labels.identity_count

    def check_model(self, card: ModelFacts) -> None:
        """Raise GalleryError unless ``card`` is the model this gallery was made with."""
        if card.fingerprint != self.meta.model_fingerprint or card.embedding_dim != self.meta.dim:
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

    # ----------------------------------------------------------------- search

    def search_items(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest items of each query: (distances, item ids); id -1 pads short rows."""
        if k < 1:
            raise ConfigError(f"top-k must be at least 1, got {k}")
        queries = self._check_vectors(queries)
        if len(self) == 0:
            return np.full((len(queries), k), np.inf), np.full((len(queries), k), -1, np.int64)
        with search_settings(len(queries)):
            sims, ids = self._index.search(queries, min(k, len(self)))
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
            with search_settings(len(pending)):
                sims, ids = self._index.search(queries[pending], fetch)
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

    def _group(self, sims: np.ndarray, ids: np.ndarray) -> list[IdentityMatch]:
        valid = ids >= 0
        sims, ids = sims[valid], ids[valid]
        codes = self._labels.lookup(ids)
        # FAISS returns neighbours nearest first, so an identity's first hit is its best.
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
            ids = self._labels.ids[self._labels.codes == code]
            vectors = self._index.reconstruct_batch(ids)
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
            self._sync()
            self._remove_orphans()
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
                self._db.executemany(
                    "INSERT INTO items (identity, source, camera, frame, time, box_x, box_y, box_w, box_h, "
                    "enrolled, image_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
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
                if isinstance(exc, sqlite3.Error):
                    raise GalleryError(f"{self.db_path}: cannot write ({exc})") from exc
                raise
            try:
                self._index.add_with_ids(kept_vectors, ids)
                self._labels.extend([(int(i), items[j].identity) for i, j in zip(ids, keep, strict=True)])
                self._segments.append(int(seq))
                self._generation = generation
                if self._needs_compaction():
                    self._compact(self._ivf_trained_if_due())
            except BaseException:
                self._stale = True
                raise
        return AddResult(ids.tolist(), duplicates)

    def remove_identity(self, identity: str) -> int:
        """Remove every item of ``identity``; returns how many were removed."""
        with gallery_lock(self.folder, exclusive=True, timeout=self.lock_timeout):
            self._sync()
            self._remove_orphans()
            ids = np.asarray([r[0] for r in self._query("SELECT id FROM items WHERE identity = ?", [identity])])
            if len(ids) == 0:
                raise GalleryError(f"{self.folder}: no identity {identity!r} in the gallery")
            try:
                if supports_remove(self._index):
                    self._index.remove_ids(ids.astype(np.int64))
                    index = self._index
                else:
                    all_ids, vectors = index_vectors(self._index)
                    keep = ~np.isin(all_ids, ids)
                    index = rebuild(self.spec, self.meta.dim, all_ids[keep], vectors[keep])
                self._compact(index, delete_identity=identity)
                self._labels.drop(identity)
            except BaseException:
                self._stale = True
                raise
        return len(ids)

    def reindex(self, spec: IndexSpec) -> None:
        """Rebuild the index as ``spec`` says (e.g. flat to HNSW), keeping every item."""
        with gallery_lock(self.folder, exclusive=True, timeout=self.lock_timeout):
            self._sync()
            self._remove_orphans()
            ids, vectors = index_vectors(self._index)
            self._compact(rebuild(spec, self.meta.dim, ids, vectors), spec=spec)

    def refresh(self) -> bool:
        """Catch up with what other processes committed; True when something changed."""
        with gallery_lock(self.folder, exclusive=False, timeout=self.lock_timeout):
            return self._sync()

    # ----------------------------------------------------------------- checking, export

    def check(self, queries: int = 1000, k: int = 10, seed: int = 0) -> CheckReport:
        """Re-verify files and database on disk, and measure the index's recall against exact search."""
        with gallery_lock(self.folder, exclusive=False, timeout=self.lock_timeout):
            self._sync()
            state = self._read_state()
            verify_file(self.folder / state.snapshot.name, state.snapshot)
            for _, record, _ in state.segments:
                verify_file(self.folder / record.name, record)
            verdict = self._query("PRAGMA quick_check")[0][0]
        if verdict != "ok":
            raise GalleryError(f"{self.db_path}: database check failed ({verdict})")
        return CheckReport(database=verdict, items=len(self), recall=self.recall(queries, k, seed))

    def recall(self, queries: int = 1000, k: int = 10, seed: int = 0) -> RecallReport:
        """Recall@1 and @k of the index against exact search, with stored items as queries."""
        kind = self.index_kind
        ids, vectors = index_vectors(self._index)
        if len(ids) < 2:
            return RecallReport(kind, 0, k, 1.0, 1.0, 0.0, 0.0)
        k = min(k, len(ids) - 1)
        rows = np.random.default_rng(seed).choice(len(ids), min(queries, len(ids)), replace=False)
        probe = np.ascontiguousarray(vectors[rows])
        start = time.perf_counter()
        with search_settings(len(probe)):
            _, approx = self._index.search(probe, k + 1)
        index_time = time.perf_counter() - start
        start = time.perf_counter()
        _, exact_rows = faiss.knn(probe, vectors, k + 1, metric=faiss.METRIC_INNER_PRODUCT)
        exact_time = time.perf_counter() - start
        exact = ids[exact_rows]
        hits_1, hits_k = 0, 0.0
        for i, row in enumerate(rows):
            own = ids[row]
            got = [x for x in approx[i] if x != own and x >= 0][:k]
            want = [x for x in exact[i] if x != own][:k]
            hits_1 += int(bool(got) and got[0] == want[0])
            hits_k += len(set(got) & set(want)) / k
        return RecallReport(
            index=kind,
            queries=len(rows),
            k=k,
            recall_at_1=hits_1 / len(rows),
            recall_at_k=hits_k / len(rows),
            index_qps=len(rows) / max(index_time, 1e-9),
            exact_qps=len(rows) / max(exact_time, 1e-9),
        )

    def export(self, path: str | Path) -> int:
        """Write the items to ``path``: ``.npz`` with embeddings, or ``.jsonl`` metadata only."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".npz", ".jsonl"):
            raise ConfigError(f"{path}: export to a .npz (embeddings and items) or a .jsonl (items) file")
        items = self.items()
        if suffix == ".jsonl":
            payload = "".join(json.dumps(item.to_dict()) + "\n" for item in items).encode()
            write_bytes_atomic(path, payload)
            return len(items)
        ids = np.asarray([item.id for item in items], dtype=np.int64)
        vectors = self._index.reconstruct_batch(ids) if len(ids) else np.zeros((0, self.meta.dim), np.float32)
        buffer = io.BytesIO()
        np.savez(
            buffer,
            ids=ids,
            embeddings=vectors.astype(np.float32),
            identity=np.asarray([i.identity for i in items], dtype=str),
            source=np.asarray([i.source for i in items], dtype=str),
            camera=np.asarray([i.camera or "" for i in items], dtype=str),
            frame=np.asarray([-1 if i.frame is None else i.frame for i in items], dtype=np.int64),
            time=np.asarray([np.nan if i.time is None else i.time for i in items], dtype=np.float64),
            box=np.asarray([i.box or (-1, -1, -1, -1) for i in items], dtype=np.int64).reshape(-1, 4),
            enrolled=np.asarray([i.enrolled for i in items], dtype=str),
            image_hash=np.asarray([i.image_hash or "" for i in items], dtype=str),
            meta=np.asarray(json.dumps(self.info().to_dict())),
        )
        write_bytes_atomic(path, buffer.getvalue())
        return len(items)

    # ----------------------------------------------------------------- internals

    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(str(self.db_path), timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise GalleryError(f"{self.db_path}: cannot open the gallery database ({exc})") from exc
        try:
            db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            db.close()
            raise GalleryError(f"{self.db_path}: cannot open the gallery database ({exc})") from exc
        return db

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise GalleryError(f"{self.db_path}: unreadable gallery database ({exc})") from exc

    def _has_meta(self) -> bool:
        tables = {r[0] for r in self._query("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return "meta" in tables and bool(self._query("SELECT 1 FROM meta LIMIT 1"))

    def _initialize(self, card: ModelFacts, spec: IndexSpec) -> None:
        if card.embedding_dim < 1:
            raise ConfigError(f"model {card.name!r}: embedding dimension must be positive")
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
            "snapshot_name": record.name,
            "snapshot_size": str(record.size),
            "snapshot_sha256": record.sha256,
            "snapshot_count": "0",
        }
        try:
            self._db.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA:
                self._db.execute(statement)
            self._db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
            self._db.execute("COMMIT")
        except BaseException:
            self._rollback()
            path.unlink(missing_ok=True)
            raise

    def _read_meta(self) -> dict[str, str]:
        return dict(self._query("SELECT key, value FROM meta"))

    def _read_state(self) -> _DiskState:
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
            snapshot = FileRecord(raw["snapshot_name"], int(raw["snapshot_size"]), raw["snapshot_sha256"])
            state = _DiskState(int(raw["generation"]), spec, snapshot, int(raw["snapshot_count"]), [])
        except (KeyError, ValueError) as exc:
            raise GalleryError(f"{self.db_path}: gallery metadata is incomplete or malformed ({exc})") from exc
        if self.meta.format > FORMAT:
            raise GalleryError(f"{self.db_path}: gallery format {self.meta.format} is newer than this reid reads")
        state.segments = [
            (seq, FileRecord(name, size, sha), count)
            for seq, name, size, sha, count in self._query(
                "SELECT seq, name, size, sha256, count FROM segments ORDER BY seq"
            )
        ]
        return state

    def _load(self) -> None:
        """Load snapshot, segments and labels from disk and verify them against each other."""
        state = self._read_state()
        index = read_snapshot(self.folder / state.snapshot.name, state.snapshot)
        if index.d != self.meta.dim:
            raise GalleryError(
                f"{self.folder / state.snapshot.name}: index dimension {index.d}, gallery says {self.meta.dim}"
            )
        for _, record, _ in state.segments:
            ids, vectors = read_segment(self.folder / record.name, record, self.meta.dim)
            index.add_with_ids(vectors, ids)
        apply_search_params(index, state.spec)
        labels = _Labels()
        labels.extend(self._query("SELECT id, identity FROM items ORDER BY id"))
        _verify_ids(self.folder, index, labels.ids)
        self._index, self._labels, self.spec = index, labels, state.spec
        self._generation, self._snapshot = state.generation, state.snapshot.name
        self._snapshot_count = state.snapshot_count
        self._segments = [seq for seq, _, _ in state.segments]
        self._stale = False

    def _sync(self) -> bool:
        """Bring the in-memory index up to the committed state (the caller holds the lock)."""
        state = self._read_state()
        if not self._stale and state.generation == self._generation:
            return False
        seqs = [seq for seq, _, _ in state.segments]
        if self._stale or state.snapshot.name != self._snapshot or seqs[: len(self._segments)] != self._segments:
            self._load()
            return True
        for seq, record, _ in state.segments[len(self._segments) :]:
            ids, vectors = read_segment(self.folder / record.name, record, self.meta.dim)
            self._index.add_with_ids(vectors, ids)
            self._segments.append(seq)
        last = int(self._labels.ids[-1]) if len(self._labels.ids) else 0
        self._labels.extend(self._query("SELECT id, identity FROM items WHERE id > ? ORDER BY id", [last]))
        self._generation = state.generation
        if self._index.ntotal != len(self._labels.ids):
            self._load()
        return True

    def _needs_compaction(self) -> bool:
        pending = self._index.ntotal - self._snapshot_count
        if self._ivf_due() or len(self._segments) >= COMPACT_MAX_SEGMENTS:
            return True
        if self.index_kind == "hnsw":
            # Opening replays segments into the graph at HNSW's slow insertion rate, so
            # HNSW galleries keep at most a fixed number of items outside the snapshot.
            return pending >= COMPACT_MIN_ITEMS
        return pending >= max(COMPACT_MIN_ITEMS, COMPACT_SHARE * self._snapshot_count)

    def _ivf_due(self) -> bool:
        """Whether an IVF gallery should (re)train: first at ``train_min`` items, then
        whenever it has grown to want twice the lists it was trained with."""
        if self.spec.kind != "ivf":
            return False
        count = self._index.ntotal
        if self.index_kind == "flat":
            return count >= self.spec.train_min
        return self.spec.nlist == 0 and auto_nlist(count) >= 2 * ivf_nlist(self._index)

    def _ivf_trained_if_due(self) -> faiss.IndexIDMap2 | None:
        if not self._ivf_due():
            return None
        ids, vectors = index_vectors(self._index)
        return rebuild(self.spec, self.meta.dim, ids, vectors)

    def _compact(
        self, index: faiss.IndexIDMap2 | None = None, delete_identity: str | None = None, spec: IndexSpec | None = None
    ) -> None:
        """Write ``index`` (default: the current one) as the new snapshot and drop the segments."""
        index = self._index if index is None else index
        generation = self._generation + 1
        path = self.folder / new_name("index", generation, ".faiss")
        record = write_snapshot(index, path)
        old = [self._snapshot] + [r[0] for r in self._query("SELECT name FROM segments")]
        meta = {
            "generation": str(generation),
            "snapshot_name": record.name,
            "snapshot_size": str(record.size),
            "snapshot_sha256": record.sha256,
            "snapshot_count": str(index.ntotal),
        }
        if spec is not None:
            meta["index_spec"] = json.dumps(spec.to_dict())
        try:
            self._db.execute("BEGIN IMMEDIATE")
            if delete_identity is not None:
                self._db.execute("DELETE FROM items WHERE identity = ?", (delete_identity,))
            self._set_meta(meta)
            self._db.execute("DELETE FROM segments")
            self._db.execute("COMMIT")
        except BaseException:
            self._rollback()
            path.unlink(missing_ok=True)
            raise
        self._index, self._generation, self._snapshot = index, generation, record.name
        self._snapshot_count, self._segments = int(index.ntotal), []
        if spec is not None:
            self.spec = spec
        for name in old:
            (self.folder / name).unlink(missing_ok=True)

    def _remove_orphans(self) -> None:
        """Delete files no commit names: leftovers of writers that crashed (caller holds the lock)."""
        named = {self._snapshot} | {r[0] for r in self._query("SELECT name FROM segments")}
        for path in self.folder.iterdir():
            name = path.name
            leftover = (name.startswith(("index-", "seg-")) and name not in named) or (
                name.startswith((".index-", ".seg-")) and ".tmp-" in name
            )
            if leftover and path.is_file():
                path.unlink(missing_ok=True)

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
def open_gallery(folder: str | Path, lock_timeout: float = 120.0) -> Iterator[Gallery]:
    """``with open_gallery(path) as g:`` — open, verify, and close on exit."""
    gallery = Gallery.open(folder, lock_timeout)
    try:
        yield gallery
    finally:
        gallery.close()


def _verify_ids(folder: Path, index: faiss.IndexIDMap2, db_ids: np.ndarray) -> None:
    stored = np.sort(index_ids(index))
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
    box = item.box if item.box is not None else (None, None, None, None)
    return (
        item.identity,
        item.source,
        item.camera,
        item.frame,
        item.time,
        *(None if v is None else int(v) for v in box),
        enrolled,
        item.image_hash,
    )


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
