"""Reading a request's images and options: multipart files or base64 in JSON, each field
checked, every refusal an :class:`~reid.serve.http_errors.ApiError` with one line."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from fastapi import Request
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from reid.serve import schemas
from reid.serve.http_errors import ApiError, validation_line
from reid.serve.service import Upload
from reid.text import real_number, whole_number

# Text fields of a multipart form are small; the images are files.
MAX_FORM_FIELD = 64 * 1024
IMAGE_FIELDS = {"image": "The photo.", "other": "A second photo (verify)."}
NUMBER_FIELDS = {
    "top_k": {"type": "integer", "minimum": 1, "maximum": 100},
    "threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 2},
}


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


def upload_of(payload: schemas.ImageData, where: str) -> Upload:
    return Upload(payload.name or where, decode_base64(payload.data, where))


async def read_form(request: Request, max_images: int) -> Any:
    try:
        return await request.form(max_files=max_images, max_fields=32, max_part_size=MAX_FORM_FIELD)
    except MultiPartException as exc:
        raise ApiError(422, f"malformed multipart form: {exc.message}") from None
    except HTTPException as exc:
        # Starlette reports a form over its file count as a 400.
        if exc.status_code != 400:
            raise
        status = 413 if "Too many files" in str(exc.detail) else 422
        raise ApiError(status, f"multipart form refused: {exc.detail} (at most {max_images} images)") from None


async def read_json(request: Request, model: type[schemas.Strict]) -> Any:
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise ApiError(422, validation_line(exc.errors())) from None


async def form_file(form: Any, field: str, required: bool = True) -> Upload | None:
    values = form.getlist(field)
    if not values:
        if required:
            raise ApiError(422, f"{field}: an uploaded image file is required")
        return None
    if len(values) > 1:
        raise ApiError(422, f"{field}: one image expected, got {len(values)}")
    return await file_upload(values[0], field)


async def file_upload(value: Any, field: str) -> Upload:
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


async def enrol_uploads(request: Request, max_images: int) -> list[Upload]:
    """The photos of an enrolment, from multipart (``images``, or ``image``) or JSON."""
    if is_multipart(request):
        form = await read_form(request, max_images)
        refuse_unknown_fields(form, {"images", "image"})
        values = form.getlist("images") + form.getlist("image")
        if not values:
            raise ApiError(422, "images: at least one uploaded image file is required")
        uploads = [await file_upload(v, "images") for v in values]
    elif is_json(request):
        body = await read_json(request, schemas.EnrolJson)
        uploads = [upload_of(image, f"images.{n}") for n, image in enumerate(body.images)]
    else:
        raise ApiError(415, "send the images as multipart/form-data or application/json")
    if len(uploads) > max_images:
        raise ApiError(413, f"{len(uploads)} images in one request; at most {max_images}")
    return uploads


async def one_image(
    request: Request, model: type[schemas.Strict], max_images: int, other: bool = False
) -> tuple[list[Upload | None], dict[str, Any]]:
    """The request's image (and ``other``), and its options, from multipart or JSON."""
    if is_multipart(request):
        form = await read_form(request, max_images)
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
        images: list[Upload | None] = [upload_of(body.image, body.image.name or "image")]
        second = getattr(body, "other", None)
        images.append(upload_of(second, second.name or "other") if second is not None else None)
        options = {k: getattr(body, k, None) for k in ("top_k", "threshold", "identity")}
        return images, options
    raise ApiError(415, "send the image as multipart/form-data or application/json")


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
