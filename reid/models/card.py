"""The model card: everything downstream needs to use an encoder without guessing.

A card is stored as ``card.json`` beside the weights of a model folder (or beside an
exported file).  Distances and thresholds on a card are Euclidean distances between
L2-normalized embeddings (range 0..2), the one distance used everywhere in reid.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from reid.errors import ModelError

CARD_FILE = "card.json"
WEIGHTS_FILE = "weights.pt"

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class ModelCard:
    """Description of a trained encoder; see DESIGN.md "Model folder"."""

    name: str
    architecture: str
    embedding_dim: int
    input_size: tuple[int, int] = (256, 128)
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    channel_order: str = "rgb"
    pooling: str = "avg"
    neck: str = "bnneck"
    last_stride: int = 1
    num_classes: int = 0
    pretrained: str = "none"
    kind: str = "person"
    loss: dict[str, Any] = field(default_factory=dict)
    training_data: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    threshold: float | None = None
    threshold_source: str = ""
    fingerprint: str = ""
    format: str = "torch"
    normalized_output: bool = True
    created: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["input_size"] = list(self.input_size)
        data["mean"] = list(self.mean)
        data["std"] = list(self.std)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "card") -> ModelCard:
        known = {f.name for f in fields(cls)}
        missing = [k for k in ("name", "architecture", "embedding_dim") if k not in data]
        if missing:
            raise ModelError(f"{source}: model card lacks {', '.join(missing)}")
        values = {k: v for k, v in data.items() if k in known}
        for key in ("input_size", "mean", "std"):
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)


def save_card(card: ModelCard, folder: Path) -> Path:
    """Write ``card.json`` atomically into ``folder`` and return its path."""
    path = Path(folder) / CARD_FILE
    atomic_write_bytes(path, (json.dumps(card.to_dict(), indent=2) + "\n").encode())
    return path


def load_card(folder: Path) -> ModelCard:
    path = Path(folder) / CARD_FILE
    if not path.is_file():
        raise ModelError(f"{path}: no model card (expected {CARD_FILE} in the model folder)")
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: model card is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path}: model card must be a JSON object")
    return ModelCard.from_dict(data, source=str(path))


def file_fingerprint(path: Path) -> str:
    """SHA-256 of a file's bytes, shortened; identifies the exact weights."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write a file so that readers see the old or the new content, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename inside ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
