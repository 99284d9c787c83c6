"""What one client can hold of a server, over real sockets on loopback: connections that
send their request slowly are closed at their deadline, connections beyond the cap are
closed at once, a client hanging up mid-upload is one log line, and a flood of failures
writes one line per kind."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from serve_helpers import ADMIN, bearer, serve_root, uvicorn_in_thread

from reid.models import Encoder
from reid.serve.connections import DeadlineProtocol, OneLinePerKind, connection_budget, raise_open_file_limit

SLOW_CLIENTS = 60


class QuickDeadlines(DeadlineProtocol):
    head_seconds = 1.0
    body_seconds = 2.0
    max_connections = 40


def _slow_client(url: str, first: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(first)
    return sock


def _until(reached: Callable[[], bool], failure: str, seconds: float = 30.0) -> None:
    """Poll until the server reaches a state its own threads bring about, however slow the
    machine; ``seconds`` only bounds a test that would otherwise hang."""
    deadline = time.monotonic() + seconds
    while not reached():
        assert time.monotonic() < deadline, failure
        time.sleep(0.05)


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes ``sock`` (EOF or reset) within ``seconds``."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except (TimeoutError, socket.timeout):
        return False
    except OSError:
        return True
    return True


def test_slow_request_heads_and_bodies_are_closed_at_their_deadline_and_others_are_answered(
    tmp_path: Path, model_folder: Path, encoder: Encoder, caplog: pytest.LogCaptureFixture
) -> None:
    service, _ = serve_root(tmp_path / "root", model_folder, encoder)
    caplog.set_level(logging.WARNING, logger="reid.serve")
    with uvicorn_in_thread(service, QuickDeadlines) as url:
        # A header line, then nothing more: each holds a connection until its deadline.
        heads = [_slow_client(url, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n") for _ in range(SLOW_CLIENTS // 2)]
        # A whole head announcing a body that never comes.
        bodies = [
            _slow_client(url, b"POST /v1/galleries HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            for _ in range(SLOW_CLIENTS // 2)
        ]
        started = time.monotonic()
        # Over the cap of 40: each new one closed the connection that had waited longest
        # for its head, the first heads.
        assert all(_closed_within(s, 0.5) for s in heads[: SLOW_CLIENTS - QuickDeadlines.max_connections])
        assert all(_closed_within(s, 5) for s in heads + bodies)
        assert time.monotonic() - started < 10
        # Dripping one byte a second does not move the deadline.
        drip = _slow_client(url, b"GET /v1/health HTTP/1.1\r\n")
        for _ in range(3):
            time.sleep(0.5)
            try:
                drip.sendall(b"X")
            except OSError:
                break
        assert _closed_within(drip, 3)
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/v1/health").status_code == 200
            # A keep-alive connection answers its next request after a wait shorter than the deadline.
            time.sleep(0.3)
            assert client.get("/v1/health").status_code == 200
        for s in [*heads, *bodies, drip]:
            s.close()
    messages = [r.getMessage() for r in caplog.records if r.name == "reid.serve" and r.levelno >= logging.WARNING]
    assert any("was not complete within 1 s" in m for m in messages)
    assert any("connections open, the most this server keeps" in m for m in messages)


def test_a_client_holding_every_connection_idle_keeps_no_one_out(
    tmp_path: Path, model_folder: Path, encoder: Encoder
) -> None:
    service, _ = serve_root(tmp_path / "root", model_folder, encoder)
    with uvicorn_in_thread(service, QuickDeadlines) as url:
        host, port = url.removeprefix("http://").split(":")
        # Connections that send nothing, more than the cap, re-opened as they are closed.
        idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(QuickDeadlines.max_connections + 5)]
        answered = 0
        for _ in range(5):
            with httpx.Client(base_url=url, timeout=5) as client:
                answered += client.get("/v1/health").status_code == 200
            idle += [socket.create_connection((host, int(port)), timeout=10) for _ in range(10)]
        assert answered == 5
        for s in idle:
            s.close()


def test_a_client_hanging_up_mid_upload_is_one_log_line_without_a_traceback(
    tmp_path: Path, model_folder: Path, encoder: Encoder, caplog: pytest.LogCaptureFixture
) -> None:
    service, _ = serve_root(tmp_path / "root", model_folder, encoder)
    caplog.set_level(logging.INFO)
    with uvicorn_in_thread(service) as url:
        with httpx.Client(base_url=url, headers=bearer(ADMIN), timeout=30) as client:
            assert client.post("/v1/galleries", json={"name": "staff"}).status_code == 201
        for route in ("/v1/galleries/staff/identities/alice/images", "/v1/galleries/staff/search"):
            boundary = b"b0undary"
            head = (
                f"POST {route} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n"
                f"Content-Type: multipart/form-data; boundary={boundary.decode()}\r\nContent-Length: 1000000\r\n\r\n"
            ).encode()
            part = b"--" + boundary + b'\r\nContent-Disposition: form-data; name="images"; filename="a.jpg"\r\n\r\n'
            sock = _slow_client(url, head + part + b"\xff" * 300_000)
            time.sleep(0.5)
            sock.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(" 499 " in r.getMessage() for r in caplog.records) < 2:
            time.sleep(0.1)
    lines = [r.getMessage() for r in caplog.records]
    assert sum(" 499 " in line for line in lines) == 2, lines
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records if r.exc_info]
    assert not any(r.levelno >= logging.ERROR for r in caplog.records), lines


def test_a_flood_of_failures_is_one_line_per_kind_per_interval() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("reid.serve.tests.flood")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = Keep()
    now = [0.0]
    handler.addFilter(OneLinePerKind(interval=60, clock=lambda: now[0]))
    logger.addHandler(handler)
    try:
        for n in range(10_000):
            try:
                raise OSError(24, "Too many open files")
            except OSError:
                logger.exception("socket.accept() out of system resource")
            logger.warning("connection closed: the request %s was not complete within %g s", "head", 10)
            logger.info("GET /v1/health 200 %d", n)
        now[0] = 61.0
        logger.warning("connection closed: the request %s was not complete within %g s", "head", 10)
    finally:
        logger.removeHandler(handler)
    warnings = [r for r in records if r.levelno >= logging.WARNING]
    assert len(warnings) == 3 and sum(r.levelno == logging.INFO for r in records) == 10_000
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in warnings)
    assert warnings[0].getMessage() == "socket.accept() out of system resource: OSError: [Errno 24] Too many open files"
    assert warnings[2].getMessage().endswith("(and 9999 more like it in the last 60 s)")


def test_the_open_file_limit_leaves_room_for_the_connections() -> None:
    allowed = raise_open_file_limit(DeadlineProtocol.max_connections)
    assert 16 <= allowed <= DeadlineProtocol.max_connections and allowed <= connection_budget()


def test_requests_holding_a_body_are_bounded_and_one_more_is_refused_at_once(
    tmp_path: Path, model_folder: Path, encoder: Encoder
) -> None:
    service, _ = serve_root(tmp_path / "root", model_folder, encoder, threads=1, queue=1)
    head = f"POST /v1/galleries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\n"
    with uvicorn_in_thread(service, QuickDeadlines) as url:
        # Two bodies arriving slowly: as many as one thread and one place in the queue hold.
        held = [_slow_client(url, (head + "Content-Length: 100\r\n\r\n{").encode()) for _ in range(2)]
        with httpx.Client(base_url=url, headers=bearer(ADMIN), timeout=10) as client:
            # A body that creates nothing: refused while both places are held, else a 4xx.
            def probe() -> int:
                return client.post("/v1/galleries", content=b"{", headers={"Content-Type": "application/json"}).status_code

            # The server's thread takes the two bodies when the machine lets it: wait for that, not a fixed time.
            _until(lambda: probe() == 503, "the two slow bodies were never held")
            refused = client.post("/v1/galleries", json={"name": "g"})
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["code"] == "busy"
            # Requests without a body are not held back.
            assert client.get("/v1/galleries").status_code == 200
            for s in held:
                s.close()
            _until(lambda: probe() != 503, "closing the slow bodies gave no place back")
            assert client.post("/v1/galleries", json={"name": "g"}).status_code == 201


def test_a_client_without_a_key_holds_no_place_for_a_body(tmp_path: Path, model_folder: Path, encoder: Encoder) -> None:
    service, _ = serve_root(tmp_path / "root", model_folder, encoder, threads=1, queue=1)
    with uvicorn_in_thread(service, QuickDeadlines) as url:
        # A JSON route reads its body before its key is checked: these bodies never finish.
        slow = [
            _slow_client(url, f"POST /v1/galleries HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
                              "Content-Length: 100000\r\n\r\n{".encode())
            for auth in ("", "Authorization: Bearer rk_nope_nope\r\n", "Authorization: Basic YTpi\r\n") * 2
        ]  # fmt: skip
        for sock in slow:
            sock.settimeout(5)
            assert sock.recv(4096).startswith(b"HTTP/1.1 401 ")
        with httpx.Client(base_url=url, headers=bearer(ADMIN), timeout=10) as client:
            assert client.post("/v1/galleries", json={"name": "g"}).status_code == 201
        for sock in slow:
            sock.close()
