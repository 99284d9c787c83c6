"""Identities and their enrolled items: list, describe, rename, delete, thumbnails.

Each identity route has two forms: by name (readable, for people and scripts) and by id
under ``/ids/`` (hexadecimal, never a path: the page uses it, and it reaches a label stored
before the naming rule, such as ".."). Both act on exactly the label named."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from fastapi.responses import Response

from reid.names import IDENTITY_ID
from reid.serve import schemas
from reid.serve.deps import Ctx, Reader, Writer
from reid.serve.http_errors import ERRORS
from reid.serve.service import Service

# Item ids are SQLite row ids: positive 64-bit integers.
ITEM_ID = PathParam(ge=1, le=2**63 - 1)
# An identity's id (reid.names.identity_id): hexadecimal digits, never a path.
IDENT = PathParam(pattern=f"^{IDENTITY_ID.pattern}$", description="The identity's id (its 'id' in a listing).")

router = APIRouter(prefix="/v1/galleries/{gallery}", tags=["identities"], responses=ERRORS)


def by_id(service: Service, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` called with the label of the identity id it is given."""

    def call(gallery: str, ident: str, *args: Any) -> Any:
        return method(gallery, service.label_of_id(gallery, ident), *args)

    return call


@router.get("/identities", response_model=schemas.IdentityPage)
async def identities(
    gallery: str,
    ctx: Ctx,
    _: Reader,
    offset: int = Query(0, ge=0, le=2**31),
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:
    """Identities sorted by name, a page at a time."""
    return await ctx.run(ctx.service.identities, gallery, offset, limit)  # type: ignore[no-any-return]


@router.get("/identities/{identity}", response_model=schemas.IdentityOut)
async def identity(gallery: str, identity: str, ctx: Ctx, _: Reader) -> dict[str, Any]:
    """One identity and its enrolled items."""
    return await ctx.run(ctx.service.identity, gallery, identity)  # type: ignore[no-any-return]


@router.get("/ids/{identity_id}", response_model=schemas.IdentityOut)
async def identity_of_id(gallery: str, ctx: Ctx, _: Reader, identity_id: str = IDENT) -> dict[str, Any]:
    """One identity, by id, and its enrolled items."""
    return await ctx.run(by_id(ctx.service, ctx.service.identity), gallery, identity_id)  # type: ignore[no-any-return]


@router.patch("/identities/{identity}", response_model=schemas.Renamed)
async def rename(gallery: str, identity: str, body: schemas.Rename, ctx: Ctx, _: Writer) -> dict[str, Any]:
    """Rename an identity (never onto another one)."""
    return await ctx.run(ctx.service.rename, gallery, identity, body.name)  # type: ignore[no-any-return]


@router.patch("/ids/{identity_id}", response_model=schemas.Renamed)
async def rename_id(gallery: str, body: schemas.Rename, ctx: Ctx, _: Writer, identity_id: str = IDENT) -> dict[str, Any]:
    """Rename an identity, by id (never onto another one)."""
    return await ctx.run(by_id(ctx.service, ctx.service.rename), gallery, identity_id, body.name)  # type: ignore[no-any-return]


@router.delete("/identities/{identity}", response_model=schemas.IdentityDeleted)
async def delete_identity(gallery: str, identity: str, ctx: Ctx, _: Writer) -> dict[str, Any]:
    """Delete an identity: its rows and embeddings, verified gone."""
    return await ctx.run(ctx.service.delete_identity, gallery, identity)  # type: ignore[no-any-return]


@router.delete("/ids/{identity_id}", response_model=schemas.IdentityDeleted)
async def delete_identity_id(gallery: str, ctx: Ctx, _: Writer, identity_id: str = IDENT) -> dict[str, Any]:
    """Delete an identity, by id: its rows and embeddings, verified gone."""
    return await ctx.run(by_id(ctx.service, ctx.service.delete_identity), gallery, identity_id)  # type: ignore[no-any-return]


@router.delete("/identities/{identity}/items/{item}", response_model=schemas.ItemOut)
async def delete_item(gallery: str, identity: str, ctx: Ctx, _: Writer, item: int = ITEM_ID) -> dict[str, Any]:
    """Delete one enrolled item of an identity."""
    return await ctx.run(ctx.service.delete_item, gallery, identity, item)  # type: ignore[no-any-return]


@router.delete("/ids/{identity_id}/items/{item}", response_model=schemas.ItemOut)
async def delete_item_id(
    gallery: str, ctx: Ctx, _: Writer, identity_id: str = IDENT, item: int = ITEM_ID
) -> dict[str, Any]:
    """Delete one enrolled item of an identity, by the identity's id."""
    return await ctx.run(by_id(ctx.service, ctx.service.delete_item), gallery, identity_id, item)  # type: ignore[no-any-return]


@router.get(
    "/items/{item}/thumbnail", response_class=Response,
    responses={200: {"content": {"image/jpeg": {}}, "description": "A JPEG."}},
)  # fmt: skip
async def thumbnail(gallery: str, ctx: Ctx, _: Reader, item: int = ITEM_ID) -> Response:
    """The small JPEG of an enrolled crop (personal data: a picture of a person)."""
    payload = await ctx.run(ctx.service.thumbnail, gallery, item)
    return Response(payload, media_type="image/jpeg", headers={"Cache-Control": "private, no-store"})
