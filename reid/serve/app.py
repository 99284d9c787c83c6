"""The FastAPI application: routes under ``/v1``, keys and scopes, the body limit, JSON
errors, one log line per request, Prometheus metrics.

Build it with :func:`create_app` from a loaded :class:`~reid.serve.service.Service` (so the
models are loaded before any port opens).  Every route is a thin layer: check the key,
read the request, run one service method on the worker pool, return its answer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reid.errors import ConfigError, GalleryError, NameTakenError, ReidError
from reid.names import IDENTITY_ID
from reid.serve import schemas
from reid.serve.config import ServeConfig, is_loopback
from reid.serve.connections import memory_budget
from reid.serve.keys import ApiKey
from reid.serve.pool import PoolFull, WorkerPool
from reid.serve.redact import hide_paths
from reid.serve.service import ServeError, Service, Upload
from reid.serve.watches import Watch
from reid.text import real_number, whole_number

log = logging.getLogger("reid.serve")

CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
    409: "conflict", 413: "too_large", 415: "unsupported_media_type", 422: "invalid", 503: "busy",
}  # fmt: skip
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": schemas.ErrorBody, "description": CODES[status]} for status in (401, 403, 404, 409, 413, 422, 503)
}
IMAGE_FIELDS = {"image": "The photo.", "other": "A second photo (verify)."}
RETRY_AFTER = "1"
STATIC = Path(__file__).with_name("static")
# The page loads nothing from elsewhere; the browser is told to hold it to that.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' blob:; style-src 'self'; script-src 'self'",
    "X-Content-Type-Options": "nosniff",
}
# How often an event stream looks for new events, and how long it stays silent at most.
SSE_POLL, SSE_KEEPALIVE = 0.2, 15.0
# Event streams one key holds open at once (a live watch's stream never ends by itself:
# without a bound, one read key holds every connection the process keeps).
STREAMS_PER_KEY = 4
# Item ids are SQLite row ids: positive 64-bit integers.
ITEM_ID = PathParam(ge=1, le=2**63 - 1)
# An identity's id (reid.names.identity_id): hexadecimal digits, never a path.
IDENT = PathParam(pattern=f"^{IDENTITY_ID.pattern}$", description="The identity's id (its 'id' in a listing).")
# Methods that change nothing: a cross-site page may send them without asking (no CORS preflight).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# A Host header: a name or address ([...] for IPv6) and an optional port, nothing else.
HOST_HEADER = re.compile(r"(\[[0-9a-f:.]+\]|[^:\[\]@/\s]+)(?::\d{1,5})?")
# Text fields of a multipart form are small; the images are files.
MAX_FORM_FIELD = 64 * 1024


class ApiError(Exception):
    """An HTTP error with its code and one-line message."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code or CODES.get(status, "error"), headers


def error_response(status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    # Every error a client reads passes here: no server path leaves (reid.serve.redact).
    line = hide_paths(" ".join(str(message).split()))[:500]
    body = {"error": {"code": code or CODES.get(status, "error"), "message": line}}
    return JSONResponse(body, status_code=status, headers=headers)


def status_of(exc: ReidError) -> tuple[int, str]:
    """The HTTP status and code of a library error."""
    if isinstance(exc, ServeError):
        return exc.status, exc.code
    if isinstance(exc, NameTakenError):
        return 409, "conflict"
    if isinstance(exc, GalleryError):
        return (503, "busy") if "is locked by another process" in str(exc) else (409, "gallery_error")
    # DataError, ConfigError, ModelError and the rest: the request asked for what cannot be.
    return 422, "invalid"


@dataclass(frozen=True)
class Principal:
    """Who a request is: the admin (or anyone, with auth off) or a gallery key."""

    admin: bool
    key: ApiKey | None = None

    @property
    def key_id(self) -> str:
        return "admin" if self.admin else self.key.id if self.key else "-"


# ----------------------------------------------------------------- middleware


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


class EventStream(StreamingResponse):
    """A streaming answer that calls ``release`` once it is over, however it ends (the
    client hung up, the stream ended, the send failed)."""

    def __init__(self, content: Any, release: Callable[[], None], **options: Any) -> None:
        super().__init__(content, **options)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


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


# ----------------------------------------------------------------- reading requests


def decode_base64(data: str, where: str) -> bytes:
    """The bytes of a base64 image field; ApiError 422 for anything else (a path, a URL)."""
    text = data.strip()
    if text.startswith("data:") and "," in text[:200]:
        text = text.split(",", 1)[1]
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        looks_like = "a path or URL" if ("://" in text[:300] or text[:1] in "/.~\\" or text[1:3] == ":\\") else "not base64"
        raise ApiError(
            422, f"{where}: {looks_like}; images are uploads (multipart files or base64 in JSON), never paths or URLs"
        ) from None


def _upload_of(payload: schemas.ImageData, where: str) -> Upload:
    return Upload(payload.name or where, decode_base64(payload.data, where))


async def read_form(request: Request, service: Service) -> Any:
    try:
        return await request.form(
            max_files=service.config.max_images, max_fields=32, max_part_size=MAX_FORM_FIELD
        )
    except MultiPartException as exc:
        raise ApiError(422, f"malformed multipart form: {exc.message}") from None
    except HTTPException as exc:
        # Starlette reports a form over its file count as a 400.
        if exc.status_code != 400:
            raise
        status = 413 if "Too many files" in str(exc.detail) else 422
        raise ApiError(status, f"multipart form refused: {exc.detail} (at most {service.config.max_images} images)") from None


async def read_json(request: Request, model: type[schemas.Strict]) -> Any:
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise ApiError(422, validation_line(exc.errors())) from None


def validation_line(errors: Any) -> str:
    """The first validation error as one line: where, and what is wrong (never the input)."""
    if not errors:
        return "invalid request"
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


async def form_file(form: Any, field: str, required: bool = True) -> Upload | None:
    values = form.getlist(field)
    if not values:
        if required:
            raise ApiError(422, f"{field}: an uploaded image file is required")
        return None
    if len(values) > 1:
        raise ApiError(422, f"{field}: one image expected, got {len(values)}")
    return await _file(values[0], field)


async def _file(value: Any, field: str) -> Upload:
    if not isinstance(value, UploadFile):
        raise ApiError(422, f"{field}: must be an uploaded file, not text; the server reads no paths and fetches no URLs")
    return Upload(value.filename or field, await value.read())


def form_number(form: Any, field: str, kind: type, low: float, high: float) -> Any:
    value = form.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ApiError(422, f"{field}: expected a number, got a file")
    number = whole_number(value) if kind is int else real_number(value)
    if number is None:
        raise ApiError(422, f"{field}: expected a number, got {value[:40]!r}")
    if not low <= number <= high:
        raise ApiError(422, f"{field}: must be in [{low:g}, {high:g}], got {value[:40]}")
    if kind is float and number == 0:
        raise ApiError(422, f"{field}: a distance threshold is in (0, 2]")
    return number


def refuse_unknown_fields(form: Any, allowed: set[str]) -> None:
    """422 for a form field the route does not take, as for JSON: a misspelt ``treshold``
    must never leave a request deciding at another threshold than the one it asked for."""
    unknown = sorted(set(form.keys()) - allowed)
    if unknown:
        raise ApiError(422, f"{unknown[0][:64]}: Extra inputs are not permitted (this route takes {', '.join(sorted(allowed))})")


def is_multipart(request: Request) -> bool:
    return request.headers.get("content-type", "").lower().startswith("multipart/form-data")


def is_json(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


def image_body(json_model: type[schemas.Strict], files: dict[str, str], fields: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI for a route that takes multipart files or the JSON model."""
    properties: dict[str, Any] = {}
    for name, description in files.items():
        if name == "images":
            properties[name] = {"type": "array", "items": {"type": "string", "format": "binary"}, "description": description}
        else:
            properties[name] = {"type": "string", "format": "binary", "description": description}
    properties.update(fields)
    required = [name for name in files if name in ("image", "images")]
    return {
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {"schema": {"type": "object", "properties": properties, "required": required}},
                "application/json": {"schema": json_model.model_json_schema(ref_template="#/components/schemas/{model}")},
            },
        }
    }


# ----------------------------------------------------------------- the application


def create_app(service: Service, pool: WorkerPool | None = None) -> FastAPI:
    """The application serving ``service``; ``pool`` (default: the config's threads and
    queue) runs the blocking work."""
    config = service.config
    pool = pool or WorkerPool(config.threads, config.queue)
    metrics = Metrics(pool)
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        budget = memory_budget(config, service.limits) / 2**20
        log.info("requests hold at most %.0f MiB above this process's idle memory", budget)
        yield
        # A stopping server ends its watches' threads (and releases their cameras).
        service.watches.stop_all()

    app = FastAPI(
        lifespan=lifespan,
        title="reid",
        version="1",
        summary="Person re-identification and face verification over enrolled galleries.",
        description="Distances are Euclidean between unit embeddings (0..2). Send keys as 'Authorization: Bearer KEY'.",
        # A redirect would carry a write method elsewhere: DELETE .../identities/.., which a
        # client normalises to .../staff/, must never be sent on to DELETE .../staff.
        redirect_slashes=False,
    )
    app.state.service, app.state.pool, app.state.metrics = service, pool, metrics
    # Open event streams by key id (this process's event loop is their only writer).
    streams: dict[str, int] = {}
    bearer = HTTPBearer(auto_error=False, description="An admin key or a gallery key.")
    known_paths = server_paths(config)

    # -------------------------------------------------------------- errors

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.code, exc.headers)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, validation_line(exc.errors()))

    @app.exception_handler(ReidError)
    async def library_error(_: Request, exc: ReidError) -> JSONResponse:
        status, code = status_of(exc)
        # The library names files by their full path; a client learns the gallery's name only.
        message = hide_paths(str(exc), known_paths)
        return error_response(status, message, code, {"Retry-After": RETRY_AFTER} if status == 503 else None)

    @app.exception_handler(ClientDisconnect)
    async def client_gone(_: Request, __: ClientDisconnect) -> JSONResponse:
        # The client hung up mid-request: nobody reads this answer; the request's log line says 499.
        return error_response(499, "the client closed the connection before its request was complete", "client_gone")

    @app.exception_handler(PoolFull)
    async def busy(_: Request, __: PoolFull) -> JSONResponse:
        return error_response(503, "every worker is busy and the queue is full; retry shortly", "busy", {"Retry-After": RETRY_AFTER})

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        # A bug, not bad input: logged with its type; the client gets no traceback.
        log.error("unexpected %s: %s", type(exc).__name__, " ".join(str(exc).split())[:300])
        return error_response(500, "internal error; the server log has the details", "internal")

    @app.exception_handler(OSError)
    async def os_error(_: Request, exc: OSError) -> JSONResponse:
        log.error("operating-system error: %s", exc)
        return error_response(503, f"the server cannot reach its storage ({exc.strerror or type(exc).__name__})", "storage")

    # -------------------------------------------------------------- keys and scopes

    def principal(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Principal:
        if config.no_auth:
            who = Principal(admin=True)
        elif credentials is None or not credentials.credentials:
            raise ApiError(401, "no key: send 'Authorization: Bearer KEY'", headers={"WWW-Authenticate": "Bearer"})
        else:
            token = credentials.credentials
            if service.admin is not None and service.admin.matches(token):
                who = Principal(admin=True)
            else:
                key = service.keys.find(token)
                if key is None:
                    raise ApiError(401, "unknown or revoked key", headers={"WWW-Authenticate": "Bearer"})
                who = Principal(admin=False, key=key)
        request.scope["reid_key"] = who.key_id
        return who

    def needs(scope: str) -> Any:
        """A dependency: the request's key must be the admin's (``admin``), any valid key
        (``any``), or a key of the path's gallery with ``scope``."""

        async def check(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Principal:
            who = principal(request, credentials)
            if who.key is not None and not await run(service.key_opens, who.key):
                # The key's gallery was deleted (and maybe made again: another gallery).
                raise ApiError(401, "unknown or revoked key", headers={"WWW-Authenticate": "Bearer"})
            if who.admin:
                return who
            if scope == "admin":
                raise ApiError(403, "this route needs the admin key")
            if scope == "any":
                return who
            gallery = request.path_params.get("gallery")
            if who.key is None or gallery != who.key.gallery:
                raise ApiError(403, "this key is for another gallery")
            if not who.key.allows(scope):
                raise ApiError(403, f"this key lacks the {scope!r} scope")
            return who

        return Depends(check)

    async def run(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await pool.run(function, *args, **kwargs)

    # -------------------------------------------------------------- the page

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        """The web page (plain HTML, CSS and JavaScript shipped in the package; works offline)."""
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # -------------------------------------------------------------- health

    @app.get("/v1/health", response_model=schemas.Health, tags=["health"])
    async def health() -> dict[str, Any]:
        """Alive."""
        return {"status": "ok"}

    @app.get("/v1/ready", response_model=schemas.Ready, tags=["health"])
    async def ready() -> dict[str, Any]:
        """Models and detectors are loaded (they are before the port opens)."""
        return {
            "ready": True,
            "models": [
                {"name": name, "model_name": e.card.name, "fingerprint": e.card.fingerprint, "kind": e.card.kind,
                 "dim": e.dim, "threshold": e.card.threshold}
                for name, e in service.models.items()
            ],
        }  # fmt: skip

    @app.get("/metrics", tags=["health"], response_class=Response)
    async def prometheus() -> Response:
        """Prometheus metrics of this process: requests, latency per route, queue depth, watches."""
        metrics.watches(service.watches.list())
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # -------------------------------------------------------------- galleries

    @app.get("/v1/galleries", response_model=schemas.GalleryList, responses=ERRORS, tags=["galleries"])
    async def list_galleries(who: Principal = needs("any")) -> dict[str, Any]:
        """The galleries this key may see: all for the admin, its own for a gallery key."""
        def listing() -> list[dict[str, Any]]:
            names = service.gallery_names()
            if not who.admin and who.key is not None:
                names = [n for n in names if n == who.key.gallery]
            return [service.info(n) for n in names]

        return {"galleries": await run(listing)}

    @app.post("/v1/galleries", response_model=schemas.GalleryOut, status_code=201, responses=ERRORS, tags=["galleries"])
    async def create_gallery(body: schemas.GalleryCreate, _: Principal = needs("admin")) -> dict[str, Any]:
        """Create an empty gallery for a served model (admin)."""
        return await run(service.create_gallery, body.name, body.model, body.index, body.thumbnails)

    @app.get("/v1/galleries/{gallery}", response_model=schemas.GalleryOut, responses=ERRORS, tags=["galleries"])
    async def gallery_info(gallery: str, _: Principal = needs("read")) -> dict[str, Any]:
        """Items, identities, model, and the threshold with where it came from."""
        return await run(service.info, gallery)

    @app.delete("/v1/galleries/{gallery}", response_model=schemas.Deleted, responses=ERRORS, tags=["galleries"])
    async def delete_gallery(
        gallery: str,
        confirm: str = Query(..., max_length=64, description="The gallery's name again (no normalised URL adds it)."),
        _: Principal = needs("admin"),
    ) -> dict[str, Any]:
        """Delete a gallery, every item in it and its keys (admin); ``confirm`` repeats its name."""
        # A client normalises DELETE .../identities/.. to DELETE /v1/galleries/{gallery}:
        # only a request that names the gallery twice deletes it.
        if confirm != gallery:
            raise ApiError(422, f"confirm: deleting gallery {gallery!r} needs confirm={gallery} (its name again)")
        return {"deleted": gallery, "items": await run(service.delete_gallery, gallery)}

    # -------------------------------------------------------------- identities

    @app.get("/v1/galleries/{gallery}/identities", response_model=schemas.IdentityPage, responses=ERRORS, tags=["identities"])
    async def identities(
        gallery: str,
        offset: int = Query(0, ge=0, le=2**31),
        limit: int = Query(100, ge=1, le=1000),
        _: Principal = needs("read"),
    ) -> dict[str, Any]:
        """Identities sorted by name, a page at a time."""
        return await run(service.identities, gallery, offset, limit)

    # Each identity route has two forms: by name (readable, for people and scripts) and by
    # id under /ids/ (hexadecimal, never a path: the page uses it, and it reaches a label
    # stored before the naming rule, such as "..").  Both act on exactly the label named.

    def by_id(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(gallery: str, ident: str, *args: Any) -> Any:
            return method(gallery, service.label_of_id(gallery, ident), *args)

        return call

    @app.get("/v1/galleries/{gallery}/identities/{identity}", response_model=schemas.IdentityOut, responses=ERRORS, tags=["identities"])
    async def identity(gallery: str, identity: str, _: Principal = needs("read")) -> dict[str, Any]:
        """One identity and its enrolled items."""
        return await run(service.identity, gallery, identity)

    @app.get("/v1/galleries/{gallery}/ids/{identity_id}", response_model=schemas.IdentityOut, responses=ERRORS, tags=["identities"])
    async def identity_of_id(gallery: str, identity_id: str = IDENT, _: Principal = needs("read")) -> dict[str, Any]:
        """One identity, by id, and its enrolled items."""
        return await run(by_id(service.identity), gallery, identity_id)

    @app.patch("/v1/galleries/{gallery}/identities/{identity}", response_model=schemas.Renamed, responses=ERRORS, tags=["identities"])
    async def rename(gallery: str, identity: str, body: schemas.Rename, _: Principal = needs("write")) -> dict[str, Any]:
        """Rename an identity (never onto another one)."""
        return await run(service.rename, gallery, identity, body.name)

    @app.patch("/v1/galleries/{gallery}/ids/{identity_id}", response_model=schemas.Renamed, responses=ERRORS, tags=["identities"])
    async def rename_id(
        gallery: str, body: schemas.Rename, identity_id: str = IDENT, _: Principal = needs("write")
    ) -> dict[str, Any]:
        """Rename an identity, by id (never onto another one)."""
        return await run(by_id(service.rename), gallery, identity_id, body.name)

    @app.delete(
        "/v1/galleries/{gallery}/identities/{identity}", response_model=schemas.IdentityDeleted, responses=ERRORS,
        tags=["identities"],
    )  # fmt: skip
    async def delete_identity(gallery: str, identity: str, _: Principal = needs("write")) -> dict[str, Any]:
        """Delete an identity: its rows and embeddings, verified gone."""
        return await run(service.delete_identity, gallery, identity)

    @app.delete(
        "/v1/galleries/{gallery}/ids/{identity_id}", response_model=schemas.IdentityDeleted, responses=ERRORS,
        tags=["identities"],
    )  # fmt: skip
    async def delete_identity_id(gallery: str, identity_id: str = IDENT, _: Principal = needs("write")) -> dict[str, Any]:
        """Delete an identity, by id: its rows and embeddings, verified gone."""
        return await run(by_id(service.delete_identity), gallery, identity_id)

    @app.delete(
        "/v1/galleries/{gallery}/identities/{identity}/items/{item}", response_model=schemas.ItemOut,
        responses=ERRORS, tags=["identities"],
    )  # fmt: skip
    async def delete_item(gallery: str, identity: str, item: int = ITEM_ID, _: Principal = needs("write")) -> dict[str, Any]:
        """Delete one enrolled item of an identity."""
        return await run(service.delete_item, gallery, identity, item)

    @app.delete(
        "/v1/galleries/{gallery}/ids/{identity_id}/items/{item}", response_model=schemas.ItemOut,
        responses=ERRORS, tags=["identities"],
    )  # fmt: skip
    async def delete_item_id(
        gallery: str, identity_id: str = IDENT, item: int = ITEM_ID, _: Principal = needs("write")
    ) -> dict[str, Any]:
        """Delete one enrolled item of an identity, by the identity's id."""
        return await run(by_id(service.delete_item), gallery, identity_id, item)

    @app.get(
        "/v1/galleries/{gallery}/items/{item}/thumbnail", response_class=Response, tags=["identities"],
        responses={**ERRORS, 200: {"content": {"image/jpeg": {}}, "description": "A JPEG."}},
    )  # fmt: skip
    async def thumbnail(gallery: str, item: int = ITEM_ID, _: Principal = needs("read")) -> Response:
        """The small JPEG of an enrolled crop (personal data: a picture of a person)."""
        payload = await run(service.thumbnail, gallery, item)
        return Response(payload, media_type="image/jpeg", headers={"Cache-Control": "private, no-store"})

    # -------------------------------------------------------------- images

    @app.post(
        "/v1/galleries/{gallery}/identities/{identity}/images", response_model=schemas.EnrolOut, responses=ERRORS,
        tags=["images"], openapi_extra=image_body(schemas.EnrolJson, {"images": "One or more photos of the person."}, {}),
    )  # fmt: skip
    async def enrol(gallery: str, identity: str, request: Request, _: Principal = needs("write")) -> dict[str, Any]:
        """Enrol photos of one person (one commit); per file: added, duplicate or skipped with the reason."""
        if is_multipart(request):
            form = await read_form(request, service)
            refuse_unknown_fields(form, {"images", "image"})
            values = form.getlist("images") + form.getlist("image")
            if not values:
                raise ApiError(422, "images: at least one uploaded image file is required")
            uploads = [await _file(v, "images") for v in values]
        elif is_json(request):
            body = await read_json(request, schemas.EnrolJson)
            uploads = [_upload_of(image, f"images.{n}") for n, image in enumerate(body.images)]
        else:
            raise ApiError(415, "send the images as multipart/form-data or application/json")
        if len(uploads) > config.max_images:
            raise ApiError(413, f"{len(uploads)} images in one request; at most {config.max_images}")
        return await run(service.enrol, gallery, identity, uploads)

    number_fields = {
        "top_k": {"type": "integer", "minimum": 1, "maximum": 100},
        "threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 2},
    }

    async def one_image(request: Request, model: type[schemas.Strict], other: bool = False) -> tuple[Any, dict[str, Any]]:
        """The request's image (and ``other``), and its options, from multipart or JSON."""
        if is_multipart(request):
            form = await read_form(request, service)
            refuse_unknown_fields(form, set(model.model_fields))
            images = [await form_file(form, "image"), await form_file(form, "other", required=False) if other else None]
            identity = form.get("identity")
            if identity is not None and not isinstance(identity, str):
                raise ApiError(422, "identity: expected text, got a file")
            options = {
                "top_k": form_number(form, "top_k", int, 1, 100),
                "threshold": form_number(form, "threshold", float, 0, 2),
                "identity": identity or None,
            }
            return images, options
        if is_json(request):
            body = await read_json(request, model)
            images = [_upload_of(body.image, body.image.name or "image")]
            second = getattr(body, "other", None)
            images.append(_upload_of(second, second.name or "other") if second is not None else None)
            options = {k: getattr(body, k, None) for k in ("top_k", "threshold", "identity")}
            return images, options
        raise ApiError(415, "send the image as multipart/form-data or application/json")

    @app.post(
        "/v1/galleries/{gallery}/search", response_model=schemas.SearchOut, responses=ERRORS, tags=["images"],
        openapi_extra=image_body(schemas.SearchJson, {"image": IMAGE_FIELDS["image"]}, number_fields),
    )  # fmt: skip
    async def search(gallery: str, request: Request, _: Principal = needs("read")) -> dict[str, Any]:
        """1:N: each person or face in the photo, its top-k identities and the decision (or unknown)."""
        images, options = await one_image(request, schemas.SearchJson)
        return await run(service.search, gallery, images[0], options["top_k"], options["threshold"])

    @app.post(
        "/v1/galleries/{gallery}/verify", response_model=schemas.VerifyOut, responses=ERRORS, tags=["images"],
        openapi_extra=image_body(
            schemas.VerifyJson, IMAGE_FIELDS,
            {"identity": {"type": "string", "maxLength": 200}, "threshold": number_fields["threshold"]},
        ),
    )  # fmt: skip
    async def verify(gallery: str, request: Request, _: Principal = needs("read")) -> dict[str, Any]:
        """1:1: a photo against a second photo or an enrolled identity: distance, same or different."""
        images, options = await one_image(request, schemas.VerifyJson, other=True)
        return await run(service.verify, gallery, images[0], images[1], options["identity"], options["threshold"])

    @app.post(
        "/v1/galleries/{gallery}/embed", response_model=schemas.EmbedOut, responses=ERRORS, tags=["images"],
        openapi_extra=image_body(schemas.EmbedJson, {"image": IMAGE_FIELDS["image"]}, {}),
    )  # fmt: skip
    async def embed(gallery: str, request: Request, _: Principal = needs("read")) -> dict[str, Any]:
        """The embedding of each person or face in the photo, with the model's fingerprint."""
        images, _options = await one_image(request, schemas.EmbedJson)
        return await run(service.embed, gallery, images[0])

    # -------------------------------------------------------------- watches

    def reads(key: ApiKey, watch: Watch) -> bool:
        """A gallery key sees the watches of its own gallery: its name and its id."""
        return key.gallery == watch.gallery and key.gallery_uid == watch.gallery_uid

    def watch_for(who: Principal, watch_id: str) -> Watch:
        """The watch ``watch_id`` when ``who`` may read its gallery: 404 when there is none
        (or none this key may know of), 403 for a key without the read scope."""
        watch = service.watches.get(watch_id)
        if watch is None or (not who.admin and who.key is not None and not reads(who.key, watch)):
            raise ApiError(404, f"no watch {watch_id[:40]!r}")
        if not who.admin and who.key is not None and not who.key.allows("read"):
            raise ApiError(403, "this key lacks the 'read' scope")
        return watch

    @app.post("/v1/watches", response_model=schemas.WatchOut, status_code=201, responses=ERRORS, tags=["watches"])
    async def start_watch(body: schemas.WatchCreate, _: Principal = needs("admin")) -> dict[str, Any]:
        """Start a tracked query of an allowed video source against a gallery (admin)."""
        return (await run(service.start_watch, body.gallery, body.source, body.max_frames)).summary()

    @app.get("/v1/watches", response_model=schemas.WatchList, responses=ERRORS, tags=["watches"])
    async def list_watches(who: Principal = needs("any")) -> dict[str, Any]:
        """The watches of this process: all for the admin, its gallery's for a read key."""
        if who.admin:
            return {"watches": [w.summary() for w in service.watches.list()]}
        if who.key is None or not who.key.allows("read"):
            raise ApiError(403, "this key lacks the 'read' scope")
        return {"watches": [w.summary() for w in service.watches.list(who.key.gallery) if reads(who.key, w)]}

    @app.get("/v1/watches/{watch_id}", response_model=schemas.WatchOut, responses=ERRORS, tags=["watches"])
    async def watch_state(watch_id: str, who: Principal = needs("any")) -> dict[str, Any]:
        """A watch's state: running, paused, done, stopped or failed, frames, frame rate, dropped frames."""
        return watch_for(who, watch_id).summary()

    @app.get(
        "/v1/watches/{watch_id}/events", tags=["watches"], response_class=StreamingResponse,
        responses={**ERRORS, 200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events."}},
    )  # fmt: skip
    async def watch_events(watch_id: str, request: Request, who: Principal = needs("any")) -> StreamingResponse:
        """The watch's events as Server-Sent Events (ended, decided, done); resumes after Last-Event-ID."""
        watch = watch_for(who, watch_id)
        last = request.headers.get("last-event-id", "0").strip() or "0"
        after = whole_number(last, 0, 2**63 - 1)
        if after is None:
            raise ApiError(422, "Last-Event-ID: expected the id of an event, a whole number")
        holder = who.key_id
        if sum(streams.values()) >= config.max_event_streams or streams.get(holder, 0) >= STREAMS_PER_KEY:
            raise ApiError(
                503, f"too many event streams open (at most {STREAMS_PER_KEY} a key, {config.max_event_streams} in all); "
                "close one or retry later", "busy", {"Retry-After": RETRY_AFTER},
            )  # fmt: skip
        streams[holder] = streams.get(holder, 0) + 1

        def release() -> None:
            streams[holder] -= 1
            if not streams[holder]:
                del streams[holder]

        async def stream() -> Any:
            seq, quiet = after, 0.0
            while True:
                events = watch.since(seq)
                for event in events:
                    seq = event["seq"]
                    yield f"id: {seq}\nevent: {event['event']}\ndata: {json.dumps(event['data'])}\n\n"
                if watch.over and not watch.since(seq):
                    return
                if not events:
                    quiet += SSE_POLL
                    if quiet >= SSE_KEEPALIVE:
                        quiet = 0.0
                        yield ": keep-alive\n\n"
                await asyncio.sleep(SSE_POLL)

        return EventStream(stream(), release, media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    @app.post("/v1/watches/{watch_id}/pause", response_model=schemas.WatchOut, responses=ERRORS, tags=["watches"])
    async def pause_watch(watch_id: str, who: Principal = needs("admin")) -> dict[str, Any]:
        """Pause a watch (admin): it stops taking frames until resumed."""
        watch = watch_for(who, watch_id)
        service.watches.pause(watch, True)
        return watch.summary()

    @app.post("/v1/watches/{watch_id}/resume", response_model=schemas.WatchOut, responses=ERRORS, tags=["watches"])
    async def resume_watch(watch_id: str, who: Principal = needs("admin")) -> dict[str, Any]:
        """Resume a paused watch (admin)."""
        watch = watch_for(who, watch_id)
        service.watches.pause(watch, False)
        return watch.summary()

    @app.delete("/v1/watches/{watch_id}", response_model=schemas.WatchOut, responses=ERRORS, tags=["watches"])
    async def stop_watch(watch_id: str, who: Principal = needs("admin")) -> dict[str, Any]:
        """Stop a watch (admin); its events stay readable."""
        watch = watch_for(who, watch_id)
        service.watches.stop(watch)
        return watch.summary()

    # -------------------------------------------------------------- keys

    @app.get("/v1/keys", response_model=schemas.KeyList, responses=ERRORS, tags=["keys"])
    async def list_keys(gallery: str | None = Query(None, max_length=64), _: Principal = needs("admin")) -> dict[str, Any]:
        """Gallery keys (never the keys themselves), of one gallery or all (admin)."""
        return {"keys": [_key(k) for k in await run(service.keys.list, gallery)]}

    @app.post("/v1/keys", response_model=schemas.KeyCreated, status_code=201, responses=ERRORS, tags=["keys"])
    async def create_key(body: schemas.KeyCreate, _: Principal = needs("admin")) -> dict[str, Any]:
        """A new key for a gallery with scopes read and/or write (admin); the key is shown once."""
        key, token = await run(service.create_key, body.gallery, body.scopes)
        return {**_key(key), "key": token}

    @app.delete("/v1/keys/{key_id}", response_model=schemas.KeyOut, responses=ERRORS, tags=["keys"])
    async def revoke_key(key_id: str, _: Principal = needs("admin")) -> dict[str, Any]:
        """Revoke a gallery key (admin)."""
        try:
            return _key(await run(service.keys.revoke, key_id))
        except ConfigError:
            # The store's line names its file: a client is told which key only.
            raise ApiError(404, f"no key {key_id[:40]!r}") from None

    app.add_middleware(HostAndOrigin, config=config)
    app.add_middleware(RequestLog, metrics=metrics)
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=config.cors_origins, allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )  # fmt: skip
    def known_key(token: str) -> bool:
        if config.no_auth or (service.admin is not None and service.admin.matches(token)):
            return True
        try:
            return service.keys.find(token) is not None
        except ReidError:
            return True  # an unreadable keys file: the route answers it, as for any request

    app.add_middleware(
        BodyLimit, limit=config.max_body_bytes, bodies=config.threads + config.queue, known=known_key
    )
    return app


def server_paths(config: ServeConfig) -> dict[str, str]:
    """The server's own absolute paths a library line may hold, and what a client reads
    instead: the root (files relative to it), the keys file, the model folders, the watched
    videos' folders (as :func:`reid.serve.watches.check_source` shows them).  Relative
    forms are left alone: they are no server path, and "galleries" is also a word."""

    def absolute(path: str | Path) -> set[str]:
        return {str(p) for p in (Path(path), Path(path).resolve()) if p.is_absolute()}

    known: dict[str, str] = {}
    for root in absolute(config.root):
        known[f"{root}{os.sep}"] = ""
        known[root] = "the galleries' root"
    for keys in absolute(config.keys_path):
        known[keys] = "the keys file"
    for name, folder in config.models.items():
        for path in absolute(folder):
            known[path] = f"model {name}"
    for allowed in config.watch_files:
        for path in absolute(allowed):
            known[path] = Path(allowed).name or "watch_files"
    return known


def _key(key: ApiKey) -> dict[str, Any]:
    return {"id": key.id, "gallery": key.gallery, "scopes": list(key.scopes), "created": key.created}


SERVE_CONFIG_ENV = "REID_SERVE_CONFIG"


def app_from_environment() -> FastAPI:
    """The application of the settings in ``REID_SERVE_CONFIG`` (JSON): what each uvicorn
    worker process builds when ``reid serve --workers N`` starts several."""
    import json

    from reid.serve.config import load_serve_config
    from reid.serve.keys import AdminKey

    raw = json.loads(os.environ[SERVE_CONFIG_ENV])
    key_file = raw.pop("admin_key_file", None)
    config = load_serve_config(None, **raw)
    return create_app(Service.load(config, AdminKey.from_environment(key_file)))
