"""Weights from elsewhere: read a checkpoint file in any supported format and place its
tensors in a :class:`~reid.models.network.ReidNet`.

Formats: a bare state_dict; one wrapped as ``{"state_dict": ...}`` or ``{"model": ...}``;
``module.`` prefixes from DataParallel; the source implementation's own names
(torchvision, timm, torchreid: *native* names); fast-reid's ``backbone.`` / ``heads.``
names for its plain ResNet BoT; and our own model-folder weights. Files are read with
``weights_only=True``: a pickled whole model is refused with one line, never unpickled.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from reid.errors import ConfigError, ModelError
from reid.models.backbones import backbone_spec, build_backbone, source_key_mapper, timm_model, torchvision_model
from reid.models.registry import Artefact
from reid.paths import check_archive

SOURCES = {"torchreid": "native", "torchvision": "native", "fastreid": "fastreid", "reid": "reid"}
_HEADS = ("reduction.", "bnneck.", "classifier.")


# Bounds of a checkpoint file, checked before it is unpacked: a ResNet-152 with its
# optimizer state is under 1 GB and 3,000 tensors; a state_dict of any network here has
# fewer than 5,000 entries.
MAX_CHECKPOINT_BYTES = 4 << 30
MAX_CHECKPOINT_MEMBERS = 50_000
MAX_STATE_KEYS = 20_000


def load_checkpoint_file(path: Path, what: str = "checkpoint", unreadable: str = "not a PyTorch checkpoint") -> Any:
    """What ``torch.load`` reads from ``path`` (``weights_only=True``: tensors and plain
    values, never pickled code), after the file's size, its unpacked size and its number
    of entries are checked (:func:`reid.paths.check_archive`).

    Raises:
        ModelError: the file is too large, unpacks too large, or is not a readable
            checkpoint; one line naming it.
    """
    path = Path(path)
    try:
        check_archive(path, MAX_CHECKPOINT_BYTES, MAX_CHECKPOINT_MEMBERS, what)
    except ConfigError as exc:
        raise ModelError(str(exc)) from None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise _unreadable(path, exc, unreadable) from None


def check_tensors(state: dict[str, Any], path: Path) -> dict[str, torch.Tensor]:
    """``state``'s entries when they are a state_dict one can compute with: at most
    :data:`MAX_STATE_KEYS` keys, every value a dense tensor with storage (not meta, not
    sparse or quantized).

    Raises:
        ModelError: naming the file and the first entry that is not.
    """
    if len(state) > MAX_STATE_KEYS:
        raise ModelError(f"{path}: {len(state):,} entries, more than the {MAX_STATE_KEYS:,} a network's state_dict may have")
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            continue
        if value.is_meta or value.layout != torch.strided or value.is_quantized:
            kind = "a meta tensor (no values)" if value.is_meta else f"a {value.layout} tensor"
            raise ModelError(f"{path}: {key} is {kind}; a checkpoint holds dense tensors")
    return state


def read_state(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint file, unwrapped and without ``module.`` prefixes.

    Raises ModelError (one line naming the file) for a missing file, a pickled whole
    model, a file that is not a PyTorch checkpoint, or one that holds no tensors.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: checkpoint file not found")
    loaded = load_checkpoint_file(path)
    state = loaded
    for wrapper in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    if not isinstance(state, dict) or not state:
        raise ModelError(f"{path}: holds {type(loaded).__name__ if not isinstance(loaded, dict) else 'no weights'}, not a state_dict")
    tensors = {str(k): v for k, v in check_tensors(state, path).items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise ModelError(f"{path}: a dict of {len(state)} entries without any tensor; not a state_dict")
    if all(k.startswith("module.") for k in tensors):
        tensors = {k.removeprefix("module."): v for k, v in tensors.items()}
    return tensors


def _unreadable(path: Path, exc: Exception, what: str = "not a PyTorch checkpoint") -> ModelError:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    pickled = re.search(r"GLOBAL ([\w.]+)", text)
    if pickled:
        return ModelError(
            f"{path}: a pickled whole model ({pickled.group(1)}), not weights; load it in its own code "
            "and save model.state_dict() instead"
        )
    return ModelError(f"{path}: {what} ({exc.__class__.__name__})")


def detect_layout(state: dict[str, torch.Tensor]) -> str:
    """``fastreid`` (backbone./heads. names), ``reid`` (our model folders) or ``native``."""
    keys = list(state)
    if any(k.startswith("heads.") for k in keys) and any(k.startswith("backbone.") for k in keys):
        return "fastreid"
    if any(k.startswith("bnneck.") for k in keys) and any(k.startswith("backbone.") for k in keys):
        return "reid"
    return "native"


def artefact_state(artefact: Artefact, path: Path) -> dict[str, torch.Tensor]:
    """A registry artefact's tensors under the native names of its architecture."""
    state = read_state(path)
    if artefact.layout == "efficientnet-lite0-ordered":
        return ordered_rename(state, timm_model(artefact.architecture).state_dict(), path)
    if artefact.layout == "mobilenetv2-ordered":
        target = {k: v for k, v in torchvision_model(artefact.architecture).state_dict().items() if k.startswith("features.")}
        return ordered_rename(state, target, path)
    return state


def ordered_rename(state: dict[str, torch.Tensor], target: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
    """Give the i-th tensor of ``state`` the i-th name of ``target``; every shape must agree.

    Used where an implementation names its layers differently but creates them in the
    same order. Raises ModelError naming the first tensor that does not fit.
    """
    if len(state) != len(target):
        raise ModelError(f"{path}: {len(state)} tensors where the architecture has {len(target)}")
    renamed = {}
    for (source_key, tensor), (target_key, expected) in zip(state.items(), target.items()):
        if tensor.shape != expected.shape:
            raise ModelError(
                f"{path}: tensor {source_key} is {list(tensor.shape)} but its place {target_key} is {list(expected.shape)}"
            )
        renamed[target_key] = tensor
    return renamed


@dataclass
class Placed:
    """Tensors renamed to ReidNet's names; ``dropped`` counts the source's head tensors
    that have no place; ``unplaced`` lists tensors that belong nowhere."""

    state: dict[str, torch.Tensor] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    unplaced: list[str] = field(default_factory=list)


_DROP = "drop"


def _fastreid_name(key: str, mapper: Callable[[str], str | None]) -> str | None:
    if key.startswith("backbone."):
        mapped = mapper(key.removeprefix("backbone."))
        return None if mapped is None else f"backbone.{mapped}"
    if key.startswith("heads.bottleneck.0."):
        return "bnneck." + key.removeprefix("heads.bottleneck.0.")
    if key in ("heads.classifier.weight", "heads.weight"):
        return "classifier.weight"
    if key in ("pixel_mean", "pixel_std") or key.startswith("heads."):
        return _DROP
    return None


def _native_name(key: str, mapper: Callable[[str], str | None], family: str) -> str | None:
    mapped = mapper(key)
    if mapped is not None:
        return f"backbone.{mapped}"
    if family == "osnet" and key.startswith("fc."):
        return "reduction." + key.removeprefix("fc.")
    if key in ("classifier.weight", "classifier.bias") and family != "timm":
        return key  # torchreid's identity classifier
    if key.startswith(("fc.", "classifier.")):
        return _DROP  # torchvision's / timm's ImageNet classifier
    return None


def fit_artefact(artefact: Artefact, state: dict[str, torch.Tensor], path: Path) -> None:
    """Check that a registry artefact's tensors (native names) make its architecture's
    backbone, by loading them into one.  Raises ModelError naming ``path`` otherwise."""
    holder = nn.Module()
    holder.backbone, _ = build_backbone(artefact.architecture, 1)
    fit(holder, place(state, artefact.architecture, "native"), artefact.architecture, path)


def place(state: dict[str, torch.Tensor], architecture: str, layout: str) -> Placed:
    """Rename a checkpoint's tensors to ReidNet's names for ``architecture``.

    Native names: the backbone's through its source mapping, torchreid's ``fc`` to
    ``reduction`` and ``classifier`` to ``classifier``; a torchvision/timm ImageNet head
    is dropped. fast-reid: ``backbone.`` native names, ``heads.bottleneck.0`` to
    ``bnneck``, ``heads.classifier``/``heads.weight`` to ``classifier``.
    """
    mapper = source_key_mapper(architecture)
    family = backbone_spec(architecture).family
    placed = Placed()
    for key, tensor in state.items():
        if layout == "reid":
            target: str | None = key
        elif layout == "fastreid":
            target = _fastreid_name(key, mapper)
        else:
            target = _native_name(key, mapper, family)
        if target is None:
            placed.unplaced.append(key)
        elif target == _DROP:
            placed.dropped.append(key)
        else:
            placed.state[target] = tensor
    return placed


def fit(network: nn.Module, placed: Placed, architecture: str, source: Path | str) -> list[str]:
    """Load placed tensors into ``network``; return notes on what was dropped.

    Every backbone tensor must come from the file with its shape; head tensors
    (reduction, BNNeck, classifier) are taken where they fit and dropped otherwise.
    Raises ModelError, one line naming the file and what does not fit (how many tensors,
    which layer), never a key dump.
    """
    target = network.state_dict()
    backbone = [k for k in target if k.startswith("backbone.")]
    missing = [k for k in backbone if k not in placed.state]
    unplaced = placed.unplaced + [k for k in placed.state if k not in target and not k.startswith(_HEADS)]
    if missing or unplaced:
        parts = []
        if missing:
            parts.append(f"{len(missing)} of {len(backbone)} backbone tensors missing (first {missing[0]})")
        if unplaced:
            parts.append(f"{len(unplaced)} tensors of the file have no place (first {unplaced[0]})")
        raise ModelError(f"{source}: weights do not fit {architecture}: {'; '.join(parts)}")
    for key in backbone:
        if placed.state[key].shape != target[key].shape:
            raise ModelError(
                f"{source}: weights do not fit {architecture}: layer {key} is {list(placed.state[key].shape)} "
                f"in the file but {list(target[key].shape)} here"
            )
    dropped_heads = []
    merged = dict(target)
    for key, tensor in placed.state.items():
        if key in backbone:
            merged[key] = tensor
        elif key in target and tensor.shape == target[key].shape:
            merged[key] = tensor
        else:
            dropped_heads.append((key, tensor))
    network.load_state_dict(merged)
    notes = []
    classifier = [t for k, t in dropped_heads if k.startswith("classifier.") and k.endswith("weight")]
    if classifier:
        notes.append(f"its classifier of {classifier[0].shape[0]} classes dropped")
    other = [k for k, _ in dropped_heads if not k.startswith("classifier.")]
    if other:
        notes.append(f"{len(other)} head tensors ({other[0].split('.')[0]}) dropped")
    if placed.dropped:
        notes.append(f"the source's classifier ({len(placed.dropped)} tensors) dropped")
    return notes
