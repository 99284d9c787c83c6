"""What goes into a gallery and what comes out of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from reid.serial import as_dict

Box = tuple[int, int, int, int]


class ModelFacts(Protocol):
    """What a gallery needs to know of the model making its embeddings; a ModelCard has it.

    ``fingerprint`` identifies everything that shapes the embeddings (weights and
    preprocessing); ``weights_fingerprint`` the weights alone, which is what galleries made
    before fingerprints covered the model card recorded ("" when unknown).
    """

    name: str
    fingerprint: str
    weights_fingerprint: str
    embedding_dim: int
    threshold: float | None
    kind: str


@dataclass(frozen=True)
class EmbeddingModel:
    """:class:`ModelFacts` for embeddings made elsewhere (and where loading PyTorch is not wanted)."""

    name: str
    fingerprint: str
    embedding_dim: int
    threshold: float | None = None
    kind: str = "person"
    weights_fingerprint: str = ""


@dataclass
class ItemMeta:
    """Where an enrolled embedding came from.  ``box`` is (x, y, w, h) in the source image.
    ``enrolled``: when it was first enrolled (ISO 8601), kept when a gallery is imported
    (None: now)."""

    identity: str
    source: str = ""
    camera: str | None = None
    frame: int | None = None
    time: float | None = None
    box: Box | None = None
    image_hash: str | None = None
    enrolled: str | None = None


@dataclass(frozen=True)
class GalleryItem:
    """One stored item; ``id`` is its SQLite row id and its FAISS id."""

    id: int
    identity: str
    source: str
    camera: str | None
    frame: int | None
    time: float | None
    box: Box | None
    enrolled: str
    image_hash: str | None

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass(frozen=True)
class IdentityMatch:
    """An identity found for a query: its distance (Euclidean between unit embeddings,
    0..2) is that of its nearest item (score "best") or the mean over its items ("mean")."""

    identity: str
    distance: float
    item_id: int

    def to_dict(self) -> dict[str, Any]:
        return {"identity": self.identity, "distance": round(self.distance, 6)}


@dataclass
class AddResult:
    """Ids given to the added rows; the positions of the input rows skipped as duplicates,
    and of those refused as the same image as an item of another identity (with it); how
    many added rows are near duplicates of an item of their own identity."""

    ids: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    conflicts: list[tuple[int, str]] = field(default_factory=list)
    near_duplicates: int = 0


@dataclass(frozen=True)
class IdentitySummary:
    identity: str
    items: int
    first_enrolled: str
    last_enrolled: str


@dataclass
class GalleryMeta:
    """The gallery's fixed facts, stored in its database's ``meta`` table."""

    model_fingerprint: str
    model_name: str
    model_kind: str
    dim: int
    threshold: float | None
    created: str
    format: int = 1
    # The id the gallery was made with (reid.gallery.catalogue.UID_KEY); "" for one made before ids.
    uid: str = ""

    def __post_init__(self) -> None:
        # Read back from a database that may have been edited: types and ranges, once.
        if self.dim < 1:
            raise ValueError(f"embedding dimension {self.dim} is not positive")
        if self.threshold is not None and not 0.0 <= self.threshold <= 2.0:
            raise ValueError(f"threshold {self.threshold} is not a distance between unit embeddings (0..2)")
        if self.format < 1:
            raise ValueError(f"format {self.format} is not a gallery format")
        for name in ("model_fingerprint", "model_name", "model_kind", "created"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} is not text")


@dataclass
class GalleryInfo:
    """Summary of a gallery, as ``reid gallery info`` shows it."""

    path: str
    items: int
    identities: int
    dim: int
    index: str
    index_built: str
    index_params: dict[str, Any]
    model_fingerprint: str
    model_name: str
    model_kind: str
    threshold: float | None
    created: str
    generation: int
    segments: int
    bytes: int
    shards: int = 1
    search_device: str = "cpu"
    # The gallery's own stored calibration (reid.gallery.calibration), as a plain dict.
    calibration: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


# Stored items a recall measurement queries with, unless told otherwise.
RECALL_QUERIES = 1000


@dataclass
class RecallReport:
    """How well the gallery's index finds the exact nearest neighbours.

    Queries are stored items; each query's own item is left out of both answer lists.
    ``recall_at_1``: share of queries whose approximate first neighbour is the exact one.
    ``recall_at_k``: mean share of the exact k neighbours found in the approximate k.
    """

    index: str
    queries: int
    k: int
    recall_at_1: float
    recall_at_k: float
    index_qps: float
    exact_qps: float

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass
class CheckReport:
    """A passed gallery check: ``files`` verified by size and SHA-256, ``items`` rows and
    ``identities`` checked against the index, and the index's recall.  ``checksums``: the
    rows and fixed facts were verified against their checksums (True), not yet (False:
    galleries of an older format get them with their first write), or the backend keeps
    none (None)."""

    database: str
    items: int
    identities: int = 0
    files: int = 0
    checksums: bool | None = False
    recall: RecallReport | None = None
    # The duplicate scan (reid.gallery.check.scan_duplicates): items scanned, items that are
    # the same image as an item of another identity, near duplicates within an identity.
    scanned: int = 0
    same_image_other_identity: int = 0
    near_duplicates: int = 0

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)
