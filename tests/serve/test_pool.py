"""The bounded pool: calls beyond threads + queue are refused at once, as 503 with Retry-After."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from serve_helpers import files, serve_root

from reid.gallery.lock import gallery_lock
from reid.models import Encoder
from reid.serve import create_app
from reid.serve.pool import PoolFull, WorkerPool


def test_the_pool_refuses_past_threads_plus_queue() -> None:
    pool = WorkerPool(threads=1, queue=1)
    release = threading.Event()

    async def scenario() -> list[object]:
        first = asyncio.ensure_future(pool.run(release.wait, 10))
        second = asyncio.ensure_future(pool.run(release.wait, 10))
        await asyncio.sleep(0.05)
        assert pool.depth == 2
        with pytest.raises(PoolFull):
            await pool.run(lambda: None)
        release.set()
        done = await asyncio.gather(first, second)
        assert pool.depth == 0
        return [*done, await pool.run(lambda: "again")]

    assert asyncio.run(scenario()) == [True, True, "again"]
    pool.close()


def test_a_full_pool_answers_503_with_retry_after(
    tmp_path: Path, model_folder: Path, encoder: Encoder, crops: dict[str, list[Path]]
) -> None:
    pool = WorkerPool(threads=1, queue=0)
    service, _ = serve_root(tmp_path / "root", model_folder, encoder, no_auth=True, lock_timeout=20.0)
    photos = files(next(iter(crops.values()))[:1])
    with TestClient(create_app(service, pool), base_url="http://127.0.0.1:8000") as client:
        assert client.post("/v1/galleries", json={"name": "g"}).status_code == 201
        answers: list[int] = []
        # Another process holds the gallery's lock: the one thread waits on it.
        with gallery_lock(tmp_path / "root" / "g", exclusive=True):
            waiting = threading.Thread(
                target=lambda: answers.append(client.post("/v1/galleries/g/identities/a/images", files=photos).status_code)
            )
            waiting.start()
            deadline = time.monotonic() + 20
            while pool.depth < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            refused = client.post("/v1/galleries/g/search", files=files(next(iter(crops.values()))[:1], "image"))
        waiting.join(30)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "busy"
        assert answers == [200]
        assert client.get("/v1/galleries/g").json()["items"] == 1
