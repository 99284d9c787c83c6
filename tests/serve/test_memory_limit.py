"""The server's memory, bounded by design (:func:`reid.serve.connections.memory_budget`):
``reid serve`` in a memory-limited control group of its idle memory plus that budget
takes the requests that took it down before (many large photos enrolled at once, float
images declaring more than they send, big JSON bodies, all at once) and answers every one
without being killed.  Skipped with the reason where no memory-limited group can be made
(not root, no cgroup file system)."""

from __future__ import annotations

import base64
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import httpx
import numpy as np
import pytest
from memory_cgroup import NoCgroup, memory_cgroup
from serve_helpers import ADMIN, Server, bearer

from reid.data.io import ImageLimits
from reid.models import Encoder
from reid.serve import load_serve_config
from reid.serve.connections import memory_budget

MIB = 1 << 20
# Small limits, so that what held every photo of a request (40 photos of 8 megapixels:
# about a gigabyte a request) is far over the budget, and the test is quick.
# Room for every request of the attack at once (threads + queue requests with a body).
SETTINGS = {"threads": 2, "queue": 4, "max_body_bytes": 16 * MIB, "max_images": 40}
MAX_PIXELS = 8_000_000
PHOTOS = 40


def grey_photo(seed: int) -> bytes:
    """A PNG of a few kilobytes that decodes to 8 megapixels (24 MB as RGB)."""
    side = int(MAX_PIXELS**0.5)
    image = np.full((side, side), 60 + seed, np.uint8)
    image[seed * 10 : seed * 10 + 40] = 250
    return cv2.imencode(".png", image)[1].tobytes()


def noise_png(megabytes: int) -> bytes:
    """A PNG of noise: about ``megabytes`` of file, that many megapixels / 3 decoded."""
    side = int((megabytes * MIB / 3) ** 0.5)
    image = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    return cv2.imencode(".png", image, [cv2.IMWRITE_PNG_COMPRESSION, 0])[1].tobytes()


def test_the_server_stays_within_its_memory_budget_under_the_requests_that_took_it_down(
    tmp_path: Path, model_folder: Path, encoder: Encoder
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    config_file = tmp_path / "serve.yaml"
    config_file.write_text(json.dumps(SETTINGS))
    budget = memory_budget(load_serve_config(None, root=str(root), **SETTINGS), ImageLimits(max_pixels=MAX_PIXELS))
    try:
        group_context = memory_cgroup(4096 * MIB)
        group = group_context.__enter__()
    except NoCgroup as exc:
        pytest.skip(f"no memory-limited control group here: {exc}")
    try:
        server = Server(
            root, model_folder, tmp_path / "server.log", ("--config", str(config_file)), preexec=group.preexec,
            env={"REID_MAX_IMAGE_PIXELS": str(MAX_PIXELS)},
        )  # fmt: skip
        try:
            with server.client() as admin:
                assert admin.post("/v1/galleries", json={"name": "g"}).status_code == 201
            time.sleep(1)
            idle = group.current()
            group_limit = idle + budget
            limit_file = "memory.max" if group.version == 2 else "memory.limit_in_bytes"
            (group.path / limit_file).write_text(str(group_limit))
            if group.version == 1 and (group.path / "memory.memsw.limit_in_bytes").is_file():
                (group.path / "memory.memsw.limit_in_bytes").write_text(str(group_limit))
            group.reset_peak()
            answers = attack(server.url)
            assert server.process.poll() is None and group.oom_killed() == 0, server.log.read_text()[-2000:]
            # Both enrolments and both JSON searches answered; the float images refused from their headers.
            assert answers == [200, 200, 422, 422, 200, 200], answers
            with httpx.Client(base_url=server.url, timeout=30) as client:
                assert client.get("/v1/health").status_code == 200
            peak = group.peak()
        finally:
            log = server.stop()
    finally:
        group_context.__exit__(None, None, None)
    assert "Traceback" not in log
    assert peak - idle <= budget, f"peak {peak / MIB:.0f} MiB over idle {idle / MIB:.0f} MiB, budget {budget / MIB:.0f} MiB"


def attack(url: str) -> list[int]:
    """Every kind of request that took memory without bound, at once; the statuses."""
    photos = [("images", (f"p{n}.png", grey_photo(n), "image/png")) for n in range(PHOTOS)]
    hdr = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 20000 +X 20000\n" + b"\x02\x02\x00\x80" * 50_000
    pfm = b"PF\n20000 20000\n-1.0\n" + bytes(200_000)
    big = base64.b64encode(noise_png(11)).decode()

    def enrol(n: int) -> int:
        with httpx.Client(base_url=url, headers=bearer(ADMIN), timeout=600) as client:
            return client.post(f"/v1/galleries/g/identities/person{n}/images", files=photos).status_code

    def search(payload: bytes, name: str) -> int:
        with httpx.Client(base_url=url, headers=bearer(ADMIN), timeout=600) as client:
            return client.post("/v1/galleries/g/search", files=[("image", (name, payload, "image/png"))]).status_code

    def search_json() -> int:
        with httpx.Client(base_url=url, headers=bearer(ADMIN), timeout=600) as client:
            body = {"image": {"name": "big.png", "data": big}}
            return client.post("/v1/galleries/g/search", json=body).status_code

    with ThreadPoolExecutor(8) as pool:
        jobs = [pool.submit(enrol, n) for n in range(2)]
        jobs += [pool.submit(search, hdr, "x.hdr"), pool.submit(search, pfm, "x.pfm")]
        jobs += [pool.submit(search_json) for _ in range(2)]
        return [job.result() for job in jobs]

