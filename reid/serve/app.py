"""The FastAPI application: the routers of :mod:`reid.serve.routes` under ``/v1``, keys
and scopes as dependencies (:mod:`reid.serve.deps`), the middleware of
:mod:`reid.serve.middleware` (body limit, Host and Origin checks, one log line per request,
Prometheus metrics), and one error handler (:func:`reid.serve.http_errors.answer_error`).

Build it with :func:`create_app` from a loaded :class:`~reid.serve.service.Service` (so the
models are loaded before any port opens).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles

from reid.errors import ReidError
from reid.serve.config import NAME_FIELD, ServeConfig, load_serve_config
from reid.serve.connections import memory_budget
from reid.serve.deps import Context
from reid.serve.http_errors import HANDLED, answer_error
from reid.serve.keys import AdminKey
from reid.serve.middleware import BodyLimit, HostAndOrigin, Metrics, RequestLog
from reid.serve.pool import WorkerPool
from reid.serve.routes import ROUTERS
from reid.serve.routes.page import STATIC
from reid.serve.service import Service

log = logging.getLogger("reid.serve")
SERVE_CONFIG_ENV = "REID_SERVE_CONFIG"


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
        exception_handlers=dict.fromkeys(HANDLED, answer_error),
    )
    # What the routes' dependencies read (reid.serve.deps.context).
    app.state.context = Context(service, pool, metrics, server_paths(config))
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

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

    app.add_middleware(BodyLimit, limit=config.max_body_bytes, bodies=config.threads + config.queue, known=known_key)
    return app


def server_paths(config: ServeConfig) -> dict[str, str]:
    """The server's own absolute paths a library line may hold, and what a client reads
    instead: the root (files relative to it), the keys file, the model folders, the watched
    videos' folders (as :func:`reid.serve.watches.check_source` shows them), the galleries'
    locations (as ``gallery NAME``).  Relative
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
    # Galleries kept elsewhere: their locations name hosts, databases and files a client is
    # not told; a library line about one names the gallery instead.
    for name, settings in config.galleries.items():
        if settings.location is not None:
            known[settings.location] = f"gallery {name}"
    if config.gallery_location is not None:
        before, _, after = config.gallery_location.partition(NAME_FIELD)
        known[before] = "gallery "
        if after:
            known[after] = ""
    return known


def app_from_environment() -> FastAPI:
    """The application of the settings in ``REID_SERVE_CONFIG`` (JSON): what each uvicorn
    worker process builds when ``reid serve --workers N`` starts several."""
    raw = json.loads(os.environ[SERVE_CONFIG_ENV])
    key_file = raw.pop("admin_key_file", None)
    config = load_serve_config(None, **raw)
    return create_app(Service.load(config, AdminKey.from_environment(key_file)))
