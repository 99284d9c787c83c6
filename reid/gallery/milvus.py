"""The Milvus gallery: items, embeddings and the gallery's facts in Milvus collections.

``milvus:FILE.db/COLLECTION`` opens a milvus-lite file (the embedded engine: tests and
small single-process galleries); ``milvus://HOST:PORT/COLLECTION`` a Milvus server
(Standalone or Distributed), with the token from :data:`TOKEN_ENV`, never from the
location.  Only calls a Milvus server answers are used, so both behave alike.

Two collections per gallery::

    COLLECTION         one row per item: id (primary key), vector (unit float32), identity,
                       batch (the enrolment that wrote it), image_hash, item (the stored
                       columns as JSON)
    COLLECTION__meta   key -> JSON text: "meta" (model, dimension, threshold, index),
                       "state" (the last committed batch, the next item id, the item
                       count, the generation, an unfinished removal or rename),
                       "calibration", and "thumb:<id>" (a thumbnail, base64 JPEG)

The "state" row is the commit point.  An enrolment writes its items with the next batch
number, in as many upserts as it takes, then upserts "state" naming that batch committed:
one row, so Milvus writes it whole or not at all.  Search and every read filter on
``batch <= last committed``, so a half-written enrolment is never seen; the next writer
(and :meth:`MilvusGallery.check`) deletes such leftovers.  A removal or rename records
itself in "state" first, is carried out, then cleared: a crash midway leaves it recorded,
readers apply it, and the next writer finishes it.

What Milvus guarantees and this relies on: reads at consistency level Strong see every
write acknowledged before them; an upsert is idempotent by primary key (an insert is
not: Milvus keeps both rows), so every write here is an upsert; an acknowledged write is
durable in Milvus' write-ahead log without a flush (which only seals segments: done after
large enrolments, see :data:`FLUSH_ROWS`).  Milvus has no transactions over
rows and no locks: the threads of one process write one at a time (:func:`writers_lock`),
and writing processes are expected one at a time (one enrolling process, one serving
process that writes); a writer that finds the state changed under it since it began
refuses to commit.

Distances are Euclidean between unit embeddings, 0..2, from Milvus' inner product
(metric IP) by :func:`reid.decision.similarity_to_distance`, as for FAISS.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from reid.errors import ConfigError, GalleryBusyError, GalleryError
from reid.gallery import thumbnails as thumbs
from reid.gallery.base import GalleryBackend, named
from reid.gallery.catalogue import FORMAT, item_from_row, item_row, meta_uid, new_uid, now
from reid.gallery.check import scan_duplicates
from reid.gallery.export import export_suffix
from reid.gallery.index import IndexSpec
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
from reid.names import identity_name
from reid.paths import check_output_file, write_atomic

SCHEME = "milvus"
# The environment variable holding a Milvus server's token ("user:password" or an API key).
TOKEN_ENV = "MILVUS_TOKEN"
# The logger milvus-lite names a file it cannot open in.
LITE_LOGGER = "milvus_lite.server_manager"
META_SUFFIX = "__meta"
# Milvus' own limits: rows a query or search returns, and a VARCHAR's length.
MAX_RESULT = 16_384
MAX_TEXT = 65_535
# Rows an upsert sends at a time, and ids a paged read covers at a time.
WRITE_ROWS = 1_000
READ_IDS = 10_000
# Queries a search sends at a time.
SEARCH_ROWS = 1_000
# An enrolment of at least this many items ends with a flush: Milvus then seals its rows into
# indexed segments at once instead of searching them as a growing segment (on milvus-lite
# 30 times slower), while small enrolments leave sealing to Milvus (a flush makes a segment).
FLUSH_ROWS = 10_000
# reid's index names and Milvus' index types.
MILVUS_INDEX = {"flat": "FLAT", "ivf": "IVF_FLAT", "hnsw": "HNSW", "ivfpq": "IVF_PQ"}
# Inverted lists of an IVF collection when --index-nlist is automatic: Milvus fixes them
# when the index is made, before any item is there to size them by.
DEFAULT_NLIST = 1_024
# The IndexSpec options FAISS galleries have and Milvus collections do not.
FAISS_ONLY = ("train_min", "train_size", "refine", "shard_size")
COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}")
# The writers' lock of each collection this process writes to (writers_lock).
_WRITERS: dict[tuple[str, str], threading.RLock] = {}
_WRITERS_GUARD = threading.Lock()
# Distances a search returns, for the placeholder vector of the metadata collection.
PLACEHOLDER_DIM = 2


@dataclass(frozen=True)
class MilvusLocation:
    """Where a Milvus gallery is: the client's ``uri`` (a file or http://HOST:PORT) and the
    items' ``collection``; ``text`` is the location as given."""

    uri: str
    collection: str
    text: str
    server: bool

    @property
    def meta_collection(self) -> str:
        return self.collection + META_SUFFIX


def parse_location(text: str) -> MilvusLocation:
    """``milvus:FILE.db/COLLECTION`` or ``milvus://HOST:PORT/COLLECTION`` as a location;
    ConfigError in one line for another form or credentials in it."""
    if not text.lower().startswith(SCHEME + ":"):
        raise ConfigError(f"{text}: not a Milvus gallery (milvus:FILE.db/COLLECTION or milvus://HOST:PORT/COLLECTION)")
    rest = text[len(SCHEME) + 1 :]
    if rest.startswith("//"):
        parts = urlsplit(text)
        if "@" in parts.netloc:
            raise ConfigError(f"{SCHEME}://: credentials do not belong in the gallery location; set {TOKEN_ENV} instead")
        if parts.query or parts.fragment:
            raise ConfigError(f"{SCHEME}://{parts.netloc}: the location takes no query; use milvus://HOST:PORT/COLLECTION")
        collection = parts.path.strip("/")
        try:
            port = parts.port or 19530
        except ValueError:
            raise ConfigError(f"{SCHEME}://{parts.netloc}: the port is not a number") from None
        if not parts.hostname:
            raise ConfigError(f"{text}: no host; use milvus://HOST:PORT/COLLECTION")
        uri, server = f"http://{parts.hostname}:{port}", True
    else:
        file, _, collection = rest.rpartition("/")
        if not file.endswith(".db"):
            raise ConfigError(f"{text}: a milvus-lite gallery is milvus:FILE.db/COLLECTION (a file ending .db)")
        uri, server = str(Path(file)), False
    if not COLLECTION_NAME.fullmatch(collection) or collection.endswith(META_SUFFIX):
        raise ConfigError(
            f"{text}: {collection!r} is not a collection name (a letter or _, then letters, digits and _; "
            f"not ending {META_SUFFIX})"
        )
    return MilvusLocation(uri, collection, text, server)


def quoted(text: str) -> str:
    """``text`` as a string literal of Milvus' filter expressions."""
    return json.dumps(text, ensure_ascii=False)


def milvus_index(spec: IndexSpec, dim: int) -> tuple[str, dict[str, int], dict[str, int]]:
    """(Milvus index type, build parameters, search parameters) of ``spec``; ConfigError in
    one line for an option Milvus does not have."""
    spec.check_dim(dim)
    default = IndexSpec(kind=spec.kind)
    for name in FAISS_ONLY:
        if getattr(spec, name) != getattr(default, name):
            raise ConfigError(f"{SCHEME}: index option {name} applies to FAISS galleries only, not to Milvus collections")
    nlist = spec.nlist or DEFAULT_NLIST
    nprobe = spec.nprobe or max(8, nlist // 32)
    if spec.kind == "hnsw":
        return "HNSW", {"M": spec.hnsw_m, "efConstruction": spec.ef_construction}, {"ef": spec.ef_search}
    if spec.kind == "ivf":
        return "IVF_FLAT", {"nlist": nlist}, {"nprobe": nprobe}
    if spec.kind == "ivfpq":
        return "IVF_PQ", {"nlist": nlist, "m": spec.pq_m or dim // 8, "nbits": spec.pq_bits}, {"nprobe": nprobe}
    return "FLAT", {}, {}


@dataclass
class GalleryState:
    """The commit point ("state" row): batches up to ``batch`` are committed, ``next_id``
    is the next item id, ``items`` how many committed items there are, and ``pending`` an
    unfinished removal (``{"remove": [ids]}``, ``{"remove_identity": name}``) or rename
    (``{"rename": [old, new]}``)."""

    batch: int = 0
    next_id: int = 1
    items: int = 0
    generation: int = 0
    pending: dict[str, Any] = field(default_factory=dict)


class MilvusView:
    """One committed state of a Milvus gallery, read only (a
    :class:`reid.gallery.search.GalleryView`): search and reads see batches up to ``batch``
    less what an unfinished removal takes away."""

    def __init__(self, gallery: MilvusGallery, labels: IdentityLabels, state: GalleryState, spec: IndexSpec) -> None:
        self.gallery = gallery
        self.labels = labels
        self.dim = gallery.meta.dim
        self.state = state
        self.spec = spec

    def __len__(self) -> int:
        return len(self.labels.ids)

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def filter(self) -> str:
        """The filter expression of this state's items."""
        expression = f"batch <= {self.state.batch}"
        if "remove_identity" in self.state.pending:
            expression += f" and identity != {quoted(self.state.pending['remove_identity'])}"
        if "remove" in self.state.pending:
            expression += f" and id not in {json.dumps(self.state.pending['remove'])}"
        return expression

    def nearest(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(inner products (Q, k) float32, item ids (Q, k) int64, -1 pads) of ``queries``
        (Q, D); Milvus returns at most :data:`MAX_RESULT` a query."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = max(1, min(k, MAX_RESULT))
        sims = np.full((len(queries), k), -np.inf, np.float32)
        ids = np.full((len(queries), k), -1, np.int64)
        _, _, params = milvus_index(self.spec, self.dim)
        if "ef" in params:
            params = {"ef": max(params["ef"], k)}
        for start in range(0, len(queries), SEARCH_ROWS):
            block = queries[start : start + SEARCH_ROWS]
            answers = self.gallery.call(
                "search",
                self.gallery.where.collection,
                data=block.tolist(),
                limit=k,
                filter=self.filter,
                output_fields=["id"],
                search_params={"metric_type": "IP", "params": params},
                consistency_level="Strong",
            )
            for row, hits in enumerate(answers):
                for col, hit in enumerate(hits[:k]):
                    sims[start + row, col] = hit["distance"]
                    ids[start + row, col] = hit["id"]
        return sims, ids

    def originals(self, ids: np.ndarray) -> np.ndarray:
        """Stored embeddings (N, D) float32 of item ``ids`` (N,) int64; GalleryError when one is missing."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        out = np.empty((len(ids), self.dim), np.float32)
        unique = np.unique(ids)
        found: dict[int, list[float]] = {}
        for start in range(0, len(unique), READ_IDS):
            rows = self.gallery.call(
                "query",
                self.gallery.where.collection,
                ids=unique[start : start + READ_IDS].tolist(),
                output_fields=["vector"],
                consistency_level="Strong",
            )
            found.update((int(row["id"]), row["vector"]) for row in rows)
        for position, item_id in enumerate(ids):
            vector = found.get(int(item_id))
            if vector is None:
                raise GalleryError(f"{self.gallery.location}: item {int(item_id)} has no embedding in Milvus")
            out[position] = vector
        return out

    def chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for start in range(0, len(self.labels.ids), READ_IDS):
            ids = self.labels.ids[start : start + READ_IDS]
            yield ids, self.originals(ids)


@dataclass
class MilvusCheckReport(CheckReport):
    """:class:`CheckReport` of a Milvus gallery, with how many items of enrolments that never
    committed the check found and deleted (``leftovers``)."""

    leftovers: int = 0


class MilvusGallery(GalleryBackend):
    """An open Milvus gallery; open one with :func:`open_gallery`.  Raises as
    :class:`~reid.gallery.base.GalleryBackend` says, GalleryError naming the location."""

    def __init__(self, where: MilvusLocation, client: Any, lock_timeout: float = 120.0) -> None:
        self.where = where
        self.lock_timeout = lock_timeout
        self.location = where.text
        self.catalogue_at = f"{where.text} ({where.meta_collection})"
        self.client = client
        # Rows an upsert sends at a time (a test writes an enrolment in several).
        self.write_rows = WRITE_ROWS
        self._view: MilvusView | None = None

    # ----------------------------------------------------------------- talking to Milvus

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The client's ``method``; GalleryError in one line when Milvus refuses it."""
        from pymilvus.exceptions import MilvusException

        try:
            return getattr(self.client, method)(*args, **kwargs)
        except MilvusException as exc:
            message = " ".join(str(getattr(exc, "message", exc)).split())
            raise GalleryError(f"{self.location}: Milvus refused {method}: {message}") from None

    def read_meta(self, key: str) -> str | None:
        return self.read_metas([key]).get(key)

    def read_metas(self, keys: list[str]) -> dict[str, str]:
        """The metadata rows ``keys`` that are there, in one query."""
        rows = self.call("query", self.where.meta_collection, ids=keys, output_fields=["key", "value"], consistency_level="Strong")
        return {str(row["key"]): str(row["value"]) for row in rows}

    def facts(self, text: str | None) -> GalleryMeta:
        """The gallery's facts from the text of its "meta" row; GalleryError when there is none or it is malformed."""
        if text is None:
            raise GalleryError(f"{self.location}: no gallery here")
        try:
            return GalleryMeta(**json.loads(text))
        except (TypeError, ValueError):
            raise GalleryError(f"{self.catalogue_at}: the gallery's facts are malformed") from None

    def write_meta(self, rows: dict[str, str]) -> None:
        zero = [0.0] * PLACEHOLDER_DIM
        for key, value in rows.items():
            if len(value) > MAX_TEXT:
                raise GalleryError(f"{self.catalogue_at}: {key} is longer than Milvus' {MAX_TEXT} characters")
        self.call(
            "upsert", self.where.meta_collection, [{"key": k, "value": v, "placeholder": zero} for k, v in rows.items()]
        )

    def read_state(self, text: str | None = None) -> GalleryState:
        """The committed state (from ``text``, the "state" row, when given)."""
        text = self.read_meta("state") if text is None else text
        try:
            return GalleryState(**json.loads(text)) if text is not None else GalleryState()
        except (TypeError, ValueError):
            raise GalleryError(f"{self.catalogue_at}: the state row is malformed") from None

    def write_state(self, state: GalleryState) -> None:
        self.write_meta({"state": json.dumps(asdict(state))})

    def read_spec(self) -> IndexSpec:
        text = self.read_meta("index")
        try:
            return IndexSpec(**json.loads(text)) if text is not None else IndexSpec()
        except (TypeError, ValueError, ConfigError):
            raise GalleryError(f"{self.catalogue_at}: the index row is malformed") from None

    # ----------------------------------------------------------------- the view

    @property
    def view(self) -> MilvusView:
        if self._view is None:
            self._view = self.load(self.read_state())
        return self._view

    def query_items(self, where: str, fields: list[str]) -> list[dict[str, Any]]:
        """The items' rows matching the filter ``where`` (at most :data:`READ_IDS`, a page),
        ``fields`` of each, read at consistency level Strong."""
        return self.call(
            "query", self.where.collection, filter=where, output_fields=fields, consistency_level="Strong", limit=READ_IDS
        )

    def load(self, state: GalleryState) -> MilvusView:
        """The view of ``state``: every committed item's id and identity, paged by id."""
        rename = state.pending.get("rename")
        rows: list[tuple[int, str]] = []
        draft = MilvusView(self, IdentityLabels(), state, self.read_spec())
        for start in range(0, state.next_id, READ_IDS):
            page = self.query_items(f"id >= {start} and id < {start + READ_IDS} and {draft.filter}", ["id", "identity"])
            rows.extend((int(r["id"]), str(r["identity"])) for r in page)
        rows.sort()
        if rename:
            rows = [(i, rename[1] if name == rename[0] else name) for i, name in rows]
        draft.labels.extend(rows)
        return draft

    def refresh(self) -> bool:
        """Load what other clients committed (a gallery made again at this location, too);
        GalleryError when the gallery is no longer there."""
        rows = self.read_metas(["state", "meta"])
        meta, state = self.facts(rows.get("meta")), self.read_state(rows.get("state", "{}"))
        if self._view is not None and state == self._view.state and meta.uid == self.meta.uid:
            return False
        self.meta = meta
        self._view = self.load(state)
        return True

    # ----------------------------------------------------------------- writing

    @contextmanager
    def locked(self) -> Iterator[GalleryState]:
        """Catch up with Milvus, delete leftovers of enrolments that never committed and
        finish an unfinished removal or rename; yields the state a write starts from.
        Milvus has no locks: the writers of this process (threads, each with its handle)
        take turns by :func:`writers_lock`; writers in other processes are expected one at
        a time (see the module)."""
        lock = writers_lock(self.where)
        if not lock.acquire(timeout=self.lock_timeout):
            raise GalleryBusyError(f"{self.location}: another writer of this process has been writing for {self.lock_timeout:g} s; try again later")
        try:
            self.recover()
            self._view = self.load(self.read_state())
            try:
                yield self._view.state
            except ConfigError:
                raise
            except BaseException:
                self._view = None
                raise
        finally:
            lock.release()

    def recover(self) -> int:
        """Delete the items (and thumbnails) of batches past the committed one and finish a
        recorded removal or rename; how many leftover items were deleted."""
        state = self.read_state()
        deleted = 0
        while ids := self.ids_where(f"batch > {state.batch}"):
            self.call("delete", self.where.meta_collection, ids=[f"thumb:{i}" for i in ids])
            self.call("delete", self.where.collection, ids=ids)
            deleted += len(ids)
        if state.pending:
            self.finish(state)
        return deleted

    def ids_where(self, expression: str) -> list[int]:
        """Ids of up to :data:`MAX_RESULT` items that ``expression`` selects."""
        rows = self.call(
            "query",
            self.where.collection,
            filter=expression,
            output_fields=["id"],
            consistency_level="Strong",
            limit=MAX_RESULT,
        )
        return [int(r["id"]) for r in rows]

    def commit(self, started: GalleryState, new: GalleryState) -> None:
        """Write ``new`` as the state, unless another writer committed since ``started``."""
        if self.read_state().generation != started.generation:
            raise GalleryError(f"{self.location}: another writer changed the gallery meanwhile; try again")
        self.write_state(new)

    def finish(self, state: GalleryState) -> None:
        """Carry out ``state``'s recorded removal or rename, then clear it."""
        pending = state.pending
        if "remove" in pending:
            self.delete_items([int(i) for i in pending["remove"]])
        if "remove_identity" in pending:
            while ids := self.ids_where(f"identity == {quoted(pending['remove_identity'])}"):
                self.delete_items(ids)
        if "rename" in pending:
            old, new = pending["rename"]
            while rows := self.call(
                "query",
                self.where.collection,
                filter=f"identity == {quoted(old)}",
                output_fields=["id", "vector", "identity", "batch", "image_hash", "item"],
                consistency_level="Strong",
                limit=self.write_rows,
            ):
                for row in rows:
                    stored = json.loads(row["item"])
                    stored[0] = new
                    row.update(identity=new, item=json.dumps(stored))
                self.call("upsert", self.where.collection, [dict(r) for r in rows])
        self.write_state(replace(state, pending={}, generation=state.generation + 1))

    def delete_items(self, ids: list[int]) -> None:
        """Delete items ``ids`` and their thumbnails (thumbnails first: never one without its item)."""
        for start in range(0, len(ids), READ_IDS):
            chunk = ids[start : start + READ_IDS]
            self.call("delete", self.where.meta_collection, ids=[f"thumb:{i}" for i in chunk])
            self.call("delete", self.where.collection, ids=chunk)

    def insert(
        self, vectors: np.ndarray, items: Sequence[ItemMeta], crops: Sequence[np.ndarray] | None, skip: bool, same_image: str
    ) -> AddResult:
        items = named(items, identity_name)
        with self.locked() as state:
            self.check_case({item.identity for item in items})
            keep, result = self.screen(items, vectors, skip, same_image)
            if not keep:
                return result
            enrolled, batch = now(), state.batch + 1
            ids = list(range(state.next_id, state.next_id + len(keep)))
            rows = []
            for item_id, position in zip(ids, keep, strict=True):
                row = item_row(items[position], enrolled)
                stored = {"identity": row[0], "batch": batch, "image_hash": row[-1] or "", "item": json.dumps(row)}
                rows.append({"id": item_id, "vector": vectors[position].tolist(), **stored})
            for start in range(0, len(rows), self.write_rows):
                self.call("upsert", self.where.collection, rows[start : start + self.write_rows])
            if crops is not None and self.keeps_thumbnails:
                pictures = {f"thumb:{i}": base64.b64encode(thumbs.encode(crops[p])).decode() for i, p in zip(ids, keep, strict=True)}
                self.write_meta(pictures)
            self.commit(state, replace(state, batch=batch, next_id=ids[-1] + 1, items=state.items + len(ids), generation=state.generation + 1))
            if len(ids) >= FLUSH_ROWS:
                self.call("flush", self.where.collection)
            self._view = None
            result.ids = ids
        return result

    def _change(self, pending: dict[str, Any], items: int) -> None:
        """Record ``pending`` in the state, carry it out, clear it; ``items``: how many it removes."""
        with self.locked() as state:
            recorded = replace(state, pending=pending, items=state.items - items, generation=state.generation + 1)
            self.commit(state, recorded)
            self.finish(recorded)
            self._view = None

    def remove_identity(self, identity: str) -> int:
        ids = self._ids_of(identity)
        self._change({"remove_identity": identity}, len(ids))
        return len(ids)

    def remove_item(self, item_id: int) -> GalleryItem:
        item = self.get_items([int(item_id)]).get(int(item_id))
        if item is None:
            raise GalleryError(f"{self.location}: no item {item_id} in the gallery")
        self._change({"remove": [item.id]}, 1)
        return item

    def rename_identity(self, identity: str, new_name: str) -> int:
        new_name = identity_name(new_name, "the new identity name")
        ids = self._ids_of(identity)
        if new_name != identity and new_name in self.view.labels.present():
            raise ConfigError(f"{self.location}: identity {new_name!r} already exists; choose another name")
        self.check_case({new_name}, leaving=identity)
        self._change({"rename": [identity, new_name]}, 0)
        return len(ids)

    def _ids_of(self, identity: str) -> np.ndarray:
        self.refresh()
        labels = self.view.labels
        if identity not in labels.present():
            raise GalleryError(f"{self.location}: no identity {identity!r} in the gallery")
        return labels.ids_of(identity)

    def set_calibration_text(self, text: str) -> None:
        self.write_meta({"calibration": text})

    def reindex(self, spec: IndexSpec) -> None:
        kind, build, _ = milvus_index(spec, self.meta.dim)
        with self.locked():
            self.call("release_collection", self.where.collection)
            self.call("drop_index", self.where.collection, "vector")
            params = self.client.prepare_index_params()
            params.add_index("vector", index_type=kind, metric_type="IP", params=build)
            self.call("create_index", self.where.collection, params)
            self.call("load_collection", self.where.collection)
            self.write_meta({"index": json.dumps(spec.to_dict())})
            self._view = None

    # ----------------------------------------------------------------- reading

    def items(self, identity: str | None = None, limit: int | None = None) -> list[GalleryItem]:
        labels = self.view.labels
        if identity is None:
            ids = labels.ids
        else:
            ids = labels.ids_of(identity) if identity in labels.present() else np.zeros(0, np.int64)
        ids = ids[:limit]
        found = self.get_items(ids.tolist())
        return [found[int(i)] for i in ids if int(i) in found]

    def get_items(self, ids: Sequence[int]) -> dict[int, GalleryItem]:
        out: dict[int, GalleryItem] = {}
        wanted = [int(i) for i in ids]
        rename = self.view.state.pending.get("rename")
        for start in range(0, len(wanted), READ_IDS):
            rows = self.query_items(f"id in {wanted[start : start + READ_IDS]} and {self.view.filter}", ["id", "item"])
            for row in rows:
                stored = json.loads(row["item"])
                if rename and stored[0] == rename[0]:
                    stored[0] = rename[1]
                try:
                    out[int(row["id"])] = item_from_row((int(row["id"]), *stored))
                except (ValueError, TypeError):
                    raise GalleryError(f"{self.location}: item {row['id']} is malformed in Milvus") from None
        return out

    def identities(self) -> list[IdentitySummary]:
        found: dict[str, list[str]] = {}
        for item in self.items():
            found.setdefault(item.identity, []).append(item.enrolled)
        return [IdentitySummary(name, len(times), min(times), max(times)) for name, times in sorted(found.items())]

    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        known: set[str] = set()
        wanted = sorted(set(hashes))
        for start in range(0, len(wanted), 1000):
            listed = json.dumps(wanted[start : start + 1000], ensure_ascii=False)
            rows = self.call(
                "query",
                self.where.collection,
                filter=f"image_hash in {listed} and {self.view.filter}",
                output_fields=["image_hash"],
                consistency_level="Strong",
                limit=MAX_RESULT,
            )
            known.update(str(r["image_hash"]) for r in rows)
        return known

    def calibration_text(self) -> str | None:
        return self.read_meta("calibration")

    @property
    def keeps_thumbnails(self) -> bool:
        return self.read_meta("thumbnails") == "true"

    def thumbnail(self, item_id: int) -> bytes | None:
        text = self.read_meta(f"thumb:{int(item_id)}")
        return None if text is None else base64.b64decode(text)

    def info(self) -> GalleryInfo:
        kind, _, _ = milvus_index(self.view.spec, self.meta.dim)
        return self.summary(kind, self.view.state.generation, segments=0, bytes=0, search_device="milvus")

    def check(self, queries: int = 1000, k: int = 10, seed: int = 0) -> MilvusCheckReport:
        """Delete leftovers of enrolments that never committed, verify that Milvus holds
        exactly the committed items the state counts, each with a unit embedding of the
        gallery's dimension and a readable row, then measure recall and scan for duplicates."""
        leftovers = self.recover()
        view = self._view = self.load(self.read_state())
        stored = self.call(
            "query", self.where.collection, filter=view.filter, output_fields=["count(*)"], consistency_level="Strong"
        )[0]["count(*)"]
        if not (len(view) == stored == view.state.items):
            raise GalleryError(
                f"{self.catalogue_at}: the state counts {view.state.items} items, Milvus holds {stored} committed "
                f"and {len(view)} were read"
            )
        for ids, vectors in view.chunks():
            norms = np.linalg.norm(vectors, axis=1)
            if not np.allclose(norms, 1.0, atol=1e-3):
                bad = int(ids[np.flatnonzero(~np.isclose(norms, 1.0, atol=1e-3))[0]])
                raise GalleryError(f"{self.location}: item {bad} has an embedding that is not of unit length")
            if len(self.get_items(ids.tolist())) != len(ids):
                raise GalleryError(f"{self.location}: some items of ids {int(ids[0])}..{int(ids[-1])} are unreadable")
        scanned, other, near = scan_duplicates(view)
        return MilvusCheckReport(
            database=self.catalogue_at,
            items=len(view),
            identities=self.identity_count,
            checksums=None,
            recall=self.recall(queries, k, seed),
            scanned=scanned,
            same_image_other_identity=other,
            near_duplicates=near,
            leftovers=leftovers,
        )

    def export(self, path: str | Path) -> int:
        """Write the items to ``path``: ``.jsonl`` (one item a line) or ``.npz`` (ids,
        embeddings, the items' columns and the gallery's facts, as the FAISS gallery's)."""
        path = Path(path)
        suffix = export_suffix(path)
        check_output_file(path, "the export")
        self.refresh()
        items = self.items()
        if suffix == ".jsonl":
            write_atomic(path, lambda h: h.write("".join(json.dumps(i.to_dict()) + "\n" for i in items).encode()))
            return len(items)
        ids = np.asarray([i.id for i in items], np.int64)
        arrays = {
            "ids": ids,
            "embeddings": self.view.originals(ids) if len(ids) else np.zeros((0, self.meta.dim), np.float32),
            "identity": np.asarray([i.identity for i in items], str),
            "source": np.asarray([i.source for i in items], str),
            "camera": np.asarray([i.camera or "" for i in items], str),
            "frame": np.asarray([-1 if i.frame is None else i.frame for i in items], np.int64),
            "time": np.asarray([np.nan if i.time is None else i.time for i in items], np.float64),
            "enrolled": np.asarray([i.enrolled for i in items], str),
            "image_hash": np.asarray([i.image_hash or "" for i in items], str),
            "box": np.asarray([i.box or (-1, -1, -1, -1) for i in items], np.int64).reshape(-1, 4),
            "meta": np.asarray(json.dumps(self.info().to_dict())),
        }
        write_atomic(path, lambda h: np.savez(h, **arrays))
        return len(items)

    def remove_if_empty(self) -> bool:
        self.refresh()
        if len(self.view):
            return False
        drop(self.client, self.where)
        self.close()
        return True

    def close(self) -> None:
        self.client.close()


def writers_lock(where: MilvusLocation) -> threading.RLock:
    """The lock the writers of ``where``'s collection in this process take turns by: two
    threads writing at once would take the same batch and item ids, and one's rows would
    overwrite the other's.  One lock a collection (a file's by its absolute path) for the
    life of the process, as a file lock is the kernel's."""
    key = (where.uri if where.server else str(Path(where.uri).absolute()), where.collection)
    with _WRITERS_GUARD:
        return _WRITERS.setdefault(key, threading.RLock())


def connect(where: MilvusLocation, timeout: float) -> Any:
    """A pymilvus client of ``where``: the server's token from :data:`TOKEN_ENV`."""
    import os

    from pymilvus import MilvusClient
    from pymilvus.exceptions import MilvusException

    token = os.environ.get(TOKEN_ENV, "") if where.server else ""
    # milvus-lite logs a file it cannot open with a traceback before pymilvus raises; the one
    # line raised here says it.
    lite_log = logging.getLogger(LITE_LOGGER)
    lite_log.addFilter(_silent)
    try:
        return MilvusClient(uri=where.uri, token=token, timeout=timeout)
    except MilvusException as exc:
        # milvus-lite opens a file in one process at a time; a server takes many clients.
        shared = "" if where.server else " (milvus-lite opens a file in one process at a time: is another using it?)"
        raise GalleryBusyError(f"{where.text}: cannot connect to Milvus: {' '.join(str(exc.message).split())}{shared}") from None
    finally:
        lite_log.removeFilter(_silent)


def _silent(record: logging.LogRecord) -> bool:
    return False


def drop(client: Any, where: MilvusLocation) -> None:
    for name in (where.collection, where.meta_collection):
        if client.has_collection(name):
            client.drop_collection(name)


def create_collections(client: Any, where: MilvusLocation, card: ModelFacts, spec: IndexSpec, thumbnails: bool) -> None:
    """Make the gallery's two collections (consistency level Strong) and its fixed rows."""
    from pymilvus import DataType, MilvusClient

    kind, build, _ = milvus_index(spec, card.embedding_dim)
    items = MilvusClient.create_schema(auto_id=False)
    items.add_field("id", DataType.INT64, is_primary=True)
    items.add_field("vector", DataType.FLOAT_VECTOR, dim=card.embedding_dim)
    items.add_field("identity", DataType.VARCHAR, max_length=1024)
    items.add_field("batch", DataType.INT64)
    items.add_field("image_hash", DataType.VARCHAR, max_length=256)
    items.add_field("item", DataType.VARCHAR, max_length=MAX_TEXT)
    params = client.prepare_index_params()
    params.add_index("vector", index_type=kind, metric_type="IP", params=build)
    meta = MilvusClient.create_schema(auto_id=False)
    meta.add_field("key", DataType.VARCHAR, is_primary=True, max_length=256)
    meta.add_field("value", DataType.VARCHAR, max_length=MAX_TEXT)
    # Milvus wants a vector field in every collection; the metadata's is never searched.
    meta.add_field("placeholder", DataType.FLOAT_VECTOR, dim=PLACEHOLDER_DIM)
    meta_params = client.prepare_index_params()
    meta_params.add_index("placeholder", index_type="FLAT", metric_type="L2")
    client.create_collection(where.meta_collection, schema=meta, index_params=meta_params, consistency_level="Strong")
    client.create_collection(where.collection, schema=items, index_params=params, consistency_level="Strong")
    facts = GalleryMeta(
        model_fingerprint=card.fingerprint,
        model_name=card.name,
        model_kind=card.kind,
        dim=card.embedding_dim,
        threshold=card.threshold,
        created=now(),
        format=FORMAT,
        uid=new_uid(),
    )
    zero = [0.0] * PLACEHOLDER_DIM
    rows = {"index": json.dumps(spec.to_dict()), "thumbnails": "true" if thumbnails else "false"}
    # "meta" last: a gallery is there once its facts are.
    client.upsert(where.meta_collection, [{"key": k, "value": v, "placeholder": zero} for k, v in rows.items()])
    client.upsert(where.meta_collection, [{"key": "meta", "value": json.dumps(asdict(facts)), "placeholder": zero}])


def open_gallery(
    location: str,
    card: ModelFacts | None = None,
    spec: IndexSpec | None = None,
    *,
    create: bool = False,
    lock_timeout: float = 120.0,
    thumbnails: bool = True,
) -> MilvusGallery:
    """The Milvus gallery at ``location`` (see :func:`reid.gallery.opener.open_gallery`)."""
    where = parse_location(location)
    if spec is not None and card is not None:
        milvus_index(spec, card.embedding_dim)
    client = connect(where, lock_timeout)
    try:
        gallery = MilvusGallery(where, client, lock_timeout)
        # A collection is searched and read only once loaded (after a restart, or by another process).
        exists = client.has_collection(where.meta_collection)
        if exists:
            gallery.call("load_collection", where.meta_collection)
            exists = gallery.read_meta("meta") is not None and client.has_collection(where.collection)
        if exists and create:
            raise GalleryError(f"{location}: a gallery already exists here")
        if not exists:
            if card is None:
                raise GalleryError(f"{location}: no gallery here; create one with reid enroll")
            if not card.fingerprint or card.embedding_dim < 1:
                raise ConfigError(f"{location}: the model has no fingerprint or embedding dimension")
            drop(client, where)
            create_collections(client, where, card, spec or IndexSpec(), thumbnails)
            gallery.created = True
        gallery.call("load_collection", where.collection)
        gallery.call("load_collection", where.meta_collection)
        gallery.meta = gallery.facts(gallery.read_meta("meta") or "")
        if card is not None:
            gallery.check_model(card)
            stored = gallery.read_spec()
            if spec is not None and spec != stored:
                raise ConfigError(
                    f"{location}: gallery has a {stored.kind} index, not {spec.kind} with these options; "
                    "change it with reid gallery reindex"
                )
        return gallery
    except BaseException:
        client.close()
        raise


def destroy_gallery(location: str, lock_timeout: float = 120.0) -> int:
    """Drop the gallery's collections; how many items it held.  GalleryError when there is none."""
    where = parse_location(location)
    client = connect(where, lock_timeout)
    try:
        if not client.has_collection(where.meta_collection):
            raise GalleryError(f"{location}: no gallery here")
        gallery = MilvusGallery(where, client)
        count = gallery.read_state().items
        drop(client, where)
        return count
    finally:
        client.close()


def gallery_uid(location: str, lock_timeout: float = 30.0) -> str | None:
    """The id of the gallery at ``location`` (:attr:`GalleryBackend.uid`), read without
    opening it; None when there is none.  GalleryError when Milvus cannot be reached."""
    where = parse_location(location)
    client = connect(where, lock_timeout)
    try:
        if not client.has_collection(where.meta_collection) or not client.has_collection(where.collection):
            return None
        gallery = MilvusGallery(where, client)
        gallery.call("load_collection", where.meta_collection)
        text = gallery.read_meta("meta")
        return None if text is None else meta_uid(gallery.facts(text))
    finally:
        client.close()


def gallery_names(location: str, lock_timeout: float = 30.0) -> list[str]:
    """The collection names of every gallery in the milvus-lite file or on the server
    ``location`` names, sorted."""
    where = parse_location(location)
    client = connect(where, lock_timeout)
    try:
        collections = set(MilvusGallery(where, client).call("list_collections"))
    finally:
        client.close()
    return sorted(
        name[: -len(META_SUFFIX)] for name in collections if name.endswith(META_SUFFIX) and name[: -len(META_SUFFIX)] in collections
    )


def gallery_name(location: str) -> str:
    """The collection ``location`` names."""
    return parse_location(location).collection
