"""The memory of `reid serve` per request, at its documented limits: peak memory of the
server process (its peak resident memory, reset before each request) for the worst
request of each route, beside its idle memory, and each peak as a share of the budget
(:func:`reid.serve.connections.memory_budget`); the process runs in a memory-limited
control group of its idle memory plus that budget.

Worst requests, each alone on an idle server: enrolment of ``--photos`` grey photos of the
pixel limit (120 MP: a PNG of a few hundred kilobytes, 360 MB decoded as RGB); search,
embed and verify of such photos; search of a Radiance HDR at its limit (30 MP of 4-byte
floats); search with a JSON body at ``max_body_bytes`` (64 MiB: base64 of a noise PNG);
the identities page of 1,000; then ``threads`` searches of limit-sized photos at once.  A
request the limits refuse (an HDR declaring 20000 x 20000) is timed too.

Run: ``python benchmarks/bench_serve_memory.py`` (as root, where control groups can be
made; ``--model`` a model folder, else an untrained stand-in: memory hardly depends on it).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "serve"))

from memory_cgroup import NoCgroup, memory_cgroup  # noqa: E402
from serve_helpers import ADMIN, Server, bearer, build_model  # noqa: E402

from reid.data.io import ImageLimits  # noqa: E402
from reid.serve import load_serve_config  # noqa: E402
from reid.serve.connections import memory_budget  # noqa: E402

MIB = 1 << 20


def grey_png(pixels: int, seed: int) -> bytes:
    side = int(pixels**0.5)
    image = np.full((side, side), 50 + seed, np.uint8)
    image[::101] = 255
    return cv2.imencode(".png", image)[1].tobytes()


def hdr(pixels: int) -> bytes:
    side = int(pixels**0.5)
    return cv2.imencode(".hdr", np.full((side, side, 3), 0.5, np.float32))[1].tobytes()


def rss(pid: int, field: str) -> int:
    """A process's resident memory (``VmRSS``) or its peak since the last reset (``VmHWM``), bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


def reset_peak(pid: int) -> None:
    """Start the process's peak resident memory again from its current (Linux: clear_refs 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def json_body(limit: int) -> dict[str, object]:
    """A search body just under ``limit`` bytes: base64 of an uncompressed noise PNG."""
    raw = int(limit * 0.74)
    side = int((raw / 3) ** 0.5)
    noise = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    png = cv2.imencode(".png", noise, [cv2.IMWRITE_PNG_COMPRESSION, 0])[1].tobytes()
    return {"image": {"name": "big.png", "data": base64.b64encode(png).decode()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a model folder (default: an untrained stand-in)")
    parser.add_argument("--photos", type=int, default=8, help="photos in the enrolment (each decodes to 360 MB)")
    args = parser.parse_args()
    limits = ImageLimits()
    work = Path(tempfile.mkdtemp(prefix="bench-serve-memory-"))
    model = args.model or build_model(work / "model")
    root = work / "root"
    root.mkdir()
    config = load_serve_config(None, root=str(root))
    budget = memory_budget(config, limits)
    print(f"limits: threads {config.threads}, queue {config.queue}, max_body_bytes {config.max_body_bytes // MIB} MiB, "
          f"max_images {config.max_images}, max_pixels {limits.max_pixels:,}; budget {budget / MIB:,.0f} MiB above idle")
    photo = grey_png(limits.max_pixels, 0)
    try:
        group_context = memory_cgroup(64 << 30)
        group = group_context.__enter__()
    except NoCgroup as exc:
        sys.exit(f"no memory-limited control group here: {exc}")
    try:
        server = Server(root, model, work / "server.log", ("--threads", str(config.threads)), preexec=group.preexec)
        client = httpx.Client(base_url=server.url, headers=bearer(ADMIN), timeout=1800)
        try:
            client.post("/v1/galleries", json={"name": "g"}).raise_for_status()
            few = [("images", (f"s{n}.png", grey_png(100_000, n), "image/png")) for n in range(3)]
            client.post("/v1/galleries/g/identities/known/images", files=few).raise_for_status()
            time.sleep(1)
            pid = server.process.pid
            idle, idle_group = rss(pid, "VmRSS"), group.current()
            limit = idle_group + budget
            (group.path / ("memory.max" if group.version == 2 else "memory.limit_in_bytes")).write_text(str(limit))
            print(f"idle: {idle / MIB:,.0f} MiB resident (control group: {idle_group / MIB:,.0f} MiB with page cache); "
                  f"limit {limit / MIB:,.0f} MiB (cgroup v{group.version}, {'its own' if args.model else 'stand-in'} model)")
            print(f"{'request':58} {'status':>6} {'seconds':>8} {'peak over idle':>14} {'of budget':>9} {'kept after':>13}")

            def measure(name: str, send: Callable[[], list[int]]) -> None:
                reset_peak(pid)
                started = time.perf_counter()
                statuses = send()
                seconds = time.perf_counter() - started
                over, kept = rss(pid, "VmHWM") - idle, rss(pid, "VmRSS") - idle
                shown = ",".join(str(s) for s in sorted(set(statuses)))
                print(f"{name:58} {shown:>6} {seconds:8.1f} {over / MIB:10,.0f} MiB {over / budget:9.1%} {kept / MIB:9,.0f} MiB")
                if server.process.poll() is not None or group.oom_killed():
                    sys.exit("the server was killed")

            def post(path: str, **kwargs: object) -> Callable[[], list[int]]:
                return lambda: [client.post(path, **kwargs).status_code]  # type: ignore[arg-type]

            # Smallest first: a process keeps some of what a request freed, so a larger request
            # before a smaller one would hide the smaller one's peak.
            search, big = "/v1/galleries/g/search", ("a.png", photo, "image/png")
            declared = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 20000 +X 20000\n" + b"\x02\x02\x00\x80" * 1000
            measure("POST .../search: HDR declaring 20000 x 20000 (refused)",
                    post(search, files=[("image", ("b.hdr", declared, "image/vnd.radiance"))]))
            listing = {"limit": 1000}
            measure("GET .../identities?limit=1000",
                    lambda: [client.get("/v1/galleries/g/identities", params=listing).status_code])
            body = json.dumps(json_body(config.max_body_bytes))
            as_json = {**bearer(ADMIN), "Content-Type": "application/json"}
            measure(f"POST .../search: JSON body of {len(body) / MIB:.0f} MiB", post(search, content=body, headers=as_json))
            floats = ("a.hdr", hdr(limits.max_pixels // 4), "image/vnd.radiance")
            measure("POST .../search: Radiance HDR of 30 MP (4-byte floats)", post(search, files=[("image", floats)]))
            measure("POST .../search: a photo of 120 MP", post(search, files=[("image", big)]))
            measure("POST .../embed: a photo of 120 MP", post("/v1/galleries/g/embed", files=[("image", big)]))
            other = ("b.png", grey_png(limits.max_pixels, 9), "image/png")
            measure("POST .../verify: two photos of 120 MP",
                    post("/v1/galleries/g/verify", files=[("image", big), ("other", other)]))
            enrol = [("images", (f"p{n}.png", grey_png(limits.max_pixels, n + 1), "image/png")) for n in range(args.photos)]
            measure(f"POST .../identities/{{id}}/images: {args.photos} photos of 120 MP",
                    post("/v1/galleries/g/identities/big/images", files=enrol))

            def at_once() -> list[int]:
                one = post(search, files=[("image", big)])
                with ThreadPoolExecutor(config.threads) as pool:
                    return [status for statuses in pool.map(lambda _: one(), range(config.threads)) for status in statuses]

            measure(f"{config.threads} searches of 120 MP photos at once", at_once)
            print(f"control group peak over idle, page cache included: {(group.peak() - idle_group) / MIB:,.0f} MiB "
                  f"of {budget / MIB:,.0f} MiB; killed: {group.oom_killed()}")
        finally:
            client.close()
            server.stop()
    finally:
        group_context.__exit__(None, None, None)


if __name__ == "__main__":
    main()
