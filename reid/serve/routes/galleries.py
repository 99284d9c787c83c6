"""Galleries: list, create (admin), describe, delete (admin, with its name repeated)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from reid.serve import schemas
from reid.serve.deps import Admin, AnyKey, Ctx, Reader
from reid.serve.http_errors import ERRORS, ApiError

router = APIRouter(prefix="/v1/galleries", tags=["galleries"], responses=ERRORS)


@router.get("", response_model=schemas.GalleryList)
async def list_galleries(ctx: Ctx, who: AnyKey) -> dict[str, Any]:
    """The galleries this key may see: all for the admin, its own for a gallery key."""

    def listing() -> list[dict[str, Any]]:
        names = ctx.service.gallery_names()
        if not who.admin and who.key is not None:
            names = [n for n in names if n == who.key.gallery]
        return [ctx.service.info(n) for n in names]

    return {"galleries": await ctx.run(listing)}


@router.post("", response_model=schemas.GalleryOut, status_code=201)
async def create_gallery(body: schemas.GalleryCreate, ctx: Ctx, _: Admin) -> dict[str, Any]:
    """Create an empty gallery for a served model (admin)."""
    return await ctx.run(ctx.service.create_gallery, body.name, body.model, body.index, body.thumbnails)  # type: ignore[no-any-return]


@router.get("/{gallery}", response_model=schemas.GalleryOut)
async def gallery_info(gallery: str, ctx: Ctx, _: Reader) -> dict[str, Any]:
    """Items, identities, model, and the threshold with where it came from."""
    return await ctx.run(ctx.service.info, gallery)  # type: ignore[no-any-return]


@router.delete("/{gallery}", response_model=schemas.Deleted)
async def delete_gallery(
    gallery: str,
    ctx: Ctx,
    _: Admin,
    confirm: str = Query(..., max_length=64, description="The gallery's name again (no normalised URL adds it)."),
) -> dict[str, Any]:
    """Delete a gallery, every item in it and its keys (admin); ``confirm`` repeats its name."""
    # A client normalises DELETE .../identities/.. to DELETE /v1/galleries/{gallery}:
    # only a request that names the gallery twice deletes it.
    if confirm != gallery:
        raise ApiError(422, f"confirm: deleting gallery {gallery!r} needs confirm={gallery} (its name again)")
    return {"deleted": gallery, "items": await ctx.run(ctx.service.delete_gallery, gallery)}
