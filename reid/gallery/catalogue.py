"""The gallery's SQLite catalogue: schema, statements, checksums and format upgrades.

``gallery.db`` holds four tables:

* ``items``: one row per enrolled image (identity, source, camera, frame, time, box,
  enrol time, image hash) and, from format 3, a checksum of the row (``row_sha256``);
* ``meta``: key/value facts (model, dimension, threshold, index options, the active
  shard's files, the generation counter, the format) and a checksum of the fixed ones;
* ``segments``: the batches added since the active shard's snapshot;
* ``shards``: the sealed shards, in order.

:class:`Catalogue` is the only code that speaks SQL.  It reads, never trusting what it
reads (a gallery folder may come from someone else): every file name, size and checksum
becomes a checked :class:`~reid.gallery.files.FileRecord`, and a malformed value is a
GalleryError.  It writes only inside :meth:`Catalogue.atomic` blocks the store opens under its lock.

Older formats are upgraded by named steps (:data:`MIGRATIONS`), each bringing the database
to one format, applied in order in one transaction by the first write.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from reid.data.io import storable_text
from reid.errors import ConfigError, GalleryError
from reid.gallery.files import FileRecord
from reid.gallery.index import IndexSpec
from reid.gallery.records import GalleryItem, GalleryMeta, IdentitySummary, ItemMeta, ModelFacts
from reid.gallery.shards import ShardRecord
from reid.paths import parse_json_bounded
from reid.text import whole_number

DB_FILE = "gallery.db"
# Format 2 added sealed shards, vector files and templates; format 3 a checksum of every
# item row and of the gallery's fixed facts.  Older galleries are upgraded by their first write.
FORMAT = 3

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
INSERT_ITEM = (
    "INSERT INTO items (identity, source, camera, frame, time, box_x, box_y, box_w, box_h, "
    "enrolled, image_hash, row_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_SHARD = (
    "INSERT INTO shards (position, name, size, sha256, count, vectors_name, vectors_size, "
    "vectors_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
# The meta values a gallery keeps for life (or until a reindex): their checksum is meta's facts_sha256.
FACT_KEYS = ("model_fingerprint", "model_name", "model_kind", "dim", "threshold", "created", "index_spec")
# A random id made with the gallery: a gallery deleted and made again under its name is
# another gallery (what is bound to the first, an API key, does not open the second).
# Galleries made before it have none; their creation time stands in (gallery_uid).
UID_KEY = "uid"
# The gallery's own calibrated threshold (reid.gallery.calibration), a JSON object, and its
# checksum; absent until one is stored, so galleries of every format open without it.
CALIBRATION_KEY = "calibration"
CALIBRATION_SUM = "calibration_sha256"
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


def now() -> str:
    """The current UTC time as the catalogue stores it (ISO 8601, milliseconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def one_line(exc: BaseException) -> str:
    """An error's text on one line: SQLite quotes multi-line schema SQL in some of its messages."""
    return " ".join(str(exc).split())


@dataclass
class DiskState:
    """The gallery as its database records it: generation, index options, the active and
    sealed shards' files, the template and the segments ``(seq, file, count)``."""

    generation: int
    spec: IndexSpec
    active: ShardRecord
    sealed: list[ShardRecord]
    template: FileRecord | None
    segments: list[tuple[int, FileRecord, int]]

    def names(self) -> set[str]:
        """Every file name the database names."""
        named = {name for record in [*self.sealed, self.active] for name in record.names()}
        named |= {record.name for _, record, _ in self.segments}
        return named | ({self.template.name} if self.template else set())

    def records(self) -> list[FileRecord]:
        """Every file the database names, with the size and checksum it recorded."""
        shards = [*self.sealed, self.active]
        found = [r.index for r in shards] + [r.vectors for r in shards if r.vectors is not None]
        found += [record for _, record, _ in self.segments]
        return found + ([self.template] if self.template is not None else [])


# ----------------------------------------------------------------- migrations


@dataclass(frozen=True)
class Migration:
    """One named step that brings a catalogue of format ``to_format - 1`` to ``to_format``."""

    to_format: int
    name: str
    apply: Callable[[Catalogue], None]


def _add_shards_table(catalogue: Catalogue) -> None:
    catalogue.db.execute(SHARDS_TABLE)


def _add_checksums(catalogue: Catalogue) -> None:
    if "row_sha256" not in {row[1] for row in catalogue.query("PRAGMA table_info(items)")}:
        catalogue.db.execute("ALTER TABLE items ADD COLUMN row_sha256 TEXT")
        last = 0
        while rows := catalogue.query(
            f"SELECT {ITEM_COLUMNS} FROM items WHERE id > ? ORDER BY id LIMIT ?", [last, ROWS_CHUNK]
        ):
            catalogue.db.executemany(
                "UPDATE items SET row_sha256 = ? WHERE id = ?", ((row_hash(row[0], row[1:]), row[0]) for row in rows)
            )
            last = rows[-1][0]
    catalogue.set_meta({"facts_sha256": facts_hash(catalogue.read_meta())})


MIGRATIONS = (
    Migration(2, "sealed shards, vector files and templates", _add_shards_table),
    Migration(3, "checksums of item rows and of the gallery's fixed facts", _add_checksums),
)


# ----------------------------------------------------------------- the schema

# What a gallery's database may hold: its tables (sqlite_sequence comes with AUTOINCREMENT),
# its two indexes as created, and SQLite's own indexes of primary keys and unique columns.
OWN_TABLES = frozenset({"meta", "items", "segments", "shards", "sqlite_sequence"})
OWN_INDEXES = {
    statement.split()[2]: " ".join(statement.split()) for statement in SCHEMA if statement.startswith("CREATE INDEX")
}


def foreign_schema(rows: Sequence[tuple[Any, ...]]) -> str | None:
    """The first schema object among ``sqlite_master`` rows ``(type, name, tbl_name, sql)``
    that no gallery creates (a trigger, a view, another table or index), in words; None
    when every object is the gallery's own."""
    for kind, name, table, sql in rows:
        if kind == "table" and name in OWN_TABLES:
            continue
        if kind == "index" and table in OWN_TABLES:
            if sql is None and str(name).startswith("sqlite_autoindex_"):
                continue
            if name in OWN_INDEXES and " ".join(str(sql).split()) == OWN_INDEXES[name]:
                continue
        return f"the {kind} {str(name)!r}"
    return None


# ----------------------------------------------------------------- the catalogue


def new_uid() -> str:
    """A new gallery's id (:data:`UID_KEY`): 128 random bits, hexadecimal."""
    return secrets.token_hex(16)


def new_facts(card: ModelFacts, spec: IndexSpec, fmt: int = FORMAT) -> dict[str, str]:
    """The fixed facts every backend stores for a new gallery of ``card``'s model and index
    ``spec``, as text: the backend's format ``fmt``, model, dimension, threshold, creation
    time, uid, index."""
    return {
        "format": str(fmt),
        "model_fingerprint": card.fingerprint,
        "model_name": card.name,
        "model_kind": card.kind,
        "dim": str(card.embedding_dim),
        "threshold": "" if card.threshold is None else repr(float(card.threshold)),
        "created": now(),
        UID_KEY: new_uid(),
        "index_spec": json.dumps(spec.to_dict()),
        "generation": "0",
    }


class Catalogue:
    """The SQLite database of one gallery folder (``folder/gallery.db``).

    Raises GalleryError when the database cannot be opened, read or written, naming it;
    a failed write is rolled back, so the gallery is as it was.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / DB_FILE
        self.db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        # SQLite follows links; a database or journal planted as one would be read or
        # written wherever it points.
        for name in (DB_FILE, f"{DB_FILE}-journal"):
            if (self.folder / name).is_symlink():
                raise GalleryError(f"{self.folder / name}: is a link; a gallery's database must be a plain file in it")
        try:
            db = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise GalleryError(f"{self.path}: cannot open the gallery database ({one_line(exc)})") from exc
        try:
            # No function with side effects runs from the schema (a generated column, say).
            db.execute("PRAGMA trusted_schema=OFF")
            db.execute("PRAGMA synchronous=FULL")
            foreign = foreign_schema(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall())
        except sqlite3.Error as exc:
            db.close()
            raise GalleryError(f"{self.path}: cannot open the gallery database ({one_line(exc)})") from exc
        if foreign is not None:
            db.close()
            raise GalleryError(
                f"{self.path}: holds {foreign}, which no gallery creates; it is not opened "
                "(a trigger or view would run inside every write)"
            )
        return db

    def close(self) -> None:
        self.db.close()

    # ----------------------------------------------------------------- reading

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise GalleryError(f"{self.path}: unreadable gallery database ({one_line(exc)})") from exc

    def tables(self) -> set[str]:
        return {r[0] for r in self.query("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def has_meta(self) -> bool:
        """True once a gallery's creation has committed."""
        return "meta" in self.tables() and bool(self.query("SELECT 1 FROM meta LIMIT 1"))

    def has_items(self) -> bool:
        return bool(self.query("SELECT 1 FROM items LIMIT 1"))

    def read_meta(self) -> dict[str, str]:
        return dict(self.query("SELECT key, value FROM meta"))

    def read_state(self) -> tuple[GalleryMeta, DiskState]:
        """The gallery's facts and files as the database records them, every value checked: a
        name that is not a gallery file name, a negative count or a dimension that is not
        positive means the database is corrupt or was tampered with, and nothing is opened."""
        raw = self.read_meta()
        try:
            meta = GalleryMeta(
                model_fingerprint=raw["model_fingerprint"],
                model_name=raw["model_name"],
                model_kind=raw["model_kind"],
                dim=_whole(raw["dim"]),
                threshold=float(raw["threshold"]) if raw["threshold"] else None,
                created=raw["created"],
                format=_whole(raw["format"]),
                uid=raw.get(UID_KEY) or "",
            )
            spec = IndexSpec.from_dict(parse_json_bounded(raw["index_spec"], "index_spec", "index setting"))
            snapshot = FileRecord.from_db(raw["snapshot_name"], raw["snapshot_size"], raw["snapshot_sha256"])
            active = ShardRecord(snapshot, _count(raw["snapshot_count"]), _meta_file(raw, "snapshot_vectors"))
            template = _meta_file(raw, "template")
            generation = _count(raw["generation"])
        except (KeyError, ValueError, TypeError, ConfigError) as exc:
            raise GalleryError(f"{self.path}: gallery metadata is incomplete or malformed ({exc})") from exc
        except GalleryError as exc:
            raise GalleryError(f"{self.path}: {exc}") from None
        if meta.format > FORMAT:
            raise GalleryError(f"{self.path}: gallery format {meta.format} is newer than this reid reads")
        try:
            sealed = []
            if "shards" in self.tables():
                for name, size, sha, count, vname, vsize, vsha in self.query(
                    "SELECT name, size, sha256, count, vectors_name, vectors_size, vectors_sha256 "
                    "FROM shards ORDER BY position"
                ):
                    vectors = FileRecord.from_db(vname, vsize, vsha) if vname else None
                    sealed.append(ShardRecord(FileRecord.from_db(name, size, sha), _count(count), vectors))
            segments = [
                (seq, FileRecord.from_db(name, size, sha), _count(count))
                for seq, name, size, sha, count in self.query(
                    "SELECT seq, name, size, sha256, count FROM segments ORDER BY seq"
                )
            ]
        except (ValueError, TypeError) as exc:
            raise GalleryError(f"{self.path}: gallery corrupt or tampered ({exc})") from None
        except GalleryError as exc:
            raise GalleryError(f"{self.path}: {exc}") from None
        return meta, DiskState(generation, spec, active, sealed, template, segments)

    def label_rows(self, after: int = 0) -> Iterator[list[tuple[int, str]]]:
        """(id, identity) of the items after id ``after``, ascending, a chunk at a time.

        Raises GalleryError when the table cannot be read or an identity is not text.
        """
        try:
            cursor = self.db.execute("SELECT id, identity FROM items WHERE id > ? ORDER BY id", (after,))
            while rows := cursor.fetchmany(ROWS_CHUNK):
                for item_id, identity in rows:
                    if not isinstance(identity, str) or not identity:
                        raise GalleryError(
                            f"{self.path}: item {item_id} has no text identity; the database is damaged "
                            "(see reid gallery info --check)"
                        )
                yield rows
        except sqlite3.DatabaseError as exc:
            raise GalleryError(f"{self.path}: unreadable gallery database ({one_line(exc)})") from exc

    def item_rows(self) -> Iterator[list[tuple[Any, ...]]]:
        """Every item row (:data:`ITEM_COLUMNS`), ascending by id, a chunk at a time, each
        checked (:meth:`item`)."""
        cursor = self.db.execute(f"SELECT {ITEM_COLUMNS} FROM items ORDER BY id")
        while rows := cursor.fetchmany(ROWS_CHUNK):
            for row in rows:
                self.item(row)
            yield rows

    def item(self, row: Sequence[Any]) -> GalleryItem:
        """The item of a row of :data:`ITEM_COLUMNS`; GalleryError naming the database and
        the item when a value is not of its column's type (what :data:`BAD_ROW` finds)."""
        try:
            return item_from_row(row)
        except ValueError:
            raise GalleryError(
                f"{self.path}: item {str(row[0])[:20]} has a value of the wrong type or an empty identity; "
                "the database is damaged (see reid gallery info --check)"
            ) from None

    def select(self, sql: str) -> list[tuple[Any, ...]]:
        """SQL expressions over every item, ascending by id."""
        return self.db.execute(f"SELECT {sql} FROM items ORDER BY id").fetchall()

    def identities(self) -> list[IdentitySummary]:
        rows = self.query(
            "SELECT identity, COUNT(*), MIN(enrolled), MAX(enrolled), SUM(typeof(enrolled) != 'text') FROM items "
            "GROUP BY identity ORDER BY identity"
        )
        for identity, _count, _first, _last, odd in rows:
            if not isinstance(identity, str) or not identity or odd:
                raise GalleryError(
                    f"{self.path}: an item's identity or enrol time is not text; the database is damaged "
                    "(see reid gallery info --check)"
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
        return [self.item(row) for row in self.query(sql, args)]

    def get_items(self, ids: Sequence[int]) -> dict[int, GalleryItem]:
        found: dict[int, GalleryItem] = {}
        ids = [int(i) for i in ids]
        for start in range(0, len(ids), SQL_CHUNK):
            chunk = ids[start : start + SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            for row in self.query(f"SELECT {ITEM_COLUMNS} FROM items WHERE id IN ({marks})", chunk):
                found[row[0]] = self.item(row)
        return found

    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` are already stored."""
        known: set[str] = set()
        hashes = list(dict.fromkeys(h for h in hashes if h))
        for start in range(0, len(hashes), SQL_CHUNK):
            chunk = hashes[start : start + SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self.query(f"SELECT DISTINCT image_hash FROM items WHERE image_hash IN ({marks})", chunk)
            known.update(r[0] for r in rows)
        return known

    def identity_ids(self, identity: str) -> list[int]:
        """Ids of ``identity``'s items, ascending; GalleryError when the table and its
        identity index disagree on them (a damaged database)."""
        scanned = self.query("SELECT id FROM items NOT INDEXED WHERE identity = ? ORDER BY id", [identity])
        indexed = self.query("SELECT id FROM items INDEXED BY items_identity WHERE identity = ? ORDER BY id", [identity])
        if scanned != indexed:
            raise GalleryError(
                f"{self.path}: the database is damaged: the items table holds {len(scanned)} items of "
                f"{identity!r}, its identity index {len(indexed)}; nothing changed (see reid gallery info --check)"
            )
        return [row[0] for row in scanned]

    def problems(self, fmt: int) -> list[str]:
        """What SQLite's integrity check, the item rows' types and checksums and the facts'
        checksum say is wrong; checksums only from format 3 (``fmt``), which has them."""
        try:
            verdicts = [row[0] for row in self.db.execute(f"PRAGMA integrity_check({MAX_PROBLEMS})")]
            if verdicts != ["ok"]:
                return [" ".join(str(v).split()) for v in verdicts]
            bad = self.db.execute(f"SELECT id FROM items NOT INDEXED WHERE {BAD_ROW} ORDER BY id").fetchall()
            problems = [f"item {row[0]} has a value of the wrong type or an empty identity" for row in bad]
            raw = self.read_meta()
            if fmt >= FORMAT and raw.get("facts_sha256") != facts_hash(raw):
                problems.append("the gallery's model, dimension, threshold or index options do not match their checksum")
            if (CALIBRATION_KEY in raw or CALIBRATION_SUM in raw) and raw.get(CALIBRATION_SUM) != text_hash(
                raw.get(CALIBRATION_KEY, "")
            ):
                problems.append("the gallery's stored calibration does not match its checksum")
            # A gallery of an older format has no checksums until its first write adds them.
            if fmt >= FORMAT:
                cursor = self.db.execute(f"SELECT {ITEM_COLUMNS}, row_sha256 FROM items NOT INDEXED ORDER BY id")
                while len(problems) < MAX_PROBLEMS and (rows := cursor.fetchmany(ROWS_CHUNK)):
                    problems += [
                        f"item {row[0]} does not match its checksum (changed since it was written)"
                        for row in rows
                        if row[-1] != row_hash(row[0], row[1:-1])
                    ]
        except sqlite3.DatabaseError as exc:
            return [f"unreadable ({one_line(exc)})"]
        return problems

    # ----------------------------------------------------------------- writing (in a transaction)

    @contextmanager
    def atomic(self, written: Sequence[Path] = ()) -> Iterator[Catalogue]:
        """One transaction around the block: committed when it ends; when it raises, rolled
        back, the files ``written`` for it deleted (no commit names them), and a database
        that cannot be written (read-only, disk full) raised as one GalleryError."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
            yield self
            self.db.execute("COMMIT")
        except BaseException as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            for path in written:
                path.unlink(missing_ok=True)
            if isinstance(exc, sqlite3.Error):
                raise GalleryError(f"{self.path}: cannot write ({one_line(exc)}); the gallery is unchanged") from exc
            raise

    def initialize(self, card: ModelFacts, spec: IndexSpec, active: ShardRecord) -> None:
        """Create the tables and the facts of a new gallery of ``card``'s model (in :meth:`atomic`)."""
        meta = {**new_facts(card, spec), **layout_meta(active, None)}
        meta["facts_sha256"] = facts_hash(meta)
        for statement in SCHEMA:
            self.db.execute(statement)
        self.db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())

    def upgrade(self, fmt: int) -> None:
        """Apply the :data:`MIGRATIONS` after format ``fmt`` and record the new format (in :meth:`atomic`)."""
        for step in MIGRATIONS:
            if step.to_format > fmt:
                step.apply(self)
        self.set_meta({"format": str(FORMAT)})

    def read_calibration(self) -> str | None:
        """The stored calibration's JSON text, or None when none is stored."""
        rows = self.query("SELECT value FROM meta WHERE key = ?", [CALIBRATION_KEY])
        return str(rows[0][0]) if rows else None

    def set_calibration(self, text: str) -> None:
        """Store a calibration's JSON text with its checksum (in :meth:`atomic`)."""
        self.set_meta({CALIBRATION_KEY: text, CALIBRATION_SUM: text_hash(text)})

    def set_meta(self, values: dict[str, str]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", values.items())

    def sequence(self) -> int:
        """The last item id handed out (0 for none)."""
        row = self.db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'items'").fetchone()
        if row is None:
            return 0
        try:
            return _count(row[0])
        except ValueError:
            raise GalleryError(f"{self.path}: the last item id is {str(row[0])[:40]!r}, not a count; refusing to write") from None

    def insert_items(self, rows: Sequence[tuple[Any, ...]]) -> list[int]:
        """Insert item rows (:func:`item_row`) with their checksums; their ids, ascending.

        Raises GalleryError unless AUTOINCREMENT handed out consecutive ids, which the
        checksums (over the id) and the segment file (ids by position) rely on.
        """
        before = self.sequence()
        self.db.executemany(INSERT_ITEM, [(*row, row_hash(before + 1 + n, row)) for n, row in enumerate(rows)])
        after = self.sequence()
        if after - before != len(rows):
            raise GalleryError(f"{self.path}: item ids are not consecutive; refusing to write")
        return list(range(before + 1, after + 1))

    def insert_segment(self, record: FileRecord, count: int) -> int:
        """Name a new segment file; its sequence number."""
        cursor = self.db.execute(
            "INSERT INTO segments (name, size, sha256, count) VALUES (?, ?, ?, ?)",
            (record.name, record.size, record.sha256, count),
        )
        return int(cursor.lastrowid or 0)

    def delete_items(self, ids: Sequence[int]) -> None:
        self.db.executemany("DELETE FROM items WHERE id = ?", ((int(i),) for i in ids))

    def rename_identity(self, identity: str, new_name: str) -> None:
        """Relabel ``identity``'s rows as ``new_name``, each with its checksum recomputed."""
        rows = self.db.execute(f"SELECT {ITEM_COLUMNS} FROM items WHERE identity = ?", (identity,)).fetchall()
        self.db.executemany(
            "UPDATE items SET identity = ?, row_sha256 = ? WHERE id = ?",
            [(new_name, row_hash(row[0], (new_name, *row[2:])), row[0]) for row in rows],
        )

    def replace_shards(self, sealed: Sequence[ShardRecord]) -> None:
        """Name ``sealed`` as the sealed shards, in order, and drop every segment."""
        self.db.execute("DELETE FROM shards")
        self.db.executemany(
            INSERT_SHARD,
            [
                (
                    position,
                    r.index.name,
                    r.index.size,
                    r.index.sha256,
                    r.count,
                    *((r.vectors.name, r.vectors.size, r.vectors.sha256) if r.vectors else (None, None, None)),
                )
                for position, r in enumerate(sealed)
            ],
        )
        self.db.execute("DELETE FROM segments")


# ----------------------------------------------------------------- rows and checksums


def item_row(item: ItemMeta, enrolled: str) -> tuple[Any, ...]:
    """The stored columns of ``item`` (enrolled at ``enrolled`` unless it says when), typed as SQLite gives them back (so that the row's
    checksum over what was written equals the one over what is read)."""
    box = item.box if item.box is not None else (None, None, None, None)
    # A file or folder name that is not UTF-8 is stored with its bytes escaped.
    return (
        storable_text(str(item.identity)),
        storable_text(str(item.source)),
        None if item.camera is None else storable_text(str(item.camera)),
        None if item.frame is None else int(item.frame),
        None if item.time is None else float(item.time),
        *(None if v is None else int(v) for v in box),
        enrolled if item.enrolled is None else str(item.enrolled),
        None if item.image_hash is None else str(item.image_hash),
    )


def row_hash(item_id: int, row: Sequence[Any]) -> str:
    """Checksum of an item row: its id and the columns of :func:`item_row`, in that order."""
    return hashlib.sha256(json.dumps([int(item_id), *row]).encode()).hexdigest()[:16]


def text_hash(text: str) -> str:
    """Checksum of one stored text value (the calibration)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gallery_uid(folder: Path) -> str | None:
    """The id of the gallery in ``folder`` (made with it; ``created TIME`` for a gallery made
    before ids), read without opening the gallery and without creating anything; None when
    there is no gallery there (or its database cannot be read)."""
    path = Path(folder) / DB_FILE
    if path.is_symlink() or not path.is_file():
        return None
    try:
        db = sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=ro", uri=True, timeout=10.0)
    except sqlite3.Error:
        return None
    try:
        db.execute("PRAGMA trusted_schema=OFF")
        raw = dict(db.execute("SELECT key, value FROM meta WHERE key IN (?, 'created')", [UID_KEY]).fetchall())
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return uid_of(raw)


def uid_of(meta: dict[str, str]) -> str | None:
    """The gallery id recorded in ``meta`` (see :data:`UID_KEY`)."""
    if meta.get(UID_KEY):
        return str(meta[UID_KEY])
    return f"created {meta['created']}" if meta.get("created") else None


def meta_uid(meta: GalleryMeta) -> str:
    """The gallery id of facts read back (:func:`uid_of`)."""
    return uid_of({UID_KEY: meta.uid, "created": meta.created}) or ""


def facts_hash(meta: dict[str, str]) -> str:
    """Checksum of the gallery's fixed facts (:data:`FACT_KEYS`) in ``meta``."""
    return hashlib.sha256(json.dumps([meta.get(key, "") for key in FACT_KEYS]).encode()).hexdigest()[:16]


def item_from_row(row: Sequence[Any]) -> GalleryItem:
    """A :class:`GalleryItem` from a row of :data:`ITEM_COLUMNS`; ValueError when a value is
    not of its column's type (:data:`BAD_ROW`)."""
    kinds = (int, str, str, (str, type(None)), (int, type(None)), (int, float, type(None)),
             *[(int, type(None))] * 4, str, (str, type(None)))  # fmt: skip
    if any(isinstance(v, bool) or not isinstance(v, kind) for v, kind in zip(row, kinds)) or not row[1]:
        raise ValueError(f"item {str(row[0])[:20]}: a value of the wrong type or an empty identity")
    if len({v is None for v in row[6:10]}) > 1:
        raise ValueError(f"item {row[0]}: a box with a missing side")
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


def layout_meta(active: ShardRecord, template: FileRecord | None) -> dict[str, str]:
    """The meta values naming the active shard's files and the template."""
    return {
        "snapshot_name": active.index.name,
        "snapshot_size": str(active.index.size),
        "snapshot_sha256": active.index.sha256,
        "snapshot_count": str(active.count),
        **_file_meta("snapshot_vectors", active.vectors),
        **_file_meta("template", template),
    }


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


def _whole(value: Any) -> int:
    """A whole number read from the database, else ValueError."""
    number = whole_number(str(value))
    if number is None:
        raise ValueError(f"{str(value)[:40]!r} is not a whole number")
    return number


def _count(value: Any) -> int:
    """A count read from the database: a non-negative whole number, else ValueError."""
    count = None if isinstance(value, bool) or not isinstance(value, (int, str)) else whole_number(str(value), 0)
    if count is None:
        raise ValueError(f"{str(value)[:40]!r} is not a count")
    return count
