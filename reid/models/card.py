"""The model card: everything downstream needs to use an encoder without guessing.

A card is stored as ``card.json`` beside the weights of a model folder (or beside an
exported file).  Distances and thresholds on a card are Euclidean distances between
L2-normalized embeddings (range 0..2), the one distance used everywhere in reid.

Every field is validated (types and ranges) when a card is read, so a hand-edited card
with, say, a zero std or a textual dimension is refused with one line naming the file
and the field.

The fingerprint (version 2) is a hash over the weights and every card field that changes
an embedding (:data:`EMBEDDING_FIELDS`), so a card edited after saving no longer matches
its own fingerprint, and a gallery made with one model refuses another.  Cards written
before version 2 carry a fingerprint of the weights alone (``fingerprint_version`` 1 or
absent): they are refused, since a card rewritten to version 1 could change any field
unseen; galleries made with them still open with the same weights under a version-2 card.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr, TypeAdapter, ValidationError

from reid.decision import check_quantiles
from reid.errors import ConfigError, ModelError
from reid.paths import file_sha256, load_json_bounded, write_bytes_atomic
from reid.serial import as_dict

CARD_FILE = "card.json"
WEIGHTS_FILE = "weights.pt"

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

FINGERPRINT_VERSION = 2
# The card fields that change what an encoder returns for an image: a fingerprint of
# version 2 covers them, and the weights.
EMBEDDING_FIELDS = (
    "format",
    "architecture",
    "embedding_dim",
    "input_size",
    "mean",
    "std",
    "channel_order",
    "pooling",
    "neck",
    "last_stride",
    "normalized_output",
)
# Embedding fields added later, with the value every earlier card implies: a fingerprint
# covers one only where it differs, so the fingerprints of earlier cards stay valid.
LATER_EMBEDDING_FIELDS = {"stem_pool": "padded"}
MAX_SIDE = 4096
SHOWN_INPUT = 60  # characters of an offending value quoted in an error

Side = Annotated[StrictInt, Field(ge=8, le=MAX_SIDE)]
# Mean and std apply to pixels scaled to 0..1.
Mean = Annotated[float, Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]
Std = Annotated[float, Field(strict=True, gt=0.0, le=255.0, allow_inf_nan=False)]
Distance = Annotated[float, Field(strict=True, ge=0.0, le=2.0, allow_inf_nan=False)]
Fingerprint = Annotated[StrictStr, Field(pattern=r"^([0-9a-f]{16})?$")]
Rate = Annotated[float, Field(strict=True, gt=0.0, le=1.0, allow_inf_nan=False)]
MAX_QUANTILES = 64

# bnneck: BN feature is the embedding (reid train's); fc: Linear + BN + ReLU, torchreid's OSNet
# head; none: the pooled feature itself, torchreid's ResNet.
NECKS = ("bnneck", "fc", "none")
POOLINGS = ("avg", "gem")
# A ResNet's first max-pool: padded (torchvision's, padding 1) or ceil (fast-reid's, no
# padding, output size rounded up).
STEM_POOLS = ("padded", "ceil")


@dataclass
class ModelCard:
    """Description of a trained encoder; see DESIGN.md "Model folder".

    ``input_size`` is (height, width) in pixels; ``mean``/``std`` apply per channel to
    pixels scaled to 0..1; ``threshold`` is a Euclidean distance between unit embeddings
    (0..2).  ``fingerprint`` identifies the weights and the fields in
    :data:`EMBEDDING_FIELDS` together (version 2); ``weights_fingerprint`` the weights alone.
    """

    name: StrictStr
    architecture: Annotated[StrictStr, Field(min_length=1)]
    embedding_dim: Annotated[StrictInt, Field(ge=1, le=65536)]
    input_size: tuple[Side, Side] = (256, 128)
    mean: tuple[Mean, Mean, Mean] = IMAGENET_MEAN
    std: tuple[Std, Std, Std] = IMAGENET_STD
    channel_order: Literal["rgb", "bgr"] = "rgb"
    pooling: Literal[POOLINGS] = "avg"  # type: ignore[valid-type]
    neck: Literal[NECKS] = "bnneck"  # type: ignore[valid-type]
    last_stride: Annotated[StrictInt, Field(ge=1, le=2)] = 1
    stem_pool: Literal[STEM_POOLS] = "padded"  # type: ignore[valid-type]
    num_classes: Annotated[StrictInt, Field(ge=0, le=100_000_000)] = 0
    pretrained: StrictStr = "none"
    kind: StrictStr = "person"
    loss: dict[str, Any] = field(default_factory=dict)
    training_data: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    threshold: Distance | None = None
    threshold_source: StrictStr = ""
    # (false-accept rate, distance) on the impostor pairs the threshold was calibrated on
    # (reid.decision.impostor_quantiles); what --far reads.  Absent on older cards, and on
    # cards calibrated before reid recorded them: such cards refuse --far.
    impostor_quantiles: Annotated[tuple[tuple[Rate, Distance], ...], Field(max_length=MAX_QUANTILES)] = ()
    fingerprint: Fingerprint = ""
    # Absent on cards written before the fingerprint covered the card: version 1.
    fingerprint_version: Annotated[StrictInt, Field(ge=1, le=FINGERPRINT_VERSION)] = 1
    weights_fingerprint: Fingerprint = ""
    format: Literal["torch", "onnx", "torchscript", "dlib", "openvino"] = "torch"
    normalized_output: StrictBool = True
    created: StrictStr = ""
    # "5-point": the encoder was trained on face chips aligned by five landmarks
    # (reid.detect.align); detectors that find landmarks then hand it aligned chips.  Not
    # in the fingerprint: it says how crops are cut for the encoder, as the detector's
    # margin does, and leaves the weights and their preprocessing as they are.
    face_alignment: Literal["none", "5-point"] = "none"

    @property
    def aligned_face_size(self) -> tuple[int, int] | None:
        """(height, width) of the aligned face chips the encoder asks for, or None when it
        takes plain crops (``face_alignment``)."""
        return (self.input_size[0], self.input_size[1]) if self.face_alignment == "5-point" else None

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "card") -> ModelCard:
        """A validated card; ModelError naming ``source`` and the first bad field otherwise."""
        known = {f.name for f in fields(cls)}
        missing = [k for k in ("name", "architecture", "embedding_dim") if k not in data]
        if missing:
            raise ModelError(f"{source}: model card lacks {', '.join(missing)}")
        return validate_card({k: v for k, v in data.items() if k in known}, source)


_CARD_SCHEMA = TypeAdapter(ModelCard)


def validate_card(card: ModelCard | dict[str, Any], source: str) -> ModelCard:
    """``card`` (a card or its fields) checked field by field: types and ranges.

    Raises ModelError naming ``source``, the field and the offending value.
    """
    values = card.to_dict() if isinstance(card, ModelCard) else card
    try:
        checked = _CARD_SCHEMA.validate_python(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
        shown = json.dumps(error["input"], default=str)
        if len(shown) > SHOWN_INPUT:
            shown = shown[:SHOWN_INPUT] + "..."
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise ModelError(f"{source}: field {where or 'card'}: {error['msg'].lower()}, got {shown}{more}") from None
    try:
        check_quantiles(checked.impostor_quantiles)
    except ValueError as exc:
        raise ModelError(f"{source}: field impostor_quantiles: {exc}") from None
    return checked


def embedding_fingerprint(card: ModelCard, weights: str) -> str:
    """The version-2 fingerprint: a hash of ``weights`` (the weights' fingerprint) and the
    card's :data:`EMBEDDING_FIELDS`, 16 hex digits."""
    data = card.to_dict()
    covered: dict[str, Any] = {name: data[name] for name in EMBEDDING_FIELDS}
    covered.update({name: data[name] for name, earlier in LATER_EMBEDDING_FIELDS.items() if data[name] != earlier})
    # 0 and 0.0 are the same mean; the hash must not tell them apart.
    covered["mean"] = [float(v) for v in covered["mean"]]
    covered["std"] = [float(v) for v in covered["std"]]
    payload = json.dumps({"version": FINGERPRINT_VERSION, "weights": weights, **covered}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def seal_card(card: ModelCard, weights: str) -> ModelCard:
    """``card`` with a version-2 fingerprint for the weights whose fingerprint is ``weights``."""
    return replace(
        card,
        fingerprint_version=FINGERPRINT_VERSION,
        weights_fingerprint=weights,
        fingerprint=embedding_fingerprint(card, weights),
    )


def ready_made_card(
    given: ModelCard | None,
    weights: str,
    built: Callable[[str], ModelCard],
    describes: Callable[[ModelCard], str | None],
    weights_source: str,
) -> ModelCard:
    """The card of a ready-made encoder (``sface``, ``dlib-face``): its built-in card
    (``built(weights)``) when none is ``given``, else the given one (a calibrated card from a
    model folder) verified against the weights at hand.

    ``describes`` returns None for a card of this encoder, else why it is not.  Raises
    ModelError naming the card or the weights (:func:`verify_card`).
    """
    if given is None:
        return built(weights)
    problem = describes(given)
    if problem is not None:
        raise ModelError(f"{given.name}: card does not describe {problem}")
    return verify_card(given, weights, f"{given.name} card", f"{given.name}: {weights_source}")


def verify_card(card: ModelCard, weights: str, card_source: str, weights_source: str) -> ModelCard:
    """Check that ``card`` was written for these weights and not edited since; return it sealed.

    ``weights`` is the fingerprint of the weights at hand.  The card must be of fingerprint
    version 2 and carry the weights' fingerprint and match its own embedding fields.
    Raises ModelError naming the weights (other weights) or the card (edited card, or a
    card of version 1: it vouches for the weights alone, so a card rewritten to version 1
    could change any embedding field unseen).
    """
    if not card.fingerprint:
        raise ModelError(f"{card_source}: model card has no fingerprint; it cannot vouch for any weights")
    if card.fingerprint_version < FINGERPRINT_VERSION:
        raise ModelError(
            f"{card_source}: model card of fingerprint version {card.fingerprint_version} vouches for the weights alone, "
            f"not for the fields that change embeddings; refused (save the model again with this version of reid)"
        )
    recorded = card.weights_fingerprint
    if recorded != weights:
        raise ModelError(
            f"{weights_source}: weights fingerprint {weights} does not match the card's {recorded or '(none)'}"
        )
    if card.fingerprint_version > 1 and card.fingerprint != embedding_fingerprint(card, weights):
        raise ModelError(
            f"{card_source}: card fields that change embeddings ({', '.join(EMBEDDING_FIELDS)}) differ from "
            f"those the model was saved with (fingerprint {card.fingerprint} no longer matches)"
        )
    return seal_card(card, weights)


def save_card(card: ModelCard, folder: Path) -> Path:
    """Write ``card.json`` atomically into ``folder`` and return its path."""
    path = Path(folder) / CARD_FILE
    validate_card(card, str(path))
    write_bytes_atomic(path, (json.dumps(card.to_dict(), indent=2) + "\n").encode())
    return path


# A card with the history of a thousand epochs is under 1 MB.
MAX_CARD_BYTES = 64 << 20


def load_card(folder: Path) -> ModelCard:
    """Read and validate ``folder/card.json`` (:func:`read_card_json`).

    Raises:
        ModelError: the card is missing, not JSON, not an object, or a field is invalid;
            one line naming the file.
    """
    path = Path(folder) / CARD_FILE
    if not path.is_file():
        raise ModelError(f"{path}: no model card (expected {CARD_FILE} in the model folder)")
    return read_card_json(path)


def read_card_json(path: Path) -> ModelCard:
    """The card in the JSON file ``path``, bounded before it is parsed (at most
    :data:`MAX_CARD_BYTES`, nesting bounded) and validated field by field.

    Raises:
        ModelError: too large, nested too deep, not JSON, not an object, or a field is
            invalid; one line naming the file.
    """
    try:
        data = load_json_bounded(path, MAX_CARD_BYTES, "model card")
    except ConfigError as exc:
        raise ModelError(str(exc)) from None
    except OSError as exc:
        raise ModelError(f"{path}: model card cannot be read ({exc.strerror or exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path}: model card must be a JSON object")
    return ModelCard.from_dict(data, source=str(path))


def file_fingerprint(path: Path) -> str:
    """SHA-256 of a file's bytes, shortened; identifies the exact weights."""
    return file_sha256(path)[:16]

