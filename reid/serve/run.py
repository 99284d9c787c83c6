"""Running the service: load everything, then open the port (uvicorn)."""

from __future__ import annotations

import copy
import inspect
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG

from reid.serial import as_dict
from reid.serve.app import SERVE_CONFIG_ENV, create_app
from reid.serve.config import ServeConfig
from reid.serve.connections import raise_open_file_limit
from reid.serve.keys import AdminKey
from reid.serve.service import Service
from reid.text import printable

# How long a worker process may take to load everything before its supervisor gives up on it.
WORKER_STARTUP_SECONDS = 600
# Seconds between two log lines of one kind of warning or error.
LOG_INTERVAL = 60.0


def uvicorn_options() -> dict[str, Any]:
    """The uvicorn settings every server runs with: the h11 protocol with deadlines on a
    request's head and body and a cap on connections
    (:class:`~reid.serve.connections.DeadlineProtocol`), and request heads of at most
    16 KiB (h11's bound on an incomplete event)."""
    return {"http": "reid.serve.connections:DeadlineProtocol", "h11_max_incomplete_event_size": 16 * 1024}


class PrintableFilter(logging.Filter):
    """Every value a log line prints (the host uvicorn listens on, a path, an error's text)
    in its printable form (:func:`reid.text.printable`): a control character in a ``--host``
    or a folder name cannot move the cursor or forge a log line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(printable(a) if isinstance(a, str) else a for a in record.args)
        elif not record.args and isinstance(record.msg, str):
            # A message with its values already in it: the whole line.
            record.msg = printable(record.msg)
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's logging with the service's one line per request in place of its access log
    (which would print paths, and so gallery and identity names, and query strings), each
    kind of warning or error at most once a minute, as one line
    (:class:`~reid.serve.connections.OneLinePerKind`: a flood of failures cannot fill the
    disk), and every value printed in its printable form (:class:`PrintableFilter`)."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {
        **config.get("filters", {}),
        "one_line": {"()": "reid.serve.connections.OneLinePerKind", "interval": LOG_INTERVAL},
        "printable": {"()": f"{__name__}.PrintableFilter"},
    }
    for handler in config["handlers"].values():
        handler["filters"] = [*handler.get("filters", []), "one_line", "printable"]
    config["loggers"]["reid.serve"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    # asyncio logs a failed accept (out of file descriptors) with its traceback, each time.
    config["loggers"]["asyncio"] = {"handlers": ["default"], "level": "WARNING", "propagate": False}
    config["loggers"]["uvicorn.access"] = {"handlers": [], "level": "WARNING", "propagate": False}
    return config


# Galleries named one a line in the start banner; more are counted.
BANNER_GALLERIES = 20


def start_banner(service: Service, made_root: bool = False) -> list[str]:
    """The lines a server says as it starts: where its page and API docs are, the models it
    serves, its root (``made_root``: made as it started, for no folder was there), the
    galleries under it (people and photos, how subjects are found; at most
    :data:`BANNER_GALLERIES`, the rest counted) and how keys are checked (the keys file
    named).  Raises ReidError for a gallery that cannot be read."""
    config = service.config
    host = f"[{config.host}]" if ":" in config.host else config.host
    url = f"http://{host}:{config.port}"
    lines = [f"page:      {url}/", f"API docs:  {url}/docs (schema {url}/openapi.json)"]
    for name, encoder in service.models.items():
        card = encoder.card
        lines.append(f"model:     {name} = {card.name} ({card.kind}, {encoder.dim}-d, {card.fingerprint[:12]})")
    made = " (made now: no folder was there)" if made_root else ""
    lines.append(f"root:      {config.root}{made}")
    names = service.gallery_names()
    for name in names[:BANNER_GALLERIES]:
        info = service.info(name)
        served = info["model"] or "no served model"
        lines.append(
            f"gallery:   {name} ({served}; {info['identities']} people, {info['items']} photos; detect {info['detect']})"
        )
    if len(names) > BANNER_GALLERIES:
        lines.append(f"gallery:   and {len(names) - BANNER_GALLERIES} more")
    if not names:
        where = "where gallery_location says" if config.gallery_location is not None else f"under {config.root}"
        lines.append(f"gallery:   none yet {where} (the admin makes them: the page's Admin tab or POST /v1/galleries)")
    keys = "none: --no-auth, loopback only" if config.no_auth else f"the admin key, and gallery keys from {config.keys_path}"
    lines.append(f"keys:      {keys}")
    return [printable(line) for line in lines]


def serve(
    config: ServeConfig, admin_key_file: str | Path | None = None, announce: Callable[[str], None] | None = None
) -> None:
    """Serve ``config`` until interrupted.  The models and detectors are loaded (and every
    setting checked) before the port opens; then ``announce`` (if given) is called with each
    line of :func:`start_banner`.  With ``workers`` above 1 each uvicorn worker process
    loads them again, from the same settings.  Raises ConfigError/ModelError with one line
    for a setting or model that cannot be used."""
    admin = AdminKey.from_environment(admin_key_file)
    # Loading makes a missing root (a first start): the banner says so, so a mistyped one shows.
    made_root = not os.path.lexists(config.root)
    service = Service.load(config, admin)
    if announce is not None:
        for line in start_banner(service, made_root):
            announce(line)
    raise_open_file_limit()
    options = {"host": config.host, "port": config.port, "log_config": log_config(), "access_log": False, **uvicorn_options()}
    if config.workers == 1:
        uvicorn.run(create_app(service), **options)
        return
    settings = as_dict(config)
    settings["admin_key_file"] = None if admin_key_file is None else str(admin_key_file)
    os.environ[SERVE_CONFIG_ENV] = json.dumps(settings)
    if "timeout_worker_healthcheck" in inspect.signature(uvicorn.Config).parameters:
        # A worker loads PyTorch and the models before it answers; uvicorn's default of a
        # few seconds kills it mid-load on a busy host, again and again.
        options["timeout_worker_healthcheck"] = WORKER_STARTUP_SECONDS
    uvicorn.run("reid.serve.app:app_from_environment", factory=True, workers=config.workers, **options)
