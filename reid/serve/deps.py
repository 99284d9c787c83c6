"""What every route depends on: the application's :class:`Context` (the service, its
worker pool, metrics, open event streams) and who the request is (:class:`Principal`),
checked by the dependencies :data:`Admin`, :data:`AnyKey`, :data:`Reader` and
:data:`Writer` (FastAPI's ``Security`` over the bearer scheme)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from reid.serve.config import ServeConfig
from reid.serve.http_errors import ApiError
from reid.serve.keys import ApiKey
from reid.serve.middleware import Metrics
from reid.serve.pool import WorkerPool
from reid.serve.service import Service

bearer = HTTPBearer(auto_error=False, description="An admin key or a gallery key.")
UNKNOWN_KEY = "unknown or revoked key"


@dataclass
class Context:
    """One application's state, kept on ``app.state.context`` and given to routes by
    :func:`context`: the service, the pool that runs its blocking calls, the metrics, the
    server paths that answers never show, and the open event streams by key id (this
    process's event loop is their only writer)."""

    service: Service
    pool: WorkerPool
    metrics: Metrics
    known_paths: dict[str, str]
    streams: dict[str, int] = field(default_factory=dict)

    @property
    def config(self) -> ServeConfig:
        return self.service.config

    async def run(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` on the worker pool (PoolFull when its queue is full)."""
        return await self.pool.run(function, *args)


def context(request: Request) -> Context:
    return request.app.state.context  # type: ignore[no-any-return]


Ctx = Annotated[Context, Depends(context)]


@dataclass(frozen=True)
class Principal:
    """Who a request is: the admin (or anyone, with auth off) or a gallery key."""

    admin: bool
    key: ApiKey | None = None

    @property
    def key_id(self) -> str:
        return "admin" if self.admin else self.key.id if self.key else "-"

    def reads(self, gallery: str, gallery_uid: str) -> bool:
        """The admin, or a gallery key of this gallery (its name and its id)."""
        return self.admin or (self.key is not None and self.key.gallery == gallery and self.key.gallery_uid == gallery_uid)


def principal(ctx: Context, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """The admin or the gallery key presented; ApiError 401 for none or an unknown one."""
    if ctx.config.no_auth:
        return Principal(admin=True)
    if credentials is None or not credentials.credentials:
        raise ApiError(401, "no key: send 'Authorization: Bearer KEY'", headers={"WWW-Authenticate": "Bearer"})
    token = credentials.credentials
    if ctx.service.admin is not None and ctx.service.admin.matches(token):
        return Principal(admin=True)
    key = ctx.service.keys.find(token)
    if key is None:
        raise ApiError(401, UNKNOWN_KEY, headers={"WWW-Authenticate": "Bearer"})
    return Principal(admin=False, key=key)


class Needs:
    """A dependency: the request's key must be the admin's (``admin``), any valid key
    (``any``), or a key of the path's gallery with ``scope`` (``read``, ``write``)."""

    def __init__(self, scope: str) -> None:
        self.scope = scope

    async def __call__(
        self, request: Request, ctx: Ctx, credentials: HTTPAuthorizationCredentials | None = Security(bearer)
    ) -> Principal:
        who = principal(ctx, credentials)
        request.scope["reid_key"] = who.key_id
        if who.key is not None and not await ctx.run(ctx.service.key_opens, who.key):
            # The key's gallery was deleted (and maybe made again: another gallery).
            raise ApiError(401, UNKNOWN_KEY, headers={"WWW-Authenticate": "Bearer"})
        if who.admin:
            return who
        if self.scope == "admin":
            raise ApiError(403, "this route needs the admin key")
        if self.scope == "any":
            return who
        gallery = request.path_params.get("gallery")
        if who.key is None or gallery != who.key.gallery:
            raise ApiError(403, "this key is for another gallery")
        if not who.key.allows(self.scope):
            raise ApiError(403, f"this key lacks the {self.scope!r} scope")
        return who


Admin = Annotated[Principal, Depends(Needs("admin"))]
AnyKey = Annotated[Principal, Depends(Needs("any"))]
Reader = Annotated[Principal, Depends(Needs("read"))]
Writer = Annotated[Principal, Depends(Needs("write"))]
