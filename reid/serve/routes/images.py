"""Images: enrol photos of a person, search (1:N), verify (1:1), embed."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from reid.serve import schemas
from reid.serve.bodies import IMAGE_FIELDS, NUMBER_FIELDS, enrol_uploads, image_body, one_image
from reid.serve.deps import Ctx, Reader, Writer
from reid.serve.http_errors import ERRORS

router = APIRouter(prefix="/v1/galleries/{gallery}", tags=["images"], responses=ERRORS)


@router.post(
    "/identities/{identity}/images", response_model=schemas.EnrolOut,
    openapi_extra=image_body(schemas.EnrolJson, {"images": "One or more photos of the person."}, {}),
)  # fmt: skip
async def enrol(gallery: str, identity: str, request: Request, ctx: Ctx, _: Writer) -> dict[str, Any]:
    """Enrol photos of one person (one commit); per file: added, duplicate or skipped with the reason."""
    uploads = await enrol_uploads(request, ctx.config.max_images)
    return await ctx.run(ctx.service.enrol, gallery, identity, uploads)  # type: ignore[no-any-return]


@router.post(
    "/search", response_model=schemas.SearchOut,
    openapi_extra=image_body(schemas.SearchJson, {"image": IMAGE_FIELDS["image"]}, NUMBER_FIELDS),
)  # fmt: skip
async def search(gallery: str, request: Request, ctx: Ctx, _: Reader) -> dict[str, Any]:
    """1:N: each person or face in the photo, its top-k identities and the decision (or unknown)."""
    images, options = await one_image(request, schemas.SearchJson, ctx.config.max_images)
    return await ctx.run(ctx.service.search, gallery, images[0], options["top_k"], options["threshold"])  # type: ignore[no-any-return]


@router.post(
    "/verify", response_model=schemas.VerifyOut,
    openapi_extra=image_body(
        schemas.VerifyJson, IMAGE_FIELDS,
        {"identity": {"type": "string", "maxLength": 200}, "threshold": NUMBER_FIELDS["threshold"]},
    ),
)  # fmt: skip
async def verify(gallery: str, request: Request, ctx: Ctx, _: Reader) -> dict[str, Any]:
    """1:1: a photo against a second photo or an enrolled identity: distance, same or different."""
    images, options = await one_image(request, schemas.VerifyJson, ctx.config.max_images, other=True)
    return await ctx.run(  # type: ignore[no-any-return]
        ctx.service.verify, gallery, images[0], images[1], options["identity"], options["threshold"]
    )


@router.post(
    "/embed", response_model=schemas.EmbedOut,
    openapi_extra=image_body(schemas.EmbedJson, {"image": IMAGE_FIELDS["image"]}, {}),
)  # fmt: skip
async def embed(gallery: str, request: Request, ctx: Ctx, _: Reader) -> dict[str, Any]:
    """The embedding of each person or face in the photo, with the model's fingerprint."""
    images, _options = await one_image(request, schemas.EmbedJson, ctx.config.max_images)
    return await ctx.run(ctx.service.embed, gallery, images[0])  # type: ignore[no-any-return]
