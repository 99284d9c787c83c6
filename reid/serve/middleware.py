"""The service's middleware: the body limit (and the bound on bodies held at once), the
Host and Origin checks of a server without keys, one log line per request, and the
Prometheus metrics it counts."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reid.serve.config import ServeConfig, is_loopback
from reid.serve.http_errors import RETRY_AFTER, error_response
from reid.serve.pool import WorkerPool
from reid.serve.watches import Watch
from reid.text import whole_number

log = logging.getLogger("reid.serve")

# Methods that change nothing: a cross-site page may send them without asking (no CORS preflight).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# A Host header: a name or address ([...] for IPv6) and an optional port, nothing else.
HOST_HEADER = re.compile(r"(\[[0-9a-f:.]+\]|[^:\[\]@/\s]+)(?::\d{1,5})?")


class BodyLimit:
    """413 for a request body over ``limit`` bytes: at once when its Content-Length says
    so, else as soon as the bytes received pass it (the handler reading it gets the error).
    At most ``bodies`` requests with a body are in the application at once (each may hold
    its body, parsed, until it is answered); one more is answered 503 at once, so that the
    memory requests hold is bounded whatever the number of clients.  A body is taken only
    from a request whose key ``known`` knows (401 at once otherwise): a client without a
    key cannot hold those places by sending bodies slowly (a route reads a JSON body before
    it checks the key)."""

    def __init__(self, app: ASGIApp, limit: int, bodies: int, known: Callable[[str], bool]) -> None:
        self.app, self.limit, self.bodies, self.known = app, limit, bodies, known
        # Counted by the one event loop that runs this application.
        self._in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared not in (None, b"0") or b"transfer-encoding" in headers:
            scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
            if not self.known(token.strip() if scheme.lower() == "bearer" else ""):
                message = "no key, or an unknown one: send 'Authorization: Bearer KEY' (no body is read without one)"
                await error_response(401, message, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
            if self._in_flight >= self.bodies:
                message = f"{self.bodies} requests with a body are being handled, the most at once; retry shortly"
                await error_response(503, message, "busy", {"Retry-After": RETRY_AFTER})(scope, receive, send)
                return
            self._in_flight += 1
            try:
                await self._limited(scope, receive, send, declared)
            finally:
                self._in_flight -= 1
            return
        await self._limited(scope, receive, send, declared)

    async def _limited(self, scope: Scope, receive: Receive, send: Send, declared: bytes | None) -> None:
        if declared is not None:
            length = whole_number(declared.decode("latin-1"), 0)
            if length is None:
                await error_response(400, "Content-Length is not a number")(scope, receive, send)
                return
            if length > self.limit:
                await self._refuse(scope, receive, send)
                return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise HTTPException(413, f"request body over the limit of {self.limit} bytes")
            return message

        await self.app(scope, limited, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await error_response(413, f"request body over the limit of {self.limit} bytes")(scope, receive, send)


class HostAndOrigin:
    """What a server without keys (``--no-auth``, loopback only) needs so that a web page the
    operator visits cannot use it: a request whose ``Host`` is not a loopback name or
    address (or one of ``allowed_hosts``) is refused (DNS rebinding: an attacker's name
    resolved to 127.0.0.1), and so is a request that may change something (not GET, HEAD or
    OPTIONS) whose ``Origin`` is not this server's own or one of ``cors_origins`` (a
    cross-site form post, which browsers send without a CORS preflight).  With keys, only
    the Host check runs, and only when ``allowed_hosts`` names hosts."""

    def __init__(self, app: ASGIApp, config: ServeConfig) -> None:
        self.app = app
        self.hosts = frozenset(h.lower() for h in config.allowed_hosts)
        self.check_host = config.no_auth or bool(self.hosts)
        self.check_origin = config.no_auth
        self.origins = frozenset(o.rstrip("/").lower() for o in config.cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1").strip().lower()
        if self.check_host and not self.host_allowed(host):
            await error_response(400, "this server does not answer to that Host (allowed_hosts)")(scope, receive, send)
            return
        if self.check_origin and scope.get("method", "GET") not in SAFE_METHODS:
            origin = headers.get(b"origin")
            site = headers.get(b"sec-fetch-site", b"").decode("latin-1").lower()
            mine = {f"http://{host}", f"https://{host}"}
            seen = None if origin is None else origin.decode("latin-1").strip().rstrip("/").lower()
            if (seen is not None and seen not in mine and seen not in self.origins) or (
                site == "cross-site" and seen not in self.origins
            ):
                message = "cross-site request refused: its Origin is not this server (without keys, writes come from it only)"
                await error_response(403, message)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def host_allowed(self, host: str) -> bool:
        """A Host header naming a loopback name or address, or one of ``allowed_hosts`` (any port)."""
        parsed = HOST_HEADER.fullmatch(host)
        name = parsed.group(1).strip("[]") if parsed else ""
        return bool(name) and (name in self.hosts or is_loopback(name))


class RequestLog:
    """One log line per request (method, route, status, milliseconds, key id; never the
    key, the query string or any body) and the Prometheus counters."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            route = scope.get("route")
            # The route's template, not the path: paths hold gallery and identity names.
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            self.metrics.observe(method, template, status, seconds)
            log.info("%s %s %d %.1fms key=%s", method, template, status, seconds * 1000, scope.get("reid_key", "-"))


class Metrics:
    """The Prometheus metrics of one application (its own registry, no global state)."""

    def __init__(self, pool: WorkerPool) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "reid_serve_requests", "Requests answered.", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "reid_serve_request_seconds", "Seconds to answer a request.", ["route"], registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )  # fmt: skip
        self.queue = Gauge("reid_serve_queue_depth", "Inference calls running or waiting.", registry=self.registry)
        self.queue.set_function(lambda: pool.depth)
        self.refused = Counter("reid_serve_refused_busy", "Requests refused with 503: pool full.", registry=self.registry)
        self.watch_fps = Gauge("reid_serve_watch_fps", "Frames a watch answers per second.", ["watch"], registry=self.registry)
        self.watch_dropped = Gauge(
            "reid_serve_watch_dropped_frames", "Frames a live watch dropped, behind its source.", ["watch"],
            registry=self.registry,
        )  # fmt: skip

    def watches(self, watches: list[Watch]) -> None:
        for watch in watches:
            self.watch_fps.labels(watch.id).set(watch.fps)
            self.watch_dropped.labels(watch.id).set(watch.dropped)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(route).observe(seconds)
        if status == 503:
            self.refused.inc()
