"""How the service answers an error: one JSON shape (``{"error": {"code", "message"}}``),
one line with no server path in it (:mod:`reid.serve.redact`), and ONE handler,
:func:`answer_error`, for every exception a request can end in."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from reid.errors import GalleryBusyError, GalleryError, NameTakenError, ReidError
from reid.serve import schemas
from reid.serve.pool import PoolFull
from reid.serve.redact import hide_paths
from reid.serve.service import ServeError

log = logging.getLogger("reid.serve")

CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
    409: "conflict", 413: "too_large", 415: "unsupported_media_type", 422: "invalid", 503: "busy",
}  # fmt: skip
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": schemas.ErrorBody, "description": CODES[status]} for status in (401, 403, 404, 409, 413, 422, 503)
}
RETRY_AFTER = "1"


class ApiError(Exception):
    """An HTTP error with its code and one-line message."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code or CODES.get(status, "error"), headers


# What the one handler is registered for: every exception a request can end in (Starlette
# answers a type registered here where it is raised; ``Exception`` last, outside the rest).
HANDLED: tuple[type[Exception], ...] = (
    ApiError, OSError, HTTPException, RequestValidationError, ReidError, ClientDisconnect, PoolFull, Exception,
)  # fmt: skip


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
    if isinstance(exc, GalleryBusyError):
        return 503, "busy"
    if isinstance(exc, GalleryError):
        return 409, "gallery_error"
    # DataError, ConfigError, ModelError and the rest: the request asked for what cannot be.
    return 422, "invalid"


def validation_line(errors: Any) -> str:
    """The first validation error as one line: where, and what is wrong (never the input)."""
    if not errors:
        return "invalid request"
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


async def answer_error(request: Request, exc: Exception) -> JSONResponse:
    """The answer to any exception a request ends in (registered for each of :data:`HANDLED`)."""
    if isinstance(exc, ApiError):
        return error_response(exc.status, exc.message, exc.code, exc.headers)
    if isinstance(exc, RequestValidationError):
        return error_response(422, validation_line(exc.errors()))
    if isinstance(exc, HTTPException):
        return error_response(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))
    if isinstance(exc, ReidError):
        status, code = status_of(exc)
        # The library names files by their full path; a client learns the gallery's name only.
        message = hide_paths(str(exc), request.app.state.context.known_paths)
        return error_response(status, message, code, {"Retry-After": RETRY_AFTER} if status == 503 else None)
    if isinstance(exc, ClientDisconnect):
        # The client hung up mid-request: nobody reads this answer; the request's log line says 499.
        return error_response(499, "the client closed the connection before its request was complete", "client_gone")
    if isinstance(exc, PoolFull):
        return error_response(503, "every worker is busy and the queue is full; retry shortly", "busy", {"Retry-After": RETRY_AFTER})
    if isinstance(exc, OSError):
        log.error("operating-system error: %s", exc)
        return error_response(503, f"the server cannot reach its storage ({exc.strerror or type(exc).__name__})", "storage")
    # A bug, not bad input: logged with its type; the client gets no traceback.
    log.error("unexpected %s: %s", type(exc).__name__, " ".join(str(exc).split())[:300])
    return error_response(500, "internal error; the server log has the details", "internal")
