"""Every request and response body of the HTTP API, as pydantic models (so that
``/openapi.json`` and ``/docs`` describe all of it).  Distances are Euclidean between unit
embeddings (0..2); boxes are [x, y, width, height] in the uploaded image's pixels."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from reid.names import MAX_IDENTITY

IDENTITY_ID = Field(description="The identity's id: 32 hexadecimal digits (routes under /ids/ take it; never a path).")

Scope = Literal["read", "write"]


class Strict(BaseModel):
    # A field the API does not know (a "path", a "url") is an error, never ignored.
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Strict):
    code: str = Field(description="A stable word: unauthorized, forbidden, not_found, invalid, too_large, busy, conflict ...")
    message: str = Field(description="One line saying what is wrong.")


class ErrorBody(Strict):
    error: ErrorDetail


class Health(Strict):
    status: Literal["ok"]


class ModelOut(Strict):
    name: str
    model_name: str
    fingerprint: str
    kind: str
    dim: int
    threshold: float | None


class Ready(Strict):
    ready: bool
    models: list[ModelOut]


class ThresholdOut(Strict):
    value: float = Field(description="Distance at or under which two embeddings are the same subject, in (0, 2].")
    source: str = Field(description="given, gallery calibration, model card, gallery or default.")
    detail: str = Field(description="Where exactly: request, serve settings, the card's calibration, the gallery.")
    note: str = Field("", description="One line when the threshold is doubtful here (e.g. a card calibrated on synthetic data, or a given value far looser than the card's).")


class GalleryOut(Strict):
    name: str
    items: int
    identities: int
    model: str | None = Field(description="The served model this gallery uses; null when none is loaded.")
    model_name: str
    model_fingerprint: str
    model_kind: str
    dim: int
    index: str
    created: str
    threshold: ThresholdOut | None
    detect: str = Field(description="Where the subjects of a photo come from: auto, person, face or none.")
    detector: str | None
    no_face: str = Field(description="A photo in which nothing is found: whole, skip or error.")
    thumbnails: bool = Field(description="The gallery keeps a small JPEG of each enrolled crop (personal data).")


class GalleryList(Strict):
    galleries: list[GalleryOut]


class GalleryCreate(Strict):
    name: str = Field(max_length=64, description="1 to 64 letters, digits, '.', '_' or '-'.")
    model: str | None = Field(default=None, max_length=200, description="A served model (default: the first).")
    index: Literal["flat", "hnsw", "ivf", "ivfpq"] | None = None
    thumbnails: StrictBool = Field(default=True, description="Keep a small JPEG of each enrolled crop (personal data).")


class Deleted(Strict):
    deleted: str
    items: int


class IdentityDeleted(Deleted):
    deleted: str = Field(description="Exactly the identity label deleted.")
    id: str = IDENTITY_ID


class IdentitySummaryOut(Strict):
    identity: str
    id: str = IDENTITY_ID
    items: int
    first_enrolled: str
    last_enrolled: str


class IdentityPage(Strict):
    identities: list[IdentitySummaryOut]
    total: int
    offset: int
    limit: int


class ItemOut(Strict):
    id: int
    identity: str
    source: str
    box: list[int] | None
    enrolled: str


class IdentityOut(Strict):
    identity: str
    id: str = IDENTITY_ID
    items: list[ItemOut]


class Rename(Strict):
    name: str = Field(min_length=1, max_length=MAX_IDENTITY, description="The new identity name (docs/serve.md: names).")


class Renamed(Strict):
    identity: str = Field(description="The new name, as stored (NFC).")
    id: str = IDENTITY_ID
    renamed: str = Field(description="Exactly the label renamed.")
    items: int


class ImageData(Strict):
    """An uploaded image in JSON: its bytes in base64 (a ``data:`` URL prefix is allowed).
    Never a path or URL: the server reads no file and fetches nothing."""

    name: str | None = Field(default=None, max_length=1000)
    data: str = Field(description="The image file's bytes, base64.")


class EnrolJson(Strict):
    images: list[ImageData] = Field(min_length=1)


class FileOutcome(Strict):
    name: str
    outcome: Literal["added", "duplicate", "skipped"]
    reason: str | None
    note: str | None = Field(None, description="Set for a photo in which several were found: how many, and the box of the one enrolled.")


class EnrolOut(Strict):
    identity: str = Field(description="The name enrolled, as stored (NFC).")
    id: str = IDENTITY_ID
    added: int
    duplicates: int
    skipped: int
    files: list[FileOutcome]
    gallery_items: int


class SearchJson(Strict):
    image: ImageData
    top_k: int | None = Field(default=None, ge=1, le=100)
    threshold: float | None = Field(default=None, gt=0, le=2)


class Match(Strict):
    identity: str
    distance: float
    item: int = Field(description="The identity's nearest item (its thumbnail: .../items/{item}/thumbnail).")


class SubjectLabel(Strict):
    text: str = Field(description="The label: subject number, identity or 'unknown', distance; shortened where it would not fit.")
    rect: list[int] = Field(
        description="[x, y, width, height] of the filled label in the photo's pixels: inside the photo, over no other label."
    )
    origin: list[int] = Field(description="[x, y] where the text starts: the left end of its baseline, in the photo's pixels.")
    font_px: int = Field(description="Height of a capital letter in the photo's pixels (sized to the photo).")
    line: int = Field(description="Width of the subject's box lines in the photo's pixels.")
    colour: str = Field(description="The subject's colour (#rrggbb), for its box.")
    fill: str = Field(description="The label's background (#rrggbb): the subject's colour when named, dark when unknown.")
    text_colour: str = Field(description="The label's letters (#rrggbb).")


class Subject(Strict):
    box: list[int]
    detection_score: float | None
    identity: str | None = Field(description="The identity decided, or null: unknown (none within the threshold).")
    decision: Literal["known", "unknown"]
    distance: float | None
    matches: list[Match]
    label: SubjectLabel | None = Field(
        None, description="Where to draw this subject's label, laid out as the annotated video's are; null when it fits nowhere."
    )


class SearchOut(Strict):
    gallery: str
    model: str
    threshold: ThresholdOut
    subjects: list[Subject]
    note: str | None = Field(None, description="Set when the detector found no one or several: e.g. 'no person found'.")


class VerifyJson(Strict):
    image: ImageData
    other: ImageData | None = None
    identity: str | None = Field(default=None, max_length=MAX_IDENTITY)
    threshold: float | None = Field(default=None, gt=0, le=2)


class VerifyOut(Strict):
    distance: float
    same: bool
    identity: str | None
    model: str
    threshold: ThresholdOut


class EmbedJson(Strict):
    image: ImageData


class EmbeddedSubject(Strict):
    box: list[int]
    detection_score: float | None
    embedding: list[float]


class EmbedOut(Strict):
    model: str
    fingerprint: str
    dim: int
    subjects: list[EmbeddedSubject]
    note: str | None = Field(None, description="Set when the detector found no one or several: e.g. 'no person found'.")


class KeyCreate(Strict):
    gallery: str = Field(max_length=64)
    scopes: list[Scope] = Field(min_length=1, max_length=2)


class KeyOut(Strict):
    id: str
    gallery: str
    scopes: list[str]
    created: str


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself: shown once, stored only as its SHA-256.")


class KeyList(Strict):
    keys: list[KeyOut]


class WatchCreate(Strict):
    gallery: str = Field(max_length=64)
    source: str = Field(max_length=2000, description="A video file, camera index or stream URL the settings allow.")
    max_frames: int | None = Field(default=None, ge=1, le=10**9)


class WatchOut(Strict):
    id: str
    gallery: str
    source: str
    state: Literal["starting", "running", "paused", "done", "stopped", "failed"]
    error: str | None
    frames: int
    fps: float
    dropped: int
    events: int = Field(description="The sequence number of the last event.")


class WatchList(Strict):
    watches: list[WatchOut]
