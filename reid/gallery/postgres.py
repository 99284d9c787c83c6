"""The PostgreSQL + pgvector gallery: items, facts, thumbnails and embeddings in one database.

``postgresql://[USER@]HOST[:PORT]/DB?gallery=NAME`` (also a Unix socket:
``postgresql:///DB?host=/run/postgresql&gallery=NAME``; any other libpq parameter, such as
``sslmode=require``, passes through).  The password comes from the environment
(``PGPASSWORD``) or a pgpass file as libpq finds them, never from the location, which
commands and logs show.

Each gallery is a schema ``reid_NAME`` of three tables: ``meta`` (the model, dimension,
threshold, index options, calibration, a generation counter), ``items`` (one row per item
with its ``vector(dim)`` embedding and a checksum of its columns) and ``thumbs`` (JPEG
bytes).  A write is one transaction that first takes a transaction-level advisory lock on
the gallery (``pg_advisory_xact_lock``), so writers of one gallery, from any process on
any host, run one after another and each sees what the one before committed; readers never
wait.  An enrolment's rows, embeddings and thumbnails commit together or not at all: a
process killed in its middle leaves the gallery as it was (PostgreSQL rolls back what no
commit finished).

Search: distances are Euclidean between unit embeddings, 0..2, from pgvector's inner
product (``<#>``, negated) as the FAISS gallery takes them from FAISS's
(:func:`reid.decision.similarity_to_distance`); for unit rows the order is that of
``<->``, whose distance equals it.  ``--index flat`` scans exactly; ``hnsw`` is pgvector's
HNSW index (``hnsw_m``, ``ef_construction``, ``ef_search``), built with the gallery;
``ivf`` its IVFFlat index (``nlist`` lists, ``nprobe`` probes), built once the gallery holds
``train_min`` items (exact until then) and rebuilt when it has grown to want twice the
lists, as the FAISS gallery retrains.  Approximate searches use pgvector's iterative scans,
so a filter or a large k still gets k rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from reid.errors import ConfigError, GalleryBusyError, GalleryError
from reid.names import identity_name
from reid.gallery import thumbnails as thumbs
from reid.gallery.base import GalleryBackend, named
from reid.gallery.catalogue import (
    UID_KEY,
    facts_hash,
    item_from_row,
    item_row,
    new_facts,
    now,
    one_line,
    row_hash,
    text_hash,
    uid_of,
)
from reid.gallery.check import scan_duplicates
from reid.gallery.export import export_suffix, write_jsonl, write_npz
from reid.gallery.files import write_file_atomic
from reid.gallery.index import IndexSpec, auto_nlist, auto_nprobe
from reid.gallery.records import (
    AddResult,
    CheckReport,
    GalleryInfo,
    GalleryItem,
    GalleryMeta,
    IdentitySummary,
    ItemMeta,
    ModelFacts,
)
from reid.gallery.search import IdentityLabels
from reid.gallery.shards import CHUNK
from reid.paths import check_output_file

FORMAT = 1
KINDS = ("flat", "hnsw", "ivf")
SCHEMA_PREFIX = "reid_"
NAME = re.compile(r"[a-z0-9_]{1,40}")
ITEM_COLUMNS = "id, identity, source, camera, frame, time, box_x, box_y, box_w, box_h, enrolled, image_hash"
# Binary COPY types of ITEM_COLUMNS, the row checksum and the embedding.
COPY_TYPES = ["int8", "text", "text", "text", "int8", "float8", "int8", "int8", "int8", "int8", "text", "text", "text", "vector"]
# The least maintenance_work_mem an index build runs with (the server's, when larger).
BUILD_MEMORY = "1GB"
# Both halves of the advisory lock key: this namespace and the gallery's schema.
LOCK_SPACE = "reid.gallery"
# pgvector's largest hnsw.ef_search; HNSW returns at most that many rows a scan before its
# iterative scan goes on.
MAX_EF_SEARCH = 1000
TABLES = (
    "CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE {s}.items (
        id bigint PRIMARY KEY,
        identity text NOT NULL CHECK (identity <> ''),
        source text NOT NULL DEFAULT '',
        camera text, frame bigint, time double precision,
        box_x bigint, box_y bigint, box_w bigint, box_h bigint,
        enrolled text NOT NULL, image_hash text, row_sha256 text NOT NULL,
        embedding vector({dim}) NOT NULL
    )""",
    "CREATE INDEX ON {s}.items (identity)",
    "CREATE INDEX ON {s}.items (image_hash)",
    "CREATE SEQUENCE {s}.item_ids OWNED BY {s}.items.id",
    "CREATE TABLE {s}.thumbs (item_id bigint PRIMARY KEY REFERENCES {s}.items (id) ON DELETE CASCADE, jpeg bytea NOT NULL)",
)


# ----------------------------------------------------------------- the location


def parse_location(location: str) -> tuple[str, str]:
    """(libpq connection URI, gallery name) of ``postgresql://HOST/DB?gallery=NAME``.

    Raises ConfigError in one line for a password in the location, a missing or
    malformed gallery name.
    """
    parts = urlsplit(location)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if parts.password or any(key == "password" for key, _ in query):
        raise ConfigError(
            f"{redacted(location)}: a password in the gallery's location would show in commands and logs; "
            "give it in PGPASSWORD or a pgpass file"
        )
    names = [value for key, value in query if key == "gallery"]
    if len(names) != 1:
        raise ConfigError(f"{location}: name the gallery in the database: postgresql://HOST/DB?gallery=NAME")
    name = names[0]
    if not NAME.fullmatch(name):
        raise ConfigError(f"{location}: gallery name {name[:40]!r}: use 1 to 40 lower-case letters, digits or _")
    netloc = parts.netloc.rsplit("@", 1)
    if len(netloc) == 2:
        netloc[0] = netloc[0].split(":", 1)[0]  # an empty password ("user:@host") is none
    rest = urlencode([(k, v) for k, v in query if k != "gallery"])
    return urlunsplit(("postgresql", "@".join(netloc), parts.path, rest, "")), name


def redacted(location: str) -> str:
    """``location`` with any password replaced by ``***``."""
    parts = urlsplit(location)
    netloc = parts.netloc
    if parts.password:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}:***@{host}"
    query = "&".join(
        f"{k}=***" if k == "password" else f"{k}={v}" for k, v in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def connect(conninfo: str, location: str) -> psycopg.Connection[Any]:
    """An autocommit connection; GalleryError in one line when the server cannot be reached."""
    try:
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=30)
    except psycopg.Error as exc:
        raise GalleryBusyError(f"{location}: cannot connect to the database ({one_line(exc)})") from None


# ----------------------------------------------------------------- the loaded view


class PgView:
    """The committed state a :class:`PgGallery` last loaded (:class:`reid.gallery.search.GalleryView`):
    the items' labels in memory; embeddings and search in the database, restricted to the
    loaded items (ids up to the last loaded), so an item another process added since is
    found once :meth:`PgGallery.refresh` loads it."""

    def __init__(self, gallery: PgGallery, labels: IdentityLabels, generation: int, spec: IndexSpec, built: str, lists: int) -> None:
        self._gallery, self.labels, self.generation = gallery, labels, generation
        self.spec, self.built, self.lists = spec, built, lists
        self.dim = gallery.meta.dim

    def __len__(self) -> int:
        return len(self.labels.ids)

    @property
    def kind(self) -> str:
        return self.built

    def nearest(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Similarities (Q, k) float64 (inner products) and item ids (Q, k) int64 (-1 pads)."""
        sims = np.full((len(queries), k), -np.inf)
        ids = np.full((len(queries), k), -1, np.int64)
        if len(self) == 0 or len(queries) == 0:
            return sims, ids
        # Exact order is fixed by the item id at equal distances; an index scan takes the distance alone.
        order = "embedding <#> q.v" + (", id" if self.built == "flat" else "")
        statement = sql.SQL(
            "SELECT q.n, x.id, x.sim FROM unnest(%s::vector[]) WITH ORDINALITY AS q(v, n) CROSS JOIN LATERAL "
            "(SELECT id, -(embedding <#> q.v) AS sim FROM {items} WHERE id <= %s ORDER BY " + order + " LIMIT %s) x ORDER BY q.n, x.sim DESC, x.id"
        ).format(items=self._gallery.table("items"))
        last = int(self.labels.ids[-1])
        gallery = self._gallery
        gallery.search_settings(k)
        rows = gallery.rows(statement, [list(np.asarray(queries, np.float32)), last, k])
        seen = np.zeros(len(queries), np.int64)
        for n, item_id, sim in rows:
            row = n - 1
            sims[row, seen[row]], ids[row, seen[row]] = sim, item_id
            seen[row] += 1
        return sims, ids

    def originals(self, ids: np.ndarray) -> np.ndarray:
        """Stored embeddings (N, D) float32 of item ``ids``; GalleryError for one not stored."""
        ids = np.asarray(ids, dtype=np.int64)
        unique = np.unique(ids)
        found: dict[int, np.ndarray] = {}
        for start in range(0, len(unique), CHUNK):
            chunk = unique[start : start + CHUNK].tolist()
            statement = sql.SQL("SELECT id, embedding FROM {items} WHERE id = ANY(%s)").format(items=self._gallery.table("items"))
            found.update((int(i), v.to_numpy()) for i, v in self._gallery.rows(statement, [chunk]))
        missing = [int(i) for i in unique if int(i) not in found]
        if missing:
            raise GalleryError(f"{self._gallery.location}: no item {missing[0]} in the gallery")
        out = np.empty((len(ids), self.dim), np.float32)
        for n, item_id in enumerate(ids.tolist()):
            out[n] = found[item_id]
        return out

    def chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, embeddings) of every loaded item, ascending, :data:`CHUNK` at a time."""
        last, top = 0, int(self.labels.ids[-1]) if len(self) else 0
        statement = sql.SQL("SELECT id, embedding FROM {items} WHERE id > %s AND id <= %s ORDER BY id LIMIT %s").format(
            items=self._gallery.table("items")
        )
        while rows := self._gallery.rows(statement, [last, top, CHUNK]):
            last = int(rows[-1][0])
            yield np.asarray([r[0] for r in rows], np.int64), np.asarray([r[1].to_numpy() for r in rows], np.float32)


# ----------------------------------------------------------------- the gallery


class PgGallery(GalleryBackend):
    """An open gallery in PostgreSQL.  Open one with :func:`open_gallery`.

    Raises as :class:`~reid.gallery.base.GalleryBackend` says: GalleryError naming the
    location for an unreachable server, a missing or damaged gallery; ConfigError for a bad
    argument.  A failed write leaves the gallery as it was (the transaction rolls back).
    """

    def __init__(self, location: str, conninfo: str, name: str, lock_timeout: float) -> None:
        self.location = location
        self.name = name
        self.schema = SCHEMA_PREFIX + name
        self.catalogue_at = f"{location} (schema {self.schema})"
        self.lock_timeout = lock_timeout
        self._conn = connect(conninfo, location)
        self._view: PgView | None = None
        # The pgvector settings of the session (search_settings); a failed transaction undoes them.
        self._settings: tuple[tuple[str, str], ...] = ()

    # ----------------------------------------------------------------- SQL

    def table(self, name: str) -> sql.Composable:
        return sql.Identifier(self.schema, name)

    def rows(self, statement: sql.Composable | str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one statement; GalleryError in one line when the database refuses it."""
        try:
            return self._conn.execute(statement, args, binary=True).fetchall()
        except psycopg.Error as exc:
            raise GalleryError(f"{self.catalogue_at}: {one_line(exc)}") from None

    def run(self, statement: sql.Composable | str, args: Sequence[Any] = ()) -> None:
        try:
            self._conn.execute(statement, args)
        except psycopg.Error as exc:
            raise GalleryError(f"{self.catalogue_at}: {one_line(exc)}") from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around the block (a savepoint inside another); a database error
        rolls it back and is raised as one GalleryError."""
        try:
            with self._conn.transaction():
                yield
        except psycopg.Error as exc:
            raise GalleryError(f"{self.catalogue_at}: {one_line(exc)}; the gallery is unchanged") from None

    def search_settings(self, k: int) -> None:
        """The connection's pgvector search parameters for ``k`` neighbours, set (for the
        session, in one round trip) only when they change."""
        view = self._view
        if view is None or view.built == "flat":
            return
        if view.built == "hnsw":
            wanted = (("hnsw.ef_search", str(min(MAX_EF_SEARCH, max(view.spec.ef_search, k)))), ("hnsw.iterative_scan", "strict_order"))
        else:
            probes = min(view.spec.nprobe, view.lists) if view.spec.nprobe else auto_nprobe(view.lists)
            wanted = (("ivfflat.probes", str(probes)), ("ivfflat.iterative_scan", "relaxed_order"))
        if self._settings == wanted:
            return
        self.rows("SELECT " + ", ".join(["set_config(%s, %s, false)"] * len(wanted)), [v for pair in wanted for v in pair])
        self._settings = wanted

    def _lock(self) -> None:
        """Take the gallery's writers' lock for this transaction (waiting up to lock_timeout)."""
        self.run(f"SET LOCAL lock_timeout = {max(1, int(self.lock_timeout * 1000))}")
        try:
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", [LOCK_SPACE, self.schema])
        except psycopg.errors.LockNotAvailable:
            raise GalleryBusyError(
                f"{self.location}: another process has been writing for {self.lock_timeout:g} s; try again later"
            ) from None

    # ----------------------------------------------------------------- opening

    def exists(self) -> bool:
        return bool(
            self.rows(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'meta'", [self.schema]
            )
        )

    def read_meta(self) -> dict[str, str]:
        return dict(self.rows(sql.SQL("SELECT key, value FROM {meta}").format(meta=self.table("meta"))))

    def load(self) -> PgView:
        """Read the facts and the labels of the committed state; it is now the view."""
        raw = self.read_meta()
        try:
            self.meta = GalleryMeta(
                model_fingerprint=raw["model_fingerprint"],
                model_name=raw["model_name"],
                model_kind=raw["model_kind"],
                dim=int(raw["dim"]),
                threshold=float(raw["threshold"]) if raw["threshold"] else None,
                created=raw["created"],
                format=int(raw["format"]),
                uid=raw.get(UID_KEY) or "",
            )
            spec = IndexSpec.from_dict(json.loads(raw["index_spec"]))
            generation, built, lists = int(raw["generation"]), raw["index_built"], int(raw["index_lists"])
        except (KeyError, ValueError, TypeError, ConfigError) as exc:
            raise GalleryError(f"{self.catalogue_at}: gallery facts are incomplete or malformed ({exc})") from None
        if self.meta.format > FORMAT:
            raise GalleryError(f"{self.catalogue_at}: gallery format {self.meta.format} is newer than this reid reads")
        labels = IdentityLabels()
        rows = self.rows(sql.SQL("SELECT id, identity FROM {items} ORDER BY id").format(items=self.table("items")))
        labels.extend(rows)
        self._view = PgView(self, labels, generation, spec, built, lists)
        return self._view

    def ensure_extension(self) -> None:
        """Add pgvector to the database unless it is there; GalleryError when this user may not."""
        if self.rows("SELECT 1 FROM pg_extension WHERE extname = 'vector'"):
            return
        try:
            self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise GalleryError(
                f"{self.location}: the database lacks the vector extension and this user cannot add it "
                f"({one_line(exc)}); run CREATE EXTENSION vector in it as its owner"
            ) from None

    def current(self) -> bool:
        """True when the loaded view is the committed state: the same generation of the same
        gallery (one dropped and made again under this name has another uid)."""
        if self._view is None:
            return False
        rows = dict(
            self.rows(
                sql.SQL("SELECT key, value FROM {meta} WHERE key IN ('generation', %s)").format(meta=self.table("meta")),
                [UID_KEY],
            )
        )
        if "generation" not in rows:
            raise GalleryError(f"{self.catalogue_at}: gallery facts are incomplete (no generation)")
        return int(rows["generation"]) == self._view.generation and (rows.get(UID_KEY) or "") == self.meta.uid

    def initialize(self, card: ModelFacts, spec: IndexSpec, thumbnails: bool) -> None:
        """Create the schema, tables, index and facts of a new gallery (under the lock)."""
        if card.embedding_dim < 1:
            raise ConfigError(f"model {card.name!r}: embedding dimension must be positive")
        if not card.fingerprint:
            raise ConfigError(f"model {card.name!r}: no fingerprint; a gallery could not tell its embeddings apart")
        check_spec(spec, self.location)
        schema = sql.Identifier(self.schema)
        self.run(sql.SQL("CREATE SCHEMA IF NOT EXISTS {s}").format(s=schema))
        for statement in TABLES:
            self.run(sql.SQL(statement.replace("{dim}", str(int(card.embedding_dim)))).format(s=schema))
        built = "flat"
        if spec.kind == "hnsw":
            self.build_index(spec, 0)
            built = "hnsw"
        meta = {
            **new_facts(card, spec, FORMAT),
            "index_built": built,
            "index_lists": "0",
            "thumbnails": "1" if thumbnails else "0",
        }
        meta["facts_sha256"] = facts_hash(meta)
        self.set_meta(meta)

    def set_meta(self, values: dict[str, str]) -> None:
        statement = sql.SQL(
            "INSERT INTO {meta} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        ).format(meta=self.table("meta"))
        try:
            with self._conn.cursor() as cursor:
                cursor.executemany(statement, list(values.items()))
        except psycopg.Error as exc:
            raise GalleryError(f"{self.catalogue_at}: {one_line(exc)}") from None

    def build_index(self, spec: IndexSpec, count: int) -> int:
        """Replace the items' vector index by ``spec``'s (none for flat); the IVF lists built (0 for others)."""
        index = sql.Identifier(self.schema, "items_embedding")
        # Building takes memory that grows with the lists and the graph (IVFFlat's 1,000 lists
        # of 512-d need about 100 MB); servers default to 64 MB.  For this transaction only.
        self.run(
            "SELECT set_config('maintenance_work_mem', (greatest(pg_size_bytes(current_setting('maintenance_work_mem')), "
            "pg_size_bytes(%s)) / 1024)::bigint || 'kB', true)",
            [BUILD_MEMORY],
        )
        self.run(sql.SQL("DROP INDEX IF EXISTS {index}").format(index=index))
        name, items = sql.Identifier("items_embedding"), self.table("items")
        if spec.kind == "hnsw":
            self.run(
                sql.SQL("CREATE INDEX {name} ON {items} USING hnsw (embedding vector_ip_ops) WITH (m = {m}, ef_construction = {ef})").format(
                    name=name, items=items, m=sql.Literal(spec.hnsw_m), ef=sql.Literal(spec.ef_construction)
                )
            )
        elif spec.kind == "ivf":
            lists = spec.nlist or auto_nlist(count)
            self.run(
                sql.SQL("CREATE INDEX {name} ON {items} USING ivfflat (embedding vector_ip_ops) WITH (lists = {lists})").format(
                    name=name, items=items, lists=sql.Literal(lists)
                )
            )
            return lists
        return 0

    # ----------------------------------------------------------------- facts

    @property
    def view(self) -> PgView:
        """The committed state last loaded; loaded afresh after a write that failed midway."""
        return self._view if self._view is not None else self.load_snapshot()

    @property
    def spec(self) -> IndexSpec:
        return self.view.spec

    def calibration_text(self) -> str | None:
        rows = self.rows(sql.SQL("SELECT value FROM {meta} WHERE key = 'calibration'").format(meta=self.table("meta")))
        return str(rows[0][0]) if rows else None

    def locked(self) -> AbstractContextManager[None]:
        return self._writing()

    def set_calibration_text(self, text: str) -> None:
        self.set_meta({"calibration": text, "calibration_sha256": text_hash(text), "generation": str(self.view.generation + 1)})
        self.view.generation += 1

    def info(self) -> GalleryInfo:
        size = self.rows(
            "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'S')",
            [self.schema],
        )
        return self.summary(self.view.built, self.view.generation, segments=0, bytes=int(size[0][0]))

    def identities(self) -> list[IdentitySummary]:
        rows = self.rows(
            sql.SQL("SELECT identity, count(*), min(enrolled), max(enrolled) FROM {items} GROUP BY identity ORDER BY identity COLLATE \"C\"").format(
                items=self.table("items")
            )
        )
        return [IdentitySummary(r[0], int(r[1]), r[2], r[3]) for r in rows]

    def items(self, identity: str | None = None, limit: int | None = None) -> list[GalleryItem]:
        where = sql.SQL("WHERE identity = %s" if identity is not None else "")
        statement = sql.SQL("SELECT " + ITEM_COLUMNS + " FROM {items} {where} ORDER BY id LIMIT %s").format(
            items=self.table("items"), where=where
        )
        args = ([identity] if identity is not None else []) + [limit]
        return [self.item(row) for row in self.rows(statement, args)]

    def item(self, row: Sequence[Any]) -> GalleryItem:
        try:
            return item_from_row(row)
        except ValueError:
            raise GalleryError(
                f"{self.catalogue_at}: item {str(row[0])[:20]} has a value of the wrong type; the gallery is damaged "
                "(see reid gallery check)"
            ) from None

    def get_items(self, ids: Sequence[int]) -> dict[int, GalleryItem]:
        statement = sql.SQL("SELECT " + ITEM_COLUMNS + " FROM {items} WHERE id = ANY(%s)").format(items=self.table("items"))
        return {int(row[0]): self.item(row) for row in self.rows(statement, [[int(i) for i in ids]])}

    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        wanted = list(dict.fromkeys(h for h in hashes if h))
        if not wanted:
            return set()
        statement = sql.SQL("SELECT DISTINCT image_hash FROM {items} WHERE image_hash = ANY(%s)").format(items=self.table("items"))
        return {row[0] for row in self.rows(statement, [wanted])}

    @property
    def keeps_thumbnails(self) -> bool:
        return self.read_meta().get("thumbnails") == "1"

    def thumbnail(self, item_id: int) -> bytes | None:
        rows = self.rows(sql.SQL("SELECT jpeg FROM {thumbs} WHERE item_id = %s").format(thumbs=self.table("thumbs")), [int(item_id)])
        return bytes(rows[0][0]) if rows else None

    # ----------------------------------------------------------------- writing

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One transaction holding the writers' lock, with the view caught up with the
        committed state; when the block fails past checking its arguments, the view is
        loaded afresh (it may hold what no commit made)."""
        with self.transaction():
            self._lock()
            if not self.current():
                self.load()
            try:
                yield
            except ConfigError:
                raise
            except BaseException:
                self._view, self._settings = None, ()
                raise

    def bump(self) -> int:
        """Count this write in the generation (inside :meth:`_writing`); the new generation."""
        generation = self.view.generation + 1
        self.set_meta({"generation": str(generation)})
        self.view.generation = generation
        return generation

    def insert(
        self, vectors: np.ndarray, items: Sequence[ItemMeta], crops: Sequence[np.ndarray] | None, skip: bool, same_image: str
    ) -> AddResult:
        items = named(items, identity_name)
        with self._writing():
            self.check_case({item.identity for item in items})
            keep, result = self.screen(items, vectors, skip, same_image)
            if not keep:
                return result
            # Writers are serialised, so the ids handed out are ascending above every id held.
            ids = [
                int(r[0])
                for r in self.rows(
                    "SELECT nextval(%s::regclass) FROM generate_series(1, %s) ORDER BY 1", [f"{self.schema}.item_ids", len(keep)]
                )
            ]
            enrolled = now()
            columns = ITEM_COLUMNS + ", row_sha256, embedding"
            copy = sql.SQL("COPY {items} (" + columns + ") FROM STDIN WITH (FORMAT BINARY)").format(items=self.table("items"))
            try:
                with self._conn.cursor() as cursor, cursor.copy(copy) as writer:
                    writer.set_types(COPY_TYPES)
                    for item_id, position in zip(ids, keep, strict=True):
                        row = item_row(items[position], enrolled)
                        writer.write_row([item_id, *row, row_hash(item_id, row), vectors[position]])
                if crops is not None and self.keeps_thumbnails:
                    statement = sql.SQL("INSERT INTO {thumbs} (item_id, jpeg) VALUES (%s, %s)").format(thumbs=self.table("thumbs"))
                    with self._conn.cursor() as cursor:
                        cursor.executemany(statement, [(i, thumbs.encode(crops[p])) for i, p in zip(ids, keep, strict=True)])
            except psycopg.Error as exc:
                raise GalleryError(f"{self.catalogue_at}: {one_line(exc)}") from None
            self.view.labels.extend([(i, items[p].identity) for i, p in zip(ids, keep, strict=True)])
            self.maintain()
            self.bump()
        return replace(result, ids=ids)

    def maintain(self) -> None:
        """Build the IVFFlat index once the gallery holds enough items to train it, and
        rebuild it when the gallery has grown to want twice the lists (inside :meth:`_writing`)."""
        view = self.view
        spec, count = view.spec, len(view)
        if spec.kind != "ivf" or count < spec.training_items:
            return
        # Lists given by nlist stay; automatic ones are re-chosen when the gallery wants twice as many.
        if view.built == "ivf" and (spec.nlist or (auto_nlist(count) < 2 * view.lists)):
            return
        view.lists = self.build_index(spec, count)
        view.built = "ivf"
        self.set_meta({"index_built": "ivf", "index_lists": str(view.lists)})

    def _ids_of(self, identity: str) -> list[int]:
        statement = sql.SQL("SELECT id FROM {items} WHERE identity = %s ORDER BY id").format(items=self.table("items"))
        return [int(r[0]) for r in self.rows(statement, [identity])]

    def _delete(self, ids: list[int]) -> None:
        self.run(sql.SQL("DELETE FROM {items} WHERE id = ANY(%s)").format(items=self.table("items")), [ids])

    def remove_identity(self, identity: str) -> int:
        with self._writing():
            ids = self._ids_of(identity)
            if not ids:
                raise GalleryError(f"{self.location}: no identity {identity!r} in the gallery")
            self._delete(ids)
            self.view.labels.drop(identity)
            self.bump()
        return len(ids)

    def remove_item(self, item_id: int) -> GalleryItem:
        with self._writing():
            item = self.get_items([int(item_id)]).get(int(item_id))
            if item is None:
                raise GalleryError(f"{self.location}: no item {item_id} in the gallery")
            self._delete([item.id])
            self.view.labels.drop_ids(np.asarray([item.id], np.int64))
            self.bump()
        return item

    def rename_identity(self, identity: str, new_name: str) -> int:
        """Relabel ``identity``'s items ``new_name`` (their checksums recomputed) in one
        transaction; GalleryError when it has none, ConfigError when ``new_name`` is taken."""
        new_name = identity_name(new_name, "the new identity name")
        with self._writing():
            ids = self._ids_of(identity)
            if not ids:
                raise GalleryError(f"{self.location}: no identity {identity!r} in the gallery")
            if new_name != identity and self._ids_of(new_name):
                raise ConfigError(f"{self.location}: identity {new_name!r} already exists; choose another name")
            self.check_case({new_name}, leaving=identity)
            statement = sql.SQL("SELECT " + ITEM_COLUMNS + " FROM {items} WHERE identity = %s").format(items=self.table("items"))
            rows = self.rows(statement, [identity])
            update = sql.SQL("UPDATE {items} SET identity = %s, row_sha256 = %s WHERE id = %s").format(items=self.table("items"))
            try:
                with self._conn.cursor() as cursor:
                    cursor.executemany(update, [(new_name, row_hash(r[0], (new_name, *r[2:])), r[0]) for r in rows])
            except psycopg.Error as exc:
                raise GalleryError(f"{self.catalogue_at}: {one_line(exc)}") from None
            self.view.labels.rename(identity, new_name)
            self.bump()
        return len(ids)

    def reindex(self, spec: IndexSpec) -> None:
        """Rebuild the vector index as ``spec`` says, keeping every item (one transaction)."""
        check_spec(spec, self.location)
        with self._writing():
            view = self.view
            built, lists = "flat", 0
            if spec.kind == "hnsw" or (spec.kind == "ivf" and len(view) >= spec.training_items):
                lists = self.build_index(spec, len(view))
                built = spec.kind
            else:
                self.build_index(IndexSpec(), 0)
            meta = {**self.read_meta(), "index_spec": json.dumps(spec.to_dict())}
            self.set_meta({"index_spec": meta["index_spec"], "index_built": built, "index_lists": str(lists), "facts_sha256": facts_hash(meta)})
            view.spec, view.built, view.lists = spec, built, lists
            self.bump()

    def refresh(self) -> bool:
        """Load what other processes committed (a gallery made again under this name, too);
        GalleryError when the gallery is no longer there."""
        if self.current():
            return False
        self.load_snapshot()
        return True

    def load_snapshot(self) -> PgView:
        """:meth:`load` from one snapshot of the database (its facts and items read together;
        inside a transaction, from that transaction's)."""
        if self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            return self.load()
        with self.transaction():
            self.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return self.load()

    def remove_if_empty(self) -> bool:
        with self.transaction():
            self._lock()
            if self.rows(sql.SQL("SELECT 1 FROM {items} LIMIT 1").format(items=self.table("items"))):
                return False
            self.run(sql.SQL("DROP SCHEMA {s} CASCADE").format(s=sql.Identifier(self.schema)))
        self.close()
        return True

    def close(self) -> None:
        self._conn.close()

    # ----------------------------------------------------------------- checking, export

    def check(self, queries: int = 1000, k: int = 10, seed: int = 0) -> CheckReport:
        """Verify the gallery in the database, then measure the index's recall.

        Verified: the fixed facts against their checksum, the stored calibration against
        its own, every item row against its checksum, every embedding's dimension, and the
        items' count and ids against a fresh load.  Raises GalleryError with the first
        problem and how many more there are.  Then the duplicate scan as the FAISS gallery's.
        """
        problems: list[str] = []
        raw = self.read_meta()
        if raw.get("facts_sha256") != facts_hash(raw):
            problems.append("the gallery's model, dimension, threshold or index options do not match their checksum")
        if ("calibration" in raw or "calibration_sha256" in raw) and raw.get("calibration_sha256") != text_hash(raw.get("calibration", "")):
            problems.append("the gallery's stored calibration does not match its checksum")
        view = self.load_snapshot()
        statement = sql.SQL(
            "SELECT " + ITEM_COLUMNS + ", row_sha256, vector_dims(embedding) FROM {items} WHERE id > %s ORDER BY id LIMIT %s"
        ).format(items=self.table("items"))
        last, count = 0, 0
        while rows := self.rows(statement, [last, CHUNK]):
            for row in rows:
                if row[-2] != row_hash(row[0], row[1:-2]):
                    problems.append(f"item {row[0]} does not match its checksum (changed since it was written)")
                if row[-1] != self.meta.dim:
                    problems.append(f"item {row[0]} has a {row[-1]}-d embedding, the gallery {self.meta.dim}-d")
            count += len(rows)
            last = int(rows[-1][0])
        if count != len(view):
            problems.append(f"{count} items read, {len(view)} loaded")
        if problems:
            more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
            raise GalleryError(f"{self.catalogue_at}: gallery check failed: {problems[0]}{more}")
        scanned, other_identity, near = scan_duplicates(view, seed=seed)
        return CheckReport(
            database="ok",
            items=len(view),
            recall=self.recall(queries, k, seed),
            identities=self.identity_count,
            checksums=True,
            scanned=scanned,
            same_image_other_identity=other_identity,
            near_duplicates=near,
        )

    def export(self, path: str | Path) -> int:
        """Write the items to ``path``: ``.npz`` with embeddings, or ``.jsonl`` metadata only
        (:mod:`reid.gallery.export`), from one snapshot of the database; how many."""
        path = Path(path)
        suffix = export_suffix(path)
        check_output_file(path, "the export")
        with self.transaction():
            self.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            view = self.load()
            if suffix == ".jsonl":
                write_file_atomic(path, lambda handle: write_jsonl(handle, self))
            else:
                info = self.info()
                write_file_atomic(path, lambda handle: write_npz(handle, self, view.labels.ids, view.dim, view.originals, info))
        return len(view)

    # What reid.gallery.export reads: item rows and SQL expressions over the items, by id.
    def item_rows(self) -> Iterator[list[tuple[Any, ...]]]:
        statement = sql.SQL("SELECT " + ITEM_COLUMNS + " FROM {items} WHERE id > %s ORDER BY id LIMIT %s").format(
            items=self.table("items")
        )
        last = 0
        while rows := self.rows(statement, [last, CHUNK]):
            last = int(rows[-1][0])
            yield rows

    def select(self, expressions: str) -> list[tuple[Any, ...]]:
        return self.rows(sql.SQL("SELECT " + expressions + " FROM {items} ORDER BY id").format(items=self.table("items")))


def check_spec(spec: IndexSpec, location: str) -> None:
    """ConfigError in one line for an index pgvector does not offer."""
    if spec.kind not in KINDS:
        raise ConfigError(
            f"{location}: PostgreSQL galleries have no {spec.kind} index; choose one of {', '.join(KINDS)} "
            "(pgvector's exact scan, HNSW or IVFFlat)"
        )
    if spec.shard_size:
        raise ConfigError(f"{location}: PostgreSQL galleries are not sharded; leave out --shard-size")


# ----------------------------------------------------------------- the opener's two functions


def open_gallery(
    location: str,
    card: ModelFacts | None = None,
    spec: IndexSpec | None = None,
    *,
    create: bool = False,
    lock_timeout: float = 120.0,
    thumbnails: bool = True,
) -> PgGallery:
    """The gallery at ``location`` (``postgresql://HOST/DB?gallery=NAME``), as
    :func:`reid.gallery.opener.open_gallery` says: with ``card``, made when absent (for
    that model, with ``spec``'s index), else checked to be of that model."""
    conninfo, name = parse_location(location)
    gallery = PgGallery(location, conninfo, name, lock_timeout)
    try:
        if card is None:
            if not gallery.exists():
                raise GalleryError(f"{location}: no gallery {name!r} in this database; create one with reid enroll")
        else:
            with gallery.transaction():
                gallery._lock()
                there = gallery.exists()
                if there and create:
                    raise GalleryError(f"{location}: a gallery already exists here")
                if not there:
                    gallery.ensure_extension()
                    gallery.initialize(card, spec or IndexSpec(), thumbnails)
                gallery.created = not there
        register_vector(gallery._conn)
        gallery.load_snapshot()
        if card is not None:
            gallery.check_model(card)
            if spec is not None and spec != gallery.view.spec:
                raise ConfigError(
                    f"{location}: gallery has a {gallery.view.spec.kind} index of other options than asked for; "
                    "change it with reid gallery reindex"
                )
    except BaseException:
        gallery.close()
        raise
    return gallery


def destroy_gallery(location: str, lock_timeout: float = 120.0) -> int:
    """Drop the gallery at ``location`` with every item in it; how many items it held.
    GalleryError when there is none."""
    conninfo, name = parse_location(location)
    gallery = PgGallery(location, conninfo, name, lock_timeout)
    try:
        with gallery.transaction():
            gallery._lock()
            if not gallery.exists():
                raise GalleryError(f"{location}: no gallery {name!r} in this database")
            count = int(gallery.rows(sql.SQL("SELECT count(*) FROM {items}").format(items=gallery.table("items")))[0][0])
            gallery.run(sql.SQL("DROP SCHEMA {s} CASCADE").format(s=sql.Identifier(gallery.schema)))
    finally:
        gallery.close()
    return count


def gallery_uid(location: str) -> str | None:
    """The id of the gallery at ``location`` (:attr:`GalleryBackend.uid`), read without
    opening it; None when there is none.  GalleryError when the server cannot be reached."""
    conninfo, name = parse_location(location)
    gallery = PgGallery(location, conninfo, name, 30.0)
    try:
        if not gallery.exists():
            return None
        raw = gallery.read_meta()
        return uid_of(raw)
    finally:
        gallery.close()


def gallery_names(location: str) -> list[str]:
    """The names (``gallery=NAME``) of every gallery in the database ``location`` names, sorted."""
    conninfo, _ = parse_location(location)
    with connect(conninfo, location) as conn:
        try:
            rows = conn.execute(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'meta' AND starts_with(table_schema, %s)",
                [SCHEMA_PREFIX],
            ).fetchall()
        except psycopg.Error as exc:
            raise GalleryError(f"{location}: {one_line(exc)}") from None
    names = (str(row[0])[len(SCHEMA_PREFIX) :] for row in rows)
    return sorted(name for name in names if NAME.fullmatch(name))


def gallery_name(location: str) -> str:
    """The name of the gallery ``location`` names in its database (``gallery=NAME``)."""
    return parse_location(location)[1]
