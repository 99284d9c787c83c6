"""The cost of the HTTP service: `reid serve` (real uvicorn on loopback) against the same
work called in process, in one run.

1. Search throughput and p50 / p95 / p99 latency at 1, 4 and 16 concurrent clients, each
   beside the same searches called in process (``Service.search`` on threads) in the same
   run; the ratio server / in-process is the service's cost (aim: at least 0.85 at 4).
2. Mixed load for ``--seconds`` (4 clients enrolling, 12 searching, 1 deleting): errors,
   then every enrolled image present exactly once, every deleted identity gone, and the
   gallery's full check clean.
3. A watch on vtest.avi against the same tracked query in process (what ``reid query``
   runs): frames per second of each.

The gallery holds ``--items`` items: the embeddings of every real crop of
``../shared/data/market1501-mini`` (2,265) and, to reach the count, noisy copies of them
(labelled as further items of the same people). Searches and enrolments upload real crops.

Run: ``python benchmarks/bench_serve.py --model models/demo`` (``--stand-in`` uses an
untrained stand-in model where no trained one is at hand; the figures then say so).
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

from reid.data.io import read_image
from reid.detect import default_detector
from reid.gallery import Gallery, ItemMeta
from reid.models import load_encoder, stand_in_model
from reid.pipeline import QueryConfig, QueryRun, open_source
from reid.serve import AdminKey, KeyStore, Service, Upload, crop_rules, load_serve_config

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
ADMIN = "bench-admin-key-0123456789abcdef"


def percentiles(seconds: list[float]) -> str:
    ms = np.asarray(seconds) * 1000
    return f"p50 {np.percentile(ms, 50):7.1f}  p95 {np.percentile(ms, 95):7.1f}  p99 {np.percentile(ms, 99):7.1f} ms"


def fill_gallery(folder: Path, encoder, crops: list[Path], items: int) -> None:  # type: ignore[no-untyped-def]
    """Every crop's embedding, then noisy copies up to ``items``."""
    features = []
    for start in range(0, len(crops), 64):
        features.append(encoder.embed([read_image(p) for p in crops[start : start + 64]]))
    real = np.concatenate(features)
    people = [p.name.split("_")[0] for p in crops]
    rng = np.random.default_rng(0)
    with Gallery.create(folder, encoder.card, thumbnails=False) as gallery:
        gallery.add(real, [ItemMeta(pid, source=p.name, image_hash=f"real-{p.name}") for pid, p in zip(people, crops)])
        extra = items - len(real)
        for start in range(0, max(extra, 0), 2048):
            count = min(2048, extra - start)
            rows = rng.integers(0, len(real), count)
            noisy = real[rows] + rng.normal(0, 0.05, (count, real.shape[1])).astype(np.float32)
            metas = [ItemMeta(people[r], source=f"copy-{start + n}", image_hash=f"copy-{start + n}") for n, r in enumerate(rows)]
            gallery.add(noisy, metas)


def unique_jpeg(path: Path, n: int) -> bytes:
    """The crop re-encoded so that its bytes are new (enrolment skips repeated bytes)."""
    image = Image.open(path).convert("RGB")
    shifted = image.crop((n % 3, (n // 3) % 3, image.width, image.height))
    buffer = io.BytesIO()
    shifted.save(buffer, "JPEG", quality=80 + n % 15)
    return buffer.getvalue()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(root: Path, model: Path, video: Path, threads: int) -> tuple[subprocess.Popen, str]:  # type: ignore[type-arg]
    port = free_port()
    config = root.parent / "serve.yaml"
    config.write_text(
        f"root: {root}\nmodels: {{m: {model}}}\nthreads: {threads}\nqueue: 64\n"
        f"watch_files: [{video}]\n"
    )
    env = {**os.environ, "REID_SERVE_ADMIN_KEY": ADMIN, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "reid", "serve", "--config", str(config), "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/ready", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("the server did not become ready in 300 s")


def run_clients(clients: int, total: int, call) -> tuple[float, list[float], int]:  # type: ignore[no-untyped-def]
    """``total`` calls spread over ``clients`` threads: (calls per second, latencies, errors)."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()

    def one(n: int) -> None:
        nonlocal errors
        tick = time.perf_counter()
        ok = call(n)
        took = time.perf_counter() - tick
        with lock:
            latencies.append(took)
            errors += 0 if ok else 1

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(total)))
    return total / (time.perf_counter() - started), latencies, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "demo")
    parser.add_argument("--stand-in", action="store_true", help="Use an untrained stand-in model (ResNet-18, 128x64).")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=64, help="Searches per concurrency level and side.")
    parser.add_argument("--seconds", type=float, default=60.0, help="Length of the mixed load.")
    parser.add_argument("--threads", type=int, default=4, help="The server's inference threads (and in-process threads).")
    parser.add_argument("--watch-frames", type=int, default=200)
    args = parser.parse_args()
    market, video = DATA / "market1501-mini", DATA / "video" / "vtest.avi"
    if not market.is_dir() or not video.is_file():
        raise SystemExit(f"real data not found beside the project ({DATA}); nothing measured")
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    model = args.model
    if args.stand_in:
        model = stand_in_model(work / "stand-in", "person", name="untrained-stand-in", threshold=0.5)
    elif not (model / "card.json").is_file():
        raise SystemExit(f"{model}: no trained model (run 'reid demo', or pass --stand-in)")
    encoder = load_encoder(model, device="cpu")
    crops = sorted(p for split in ("bounding_box_train", "bounding_box_test", "query") for p in (market / split).glob("*.jpg"))
    root = work / "root"
    root.mkdir()
    tick = time.perf_counter()
    fill_gallery(root / "bench", encoder, crops, args.items)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; model {encoder.card.name} "
          f"({'untrained stand-in' if args.stand_in else model}); gallery of {args.items} items from {len(crops)} real crops "
          f"(built in {time.perf_counter() - tick:.0f} s)")  # fmt: skip

    # Crops are searched whole on both sides; the watch detects people in the video frames.
    config = load_serve_config(None, root=str(root), models={"m": str(model)})
    models = {"m": encoder}
    service = Service(config, models, crop_rules(config, models), KeyStore(root / ".keys.json"), AdminKey(ADMIN, "bench"))
    queries = [(p.name, p.read_bytes()) for p in sorted((market / "query").glob("*.jpg"))]
    process, url = start_server(root, model, video, args.threads)
    headers = {"Authorization": f"Bearer {ADMIN}"}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=120, limits=httpx.Limits(max_connections=64)) as client:
            # 1. search: server against in process, the same searches.
            print("\nsearch (whole crops, top-5)        searches/s   latency")
            for clients in (1, 4, 16):
                def over_http(n: int) -> bool:
                    name, data = queries[n % len(queries)]
                    return client.post("/v1/galleries/bench/search", files={"image": (name, data, "image/jpeg")}).status_code == 200

                def in_process(n: int) -> bool:
                    name, data = queries[n % len(queries)]
                    return bool(service.search("bench", Upload(name, data)))

                run_clients(clients, min(args.searches, 8), over_http)  # warm up
                http_rate, http_lat, http_err = run_clients(clients, args.searches, over_http)
                local_rate, local_lat, _ = run_clients(min(clients, args.threads), args.searches, in_process)
                print(f"  {clients:2d} clients   server     {http_rate:8.1f}   {percentiles(http_lat)}   errors {http_err}")
                print(f"             in process {local_rate:8.1f}   {percentiles(local_lat)}")
                print(f"             ratio server / in process: {http_rate / local_rate:.2f}")

            # 2. mixed load.
            print(f"\nmixed load, {args.seconds:.0f} s: 4 enrolling, 12 searching, 1 deleting")
            stop = time.monotonic() + args.seconds
            enrolled: dict[str, int] = {}
            deleted: list[str] = []
            pending: list[str] = []
            lock = threading.Lock()
            counts = {"enrol": 0, "search": 0, "delete": 0, "errors": 0, "busy": 0}

            def note(kind: str, status: int) -> None:
                with lock:
                    counts[kind] += 1
                    if status == 503:
                        counts["busy"] += 1
                    elif status >= 400:
                        counts["errors"] += 1

            def enroller(worker: int) -> None:
                n = 0
                while time.monotonic() < stop:
                    identity = f"load-{worker}-{n}"
                    paths = [crops[(worker * 997 + n * 2 + k) % len(crops)] for k in range(2)]
                    parts = [("images", (f"{identity}-{k}.jpg", unique_jpeg(p, worker * 100_000 + n * 2 + k), "image/jpeg")) for k, p in enumerate(paths)]
                    r = client.post(f"/v1/galleries/bench/identities/{identity}/images", files=parts)
                    note("enrol", r.status_code)
                    if r.status_code == 200:
                        with lock:
                            enrolled[identity] = r.json()["added"]
                            pending.append(identity)
                    n += 1

            def searcher(worker: int) -> None:
                n = worker
                while time.monotonic() < stop:
                    name, data = queries[n % len(queries)]
                    note("search", client.post("/v1/galleries/bench/search", files={"image": (name, data, "image/jpeg")}).status_code)
                    n += 12

            def deleter() -> None:
                while time.monotonic() < stop:
                    with lock:
                        victim = pending.pop(0) if len(pending) > 4 else None
                    if victim is None:
                        time.sleep(0.2)
                        continue
                    r = client.delete(f"/v1/galleries/bench/identities/{victim}")
                    note("delete", r.status_code)
                    if r.status_code == 200:
                        with lock:
                            deleted.append(victim)

            workers = [threading.Thread(target=enroller, args=(w,)) for w in range(4)]
            workers += [threading.Thread(target=searcher, args=(w,)) for w in range(12)]
            workers.append(threading.Thread(target=deleter))
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            print(f"  requests: {counts['enrol']} enrol, {counts['search']} search, {counts['delete']} delete; "
                  f"errors {counts['errors']}, busy (503) {counts['busy']}")  # fmt: skip
            with Gallery.open(root / "bench") as gallery:
                present = {s.identity: s.items for s in gallery.identities()}
                wrong = [i for i, added in enrolled.items() if i not in deleted and present.get(i) != added]
                ghosts = [i for i in deleted if i in present]
                report = gallery.check(queries=200, k=10)
            kept = len(enrolled) - len(deleted)
            print(f"  afterwards: {kept} enrolled identities kept, each image once: {'yes' if not wrong else f'NO ({len(wrong)} wrong)'}; "
                  f"{len(deleted)} deleted, all gone: {'yes' if not ghosts else f'NO ({len(ghosts)} left)'}; "
                  f"gallery check clean ({report.items} items, recall@1 {report.recall.recall_at_1 if report.recall else 'n/a'})")  # fmt: skip

            # 3. a watch against the same tracked query in process.
            frames = args.watch_frames
            watch = client.post("/v1/watches", json={"gallery": "bench", "source": str(video), "max_frames": frames}).json()
            while (state := client.get(f"/v1/watches/{watch['id']}").json())["state"] not in ("done", "failed", "stopped"):
                time.sleep(0.5)
            with Gallery.open(root / "bench") as gallery:
                run = QueryRun(gallery, encoder, open_source(str(video), max_frames=frames), QueryConfig(detect="person"))
                for _ in run:
                    pass
            print(f"\nwatch on vtest.avi, {frames} frames, {default_detector('person')} person detector (reid's default), tracked")
            print(f"  watch (server) {state['fps']:6.2f} frames/s ({state['state']}, dropped {state['dropped']})")
            print(f"  in process     {run.stats.fps:6.2f} frames/s (reid query's QueryRun)")
            print(f"  ratio watch / in process: {state['fps'] / run.stats.fps:.2f}")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    main()
