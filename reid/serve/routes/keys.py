"""Gallery keys (admin): list, create (the key shown once), revoke."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from reid.errors import ConfigError
from reid.serve import schemas
from reid.serve.deps import Admin, Ctx
from reid.serve.http_errors import ERRORS, ApiError
from reid.serve.keys import ApiKey

router = APIRouter(prefix="/v1/keys", tags=["keys"], responses=ERRORS)


def key_out(key: ApiKey) -> dict[str, Any]:
    """A key as clients see it: never its digest."""
    return {"id": key.id, "gallery": key.gallery, "scopes": list(key.scopes), "created": key.created}


@router.get("", response_model=schemas.KeyList)
async def list_keys(ctx: Ctx, _: Admin, gallery: str | None = Query(None, max_length=64)) -> dict[str, Any]:
    """Gallery keys (never the keys themselves), of one gallery or all (admin)."""
    return {"keys": [key_out(k) for k in await ctx.run(ctx.service.keys.list, gallery)]}


@router.post("", response_model=schemas.KeyCreated, status_code=201)
async def create_key(body: schemas.KeyCreate, ctx: Ctx, _: Admin) -> dict[str, Any]:
    """A new key for a gallery with scopes read and/or write (admin); the key is shown once."""
    key, token = await ctx.run(ctx.service.create_key, body.gallery, body.scopes)
    return {**key_out(key), "key": token}


@router.delete("/{key_id}", response_model=schemas.KeyOut)
async def revoke_key(key_id: str, ctx: Ctx, _: Admin) -> dict[str, Any]:
    """Revoke a gallery key (admin)."""
    try:
        return key_out(await ctx.run(ctx.service.keys.revoke, key_id))
    except ConfigError:
        # The store's line names its file: a client is told which key only.
        raise ApiError(404, f"no key {key_id[:40]!r}") from None
