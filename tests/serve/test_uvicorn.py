"""The service over a real socket: uvicorn on 127.0.0.1 and a free port.  Search and enrol
with the request log (in this process); ``reid serve`` processes (slow: each imports
PyTorch) for kill -9 in the middle of an enrolment and two servers sharing one gallery."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_helpers import ADMIN, Server, b64, bearer, files, serve_root, uvicorn_in_thread

from reid.gallery import Gallery
from reid.models import Encoder

@pytest.fixture
def server_factory(tmp_path: Path, model_folder: Path, encoder: object) -> Iterator:  # type: ignore[type-arg]
    started: list[Server] = []

    def start(root: Path, *extra: str) -> Server:
        server = Server(root, model_folder, tmp_path / f"server-{len(started)}.log", extra)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _train_crops(market1501_mini: Path, count: int) -> list[Path]:
    return sorted((market1501_mini / "bounding_box_train").glob("*.jpg"))[:count]


def test_search_and_enrol_over_a_socket_with_one_log_line_each(
    tmp_path: Path, model_folder: Path, encoder: Encoder, crops: dict[str, list[Path]], caplog: pytest.LogCaptureFixture
) -> None:
    service, _ = serve_root(tmp_path / "root", model_folder, encoder)
    first, second = list(crops)[:2]
    caplog.set_level(logging.INFO, logger="reid.serve")
    with uvicorn_in_thread(service) as url, httpx.Client(base_url=url, headers=bearer(ADMIN), timeout=60) as client:
        assert client.post("/v1/galleries", json={"name": "staff"}).status_code == 201
        token = client.post("/v1/keys", json={"gallery": "staff", "scopes": ["read", "write"]}).json()["key"]
        enrolled = client.post(
            "/v1/galleries/staff/identities/alice/images", files=files(crops[first][:2]), headers=bearer(token)
        )
        assert enrolled.status_code == 200 and enrolled.json()["added"] == 2
        hit = client.post(
            "/v1/galleries/staff/search", files=files(crops[first][:1], "image"), data={"threshold": "0.05"},
            headers=bearer(token),
        ).json()["subjects"][0]  # fmt: skip
        assert hit["identity"] == "alice" and hit["distance"] < 1e-3
        miss = client.post(
            "/v1/galleries/staff/search", json={"image": b64(crops[second][0]), "threshold": 0.05}, headers=bearer(token)
        ).json()["subjects"][0]
        assert miss["decision"] == "unknown"
        assert client.get("/v1/galleries/staff", headers=bearer("rk_000000000000_" + "y" * 43)).status_code == 401
    log = "\n".join(r.getMessage() for r in caplog.records if r.name == "reid.serve")
    lines = [line for line in log.splitlines() if "/v1/galleries/{gallery}/search" in line]
    assert len(lines) == 2 and all(" 200 " in line and f"key={token.split('_')[1]}" in line for line in lines)
    assert "POST /v1/galleries/{gallery}/identities/{identity}/images 200" in log
    assert "GET /v1/galleries/{gallery} 401" in log
    # Never a key, an identity or an image name in the log.
    assert token not in log and ADMIN not in log and "alice" not in log and crops[first][0].name not in log


@pytest.mark.slow
def test_reid_serve_logs_one_line_per_request(tmp_path: Path, server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(tmp_path / "root")
    with server.client() as client:
        assert client.get("/v1/galleries").status_code == 200
        assert client.get("/v1/galleries/none").status_code == 404
    log = server.stop()
    assert "GET /v1/galleries 200" in log and "key=admin" in log and "GET /v1/galleries/{gallery} 404" in log
    assert ADMIN not in log and "none" not in log.split("GET /v1/galleries/{gallery} 404")[1].splitlines()[0]


@pytest.mark.slow
def test_kill_9_during_an_enrolment_leaves_the_gallery_whole(
    tmp_path: Path, server_factory, market1501_mini: Path  # type: ignore[no-untyped-def]
) -> None:
    root = tmp_path / "root"
    batch = _train_crops(market1501_mini, 40)
    server = server_factory(root)
    with server.client() as client:
        client.post("/v1/galleries", json={"name": "g"})
        first = client.post("/v1/galleries/g/identities/before/images", files=files(batch[:2])).json()
        assert first["added"] == 2
        outcome: list[object] = []

        def enrol() -> None:
            try:
                outcome.append(client.post("/v1/galleries/g/identities/during/images", files=files(batch[2:])).status_code)
            except httpx.HTTPError as exc:
                outcome.append(type(exc).__name__)

        before = {path.name for path in (root / "g").iterdir()}
        sending = threading.Thread(target=enrol)
        sending.start()
        # Kill as the batch's first file appears: the server is then inside the commit.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sending.is_alive():
            if any(n.lstrip(".").startswith("seg-") for n in {path.name for path in (root / "g").iterdir()} - before):
                break
            time.sleep(0.002)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(20)
        sending.join(30)
    with Gallery.open(root / "g") as gallery:
        report = gallery.check(queries=10, k=3)
        during = len(gallery.items("during"))
        # One request is one batch: all of it or none of it.
        assert during in (0, len(batch) - 2)
        assert len(gallery.items("before")) == 2 and report.items == 2 + during
    again = server_factory(root)
    with again.client() as client:
        assert client.get("/v1/galleries/g").json()["items"] == 2 + during
        redo = client.post("/v1/galleries/g/identities/during/images", files=files(batch[2:])).json()
        assert redo["added"] + redo["duplicates"] == len(batch) - 2 and redo["duplicates"] == during
    with Gallery.open(root / "g") as gallery:
        assert gallery.check(queries=10, k=3).items == len(batch)


@pytest.mark.slow
def test_two_servers_share_one_gallery(
    tmp_path: Path, server_factory, market1501_mini: Path  # type: ignore[no-untyped-def]
) -> None:
    root = tmp_path / "root"
    crops = _train_crops(market1501_mini, 24)
    one, two = server_factory(root), server_factory(root)
    with one.client() as a, two.client() as b:
        assert a.post("/v1/galleries", json={"name": "g"}).status_code == 201
        # A key made through one server works on the other: they share the keys file.
        token = a.post("/v1/keys", json={"gallery": "g", "scopes": ["read", "write"]}).json()["key"]
        assert b.post("/v1/galleries/g/identities/x/images", files=files(crops[:2]), headers=bearer(token)).json()["added"] == 2
        found = a.post("/v1/galleries/g/search", files=files(crops[:1], "image"), data={"threshold": "0.05"})
        assert found.json()["subjects"][0]["identity"] == "x"
        # Both enrol at once, different people: every image lands exactly once.
        answers: list[int] = []

        def enrol(client: httpx.Client, name: str, part: list[Path]) -> None:
            for start in range(0, len(part), 2):
                r = client.post(f"/v1/galleries/g/identities/{name}/images", files=files(part[start : start + 2]))
                answers.append(r.json()["added"])

        threads = [threading.Thread(target=enrol, args=(a, "p", crops[2:13])), threading.Thread(target=enrol, args=(b, "q", crops[13:24]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert sum(answers) == 22
        assert a.get("/v1/galleries/g").json()["items"] == b.get("/v1/galleries/g").json()["items"] == 24
        assert b.delete("/v1/galleries/g/identities/x").json()["items"] == 2
        gone = a.post("/v1/galleries/g/search", files=files(crops[:1], "image"), data={"threshold": "0.05"})
        assert gone.json()["subjects"][0]["identity"] != "x"
        assert a.patch("/v1/galleries/g/identities/p", json={"name": "renamed"}).status_code == 200
        assert [i["identity"] for i in b.get("/v1/galleries/g/identities").json()["identities"]] == ["q", "renamed"]
    with Gallery.open(root / "g") as gallery:
        assert gallery.check(queries=10, k=3).items == 22


@pytest.mark.slow
def test_several_workers_serve_one_root(tmp_path: Path, server_factory, market1501_mini: Path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(tmp_path / "root", "--workers", "2")
    crops = _train_crops(market1501_mini, 8)
    with server.client() as client:
        assert client.post("/v1/galleries", json={"name": "g"}).status_code == 201
        for start in range(0, 8, 2):
            assert client.post("/v1/galleries/g/identities/p/images", files=files(crops[start : start + 2])).json()["added"] == 2
        # Whichever worker answers, it sees every commit.
        assert {client.get("/v1/galleries/g").json()["items"] for _ in range(12)} == {8}
    log = server.stop()
    assert log.count("Application startup complete.") >= 2 and "died" not in log
