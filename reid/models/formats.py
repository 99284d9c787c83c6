"""Checkpoint formats: one :class:`CheckpointFormat` per source of weights.

Each entry says how a file of its source is recognised, how its tensor names become
ReidNet's, which of its tensors are its classifier (the only tensors ever dropped), and
the head its network has after the backbone (pooling, neck, last stride, stem max-pool,
input normalisation), so that an import reproduces the source's own eval forward.
``reid import``, ``--pretrained FILE`` and the registry's artefacts all read weights
through :data:`FORMATS`; adding a source is adding one entry.

- ``reid``: our own model-folder weights (``backbone.``, ``pool.``, ``reduction.``,
  ``bnneck.``, ``classifier.``).
- ``fastreid``: fast-reid's ``Baseline`` (``backbone.`` + ``heads.``): its ResNet's stem
  max-pool rounds up without padding; ``heads.pool_layer.p`` is a learned GeM exponent;
  ``heads.bottleneck`` is the BNNeck, after a 1x1 conv when ``EMBEDDING_DIM`` is set;
  older releases name it ``heads.bnneck``; ``pixel_mean``/``pixel_std`` are its input
  normalisation (0..255 pixels).
- ``torchreid``: torchreid's own names; ``fc`` (Linear + BatchNorm1d + ReLU) is its
  embedding layer (OSNet, ``resnet50_fc512`` with last stride 1), without it a ResNet
  embeds its pooled feature with last stride 2.
- ``torchvision``: a plain state_dict of the architecture's own implementation
  (torchvision, timm), ImageNet classifier included.
- ``efficientnet-lite0-ordered``, ``mobilenetv2-ordered``: registry artefacts whose layers
  are named otherwise but created in the same order as timm's / torchvision's.
- ``torchreid-onnx``: an ONNX export of torchreid's OSNet, its BatchNorms folded into the
  convolutions; read back into torchreid's names by :mod:`reid.models.onnx_import`, checked
  by running both, then placed as ``torchreid``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

from reid.errors import ModelError
from reid.models.backbones import backbone_spec, build_backbone, source_key_mapper, timm_model, torchvision_model
from reid.models.checkpoints import read_state
from reid.models.names import NAMED_FORMATS


class Artefact(Protocol):
    """What a checkpoint format needs of a registry artefact (:class:`reid.models.registry.
    Artefact`): its name for errors, its ``layout`` (a key of :data:`FORMATS`, or the kind of
    a file that is no PyTorch checkpoint) and the architecture its tensors make.  Stated here
    so that the formats stand below the registry that fetches the files."""

    @property
    def name(self) -> str: ...

    @property
    def layout(self) -> str: ...

    @property
    def architecture(self) -> str: ...


# Where a source tensor goes: a ReidNet name, or one of these.
CLASSIFIER = "<classifier>"  # the source's identity or ImageNet classifier: dropped
ON_CARD = "<card>"  # read into the card instead (fast-reid's input normalisation)


@dataclass(frozen=True)
class Head:
    """What the source network does after its backbone, as ReidNet options."""

    neck: str
    embedding_dim: int | None
    pooling: str
    last_stride: int
    stem_pool: str = "padded"
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None


@dataclass
class Placed:
    """A checkpoint's tensors under ReidNet's names; ``origin`` maps each back to the
    file's name; ``classifier`` holds the file's classifier tensors (by the file's
    names); ``unplaced`` lists the file's tensors that belong nowhere."""

    state: dict[str, torch.Tensor] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    classifier: dict[str, torch.Tensor] = field(default_factory=dict)
    unplaced: list[str] = field(default_factory=list)


State = dict[str, torch.Tensor]
Mapper = Callable[[str], "str | None"]


@dataclass(frozen=True)
class CheckpointFormat:
    """One source of weights.

    ``recognises(state, architecture)`` tells a file of this source by its names (None:
    only when named); ``rename(key, state, mapper)`` gives a tensor's ReidNet name (or
    :data:`CLASSIFIER`, :data:`ON_CARD`, None for no place) and the tensor as ReidNet holds
    it; ``head(state, architecture, path)`` the source network's head; ``prepare``
    renames a file to its architecture's own names first (ordered formats); ``read``
    reads a file that is no PyTorch checkpoint into the names ``rename`` reads;
    ``folded_norms`` says its BatchNorms come folded into the convolutions (identity plus
    bias, no statistics), so training keeps them in eval mode.
    """

    name: str
    source: str
    recognises: Callable[[State, str], bool] | None
    rename: Callable[[str, State, Mapper], tuple[str, torch.Tensor] | str | None]
    head: Callable[[State, str, Path], Head]
    prepare: Callable[[State, str, Path], State] | None = None
    read: Callable[[Path, str], State] | None = None
    folded_norms: bool = False

    def place(self, state: State, architecture: str) -> Placed:
        """Rename ``state``'s tensors to ReidNet's names for ``architecture``."""
        mapper = source_key_mapper(architecture)
        placed = Placed()
        for key in state:
            target = self.rename(key, state, mapper)
            if target is None:
                placed.unplaced.append(key)
            elif target == CLASSIFIER:
                placed.classifier[key] = state[key]
            elif isinstance(target, tuple):
                placed.state[target[0]], placed.origin[target[0]] = target[1], key
        return placed


def _width(state: State, key: str, dims: int, path: Path) -> int:
    """The output width of the layer tensor ``key``, which must have ``dims`` dimensions."""
    tensor = state[key]
    if tensor.dim() != dims or tensor.shape[0] < 1:
        raise ModelError(f"{path}: {key} has shape {list(tensor.shape)}; a layer of this kind has {dims} dimension(s)")
    return int(tensor.shape[0])


def _is_resnet(architecture: str) -> bool:
    return architecture.startswith(("resnet", "resnext"))


def _backbone(name: str, tensor: torch.Tensor, mapper: Mapper) -> tuple[str, torch.Tensor] | None:
    """A backbone tensor under ReidNet's name, from its source's name (no prefix)."""
    mapped = mapper(name)
    return None if mapped is None else (f"backbone.{mapped}", tensor)


# --- reid's own model folders -------------------------------------------------------

_REID_PARTS = ("backbone.", "pool.", "reduction.", "bnneck.", "classifier.")


def _reid_recognises(state: State, architecture: str) -> bool:
    return any(k.startswith("backbone.") for k in state) and all(k.startswith(_REID_PARTS) for k in state)


def _reid_rename(key: str, state: State, mapper: Mapper) -> tuple[str, torch.Tensor] | str | None:
    if key.startswith("classifier."):
        return CLASSIFIER
    return key, state[key]


def _reid_head(state: State, architecture: str, path: Path) -> Head:
    pooling = "gem" if "pool.p" in state else "avg"
    if "bnneck.weight" in state:
        return Head("bnneck", _width(state, "bnneck.weight", 1, path), pooling, 1)
    if "reduction.0.weight" in state:
        return Head("fc", _width(state, "reduction.0.weight", 2, path), pooling, 1)
    return Head("none", None, pooling, 1)


# --- fast-reid ----------------------------------------------------------------------


def _fastreid_recognises(state: State, architecture: str) -> bool:
    return any(k.startswith("heads.") for k in state) and any(k.startswith("backbone.") for k in state)


def _fastreid_conv(state: State) -> bool:
    """True when the head has EMBEDDING_DIM's 1x1 conv before its BatchNorm."""
    weight = state.get("heads.bottleneck.0.weight")
    return weight is not None and weight.dim() == 4


def _fastreid_rename(key: str, state: State, mapper: Mapper) -> tuple[str, torch.Tensor] | str | None:
    tensor = state[key]
    if key.startswith("backbone."):
        return _backbone(key.removeprefix("backbone."), tensor, mapper)
    if key in ("pixel_mean", "pixel_std"):
        return ON_CARD
    if key in ("heads.classifier.weight", "heads.classifier.bias", "heads.weight"):
        return CLASSIFIER
    if key == "heads.pool_layer.p" and tensor.numel() == 1:
        return "pool.p", tensor.reshape(())
    conv = _fastreid_conv(state)
    if conv and key == "heads.bottleneck.0.weight" and tensor.shape[2:] == (1, 1):
        return "reduction.weight", tensor.flatten(1)
    norm = "heads.bottleneck.1." if conv else "heads.bottleneck.0."
    for prefix in (norm, "heads.bnneck."):
        if key.startswith(prefix):
            return "bnneck." + key.removeprefix(prefix), tensor
    return None


def _fastreid_normalisation(state: State, path: Path) -> tuple[tuple[float, float, float] | None, tuple[float, float, float] | None]:
    """fast-reid's ``pixel_mean``/``pixel_std`` (on 0..255 pixels) on 0..1 pixels."""
    found = []
    for key in ("pixel_mean", "pixel_std"):
        tensor = state.get(key)
        if tensor is None:
            found.append(None)
            continue
        if tensor.numel() != 3 or not torch.isfinite(tensor).all():
            raise ModelError(f"{path}: {key} has shape {list(tensor.shape)}; fast-reid's holds 3 finite values")
        found.append(tuple(float(v) / 255.0 for v in tensor.flatten()))
    return found[0], found[1]  # type: ignore[return-value]


def _fastreid_head(state: State, architecture: str, path: Path) -> Head:
    if _fastreid_conv(state):
        norm = "heads.bottleneck.1.weight"
    else:
        norm = next((k for k in ("heads.bottleneck.0.weight", "heads.bnneck.weight") if k in state), "")
    pooling = "gem" if "heads.pool_layer.p" in state else "avg"
    stem = "ceil" if _is_resnet(architecture) else "padded"
    mean, std = _fastreid_normalisation(state, path)
    if norm in state:
        return Head("bnneck", _width(state, norm, 1, path), pooling, 1, stem, mean, std)
    # WITH_BNNECK false: the pooled feature (a conv without its BatchNorm has no place).
    return Head("none", None, pooling, 1, stem, mean, std)


# --- torchreid ----------------------------------------------------------------------


def _torchreid_recognises(state: State, architecture: str) -> bool:
    if backbone_spec(architecture).family == "osnet":
        return True
    if backbone_spec(architecture).family == "timm":
        return False
    return "fc.0.weight" in state or ("classifier.weight" in state and "fc.weight" not in state)


def _torchreid_rename(key: str, state: State, mapper: Mapper) -> tuple[str, torch.Tensor] | str | None:
    if key in ("classifier.weight", "classifier.bias"):
        return CLASSIFIER
    # fc = Linear + BatchNorm1d + ReLU: the layers ReidNet's ``fc`` neck has.
    if key.startswith(("fc.0.", "fc.1.")):
        return "reduction." + key.removeprefix("fc."), state[key]
    return _backbone(key, state[key], mapper)


def _torchreid_head(state: State, architecture: str, path: Path) -> Head:
    if "fc.0.weight" in state:
        # resnet50_fc512 (and OSNet) run their last stage with stride 1.
        return Head("fc", _width(state, "fc.0.weight", 2, path), "avg", 1)
    return Head("none", None, "avg", 2 if _is_resnet(architecture) else 1)


# --- plain state_dicts of torchvision / timm ------------------------------------------


def _plain_rename(key: str, state: State, mapper: Mapper) -> tuple[str, torch.Tensor] | str | None:
    placed = _backbone(key, state[key], mapper)
    if placed is not None:
        return placed
    if key.startswith(("fc.", "classifier.")):
        return CLASSIFIER  # torchvision's / timm's ImageNet classifier
    return None


def _plain_head(state: State, architecture: str, path: Path) -> Head:
    return Head("none", None, "avg", 2 if _is_resnet(architecture) else 1)


def ordered_rename(state: State, target: State, path: Path) -> State:
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


def _timm_order(state: State, architecture: str, path: Path) -> State:
    return ordered_rename(state, timm_model(architecture).state_dict(), path)


def _torchvision_features_order(state: State, architecture: str, path: Path) -> State:
    target = {k: v for k, v in torchvision_model(architecture).state_dict().items() if k.startswith("features.")}
    return ordered_rename(state, target, path)


def _read_osnet_onnx(path: Path, architecture: str) -> State:
    from reid.models.onnx_import import osnet_onnx_state  # onnx is an extra: imported when such a file is read

    return osnet_onnx_state(path, architecture)


_ENTRIES = [
    CheckpointFormat("reid", "reid", _reid_recognises, _reid_rename, _reid_head),
    CheckpointFormat("fastreid", "fast-reid", _fastreid_recognises, _fastreid_rename, _fastreid_head),
    CheckpointFormat("torchreid", "torchreid", _torchreid_recognises, _torchreid_rename, _torchreid_head),
    CheckpointFormat("torchvision", "a plain state_dict", lambda state, architecture: True, _plain_rename, _plain_head),
    CheckpointFormat(
        "efficientnet-lite0-ordered", "EfficientNet-Lite0 in creation order", None, _plain_rename, _plain_head, _timm_order,
    ),
    CheckpointFormat(
        "mobilenetv2-ordered", "MobileNetV2 features in creation order", None, _plain_rename, _plain_head,
        _torchvision_features_order,
    ),
    CheckpointFormat(
        "torchreid-onnx", "an ONNX export of torchreid's OSNet", None, _torchreid_rename, _torchreid_head,
        read=_read_osnet_onnx, folded_norms=True,
    ),
]
# Recognition tries them in this order; the plain state_dict is the last resort.
FORMATS: dict[str, CheckpointFormat] = {entry.name: entry for entry in _ENTRIES}
# What ``--from`` accepts (:data:`reid.models.names.NAMED_FORMATS`, named there for help that
# loads no engine): the formats a file is recognised as.
if NAMED_FORMATS != tuple(name for name, entry in FORMATS.items() if entry.recognises is not None):
    raise AssertionError("reid.models.names.NAMED_FORMATS must name the recognised formats of FORMATS")


def checkpoint_format(state: State, architecture: str, name: str | None = None) -> CheckpointFormat:
    """The format ``name`` (a key of :data:`FORMATS`), else the first that recognises
    ``state``. Raises ModelError for an unknown name."""
    if name is not None:
        if name not in FORMATS:
            raise ModelError(f"unknown checkpoint format {name!r}; choose one of {', '.join(NAMED_FORMATS)}")
        return FORMATS[name]
    return next(f for f in FORMATS.values() if f.recognises is not None and f.recognises(state, architecture))


def prepared(fmt: CheckpointFormat, state: State, architecture: str, path: Path) -> State:
    """``state`` under the names ``fmt.rename`` reads (ordered formats rename first)."""
    return fmt.prepare(state, architecture, path) if fmt.prepare is not None else state


def named(names: list[str], limit: int = 3) -> str:
    """A few tensor names and how many more, for a one-line message."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# Parts of networks reid has no layers for, named when their tensors are refused.
_KNOWN_EXTRAS = {".IN.": "instance-norm layers of an IBN network", "NL_": "non-local blocks"}


def _why(names: list[str]) -> str:
    kinds = [what for part, what in _KNOWN_EXTRAS.items() if any(part in n for n in names)]
    return f" ({', '.join(kinds)}, which reid's backbones do not have)" if kinds else ""


def fit(network: nn.Module, placed: Placed, architecture: str, source: Path | str, exact: bool) -> list[str]:
    """Load placed tensors into ``network``; return notes on what was dropped or not used.

    Every backbone tensor of the network must come from the file, with its shape. With
    ``exact`` (imports) so must every other tensor, and every tensor of the file but its
    classifier must find a place; otherwise (training starts) head tensors are taken where
    they fit and the rest start fresh. Raises ModelError, one line naming the file and
    the tensors that do not fit.
    """
    target = network.state_dict()
    backbone = [k for k in target if k.startswith("backbone.")]
    needed = list(target) if exact else backbone
    missing = [k for k in needed if k not in placed.state]
    homeless = placed.unplaced + [placed.origin[k] for k in placed.state if k not in target and (exact or k.startswith("backbone."))]
    if missing or homeless:
        parts = []
        if homeless:
            parts.append(f"{len(homeless)} tensors of the file have no place: {named(homeless, 2)}{_why(homeless)}")
        if missing:
            parts.append(f"{len(missing)} of the network's {len(needed)} tensors not in the file (first {missing[0]})")
        raise ModelError(f"{source}: weights do not fit {architecture}: {'; '.join(parts)}")
    misfits = [k for k in placed.state if k in target and placed.state[k].shape != target[k].shape]
    for key in misfits:
        if exact or key in backbone:
            raise ModelError(
                f"{source}: weights do not fit {architecture}: layer {placed.origin[key]} is "
                f"{list(placed.state[key].shape)} in the file but {list(target[key].shape)} here"
            )
    taken = {k: v for k, v in placed.state.items() if k in target and k not in misfits}
    network.load_state_dict({**target, **taken})
    notes = []
    weights = [t for t in placed.classifier.values() if t.dim() == 2]
    if weights:
        notes.append(f"its classifier of {weights[0].shape[0]} classes dropped")
    elif placed.classifier:
        notes.append(f"its classifier ({len(placed.classifier)} tensors) dropped")
    unused = [placed.origin[k] for k in placed.state if k not in taken]
    if unused:
        notes.append(f"{len(unused)} head tensors of the file ({named(unused, 1)}) not used: this network's head starts fresh")
    return notes


def artefact_format(artefact: Artefact) -> CheckpointFormat:
    """The format of a registry artefact's weights (its ``layout``; an ONNX export of an
    OSNet reads as ``torchreid-onnx``); ModelError for an artefact whose weights do not
    import (a TensorFlow graph, an OpenVINO IR, another network's ONNX file)."""
    if artefact.layout == "onnx" and backbone_spec(artefact.architecture).family == "osnet":
        return FORMATS["torchreid-onnx"]
    if artefact.layout not in FORMATS:
        raise ModelError(f"{artefact.name} is a {artefact.layout} file, not a PyTorch checkpoint")
    return FORMATS[artefact.layout]


def artefact_state(artefact: Artefact, path: Path) -> State:
    """A registry artefact's tensors under the names its format's ``rename`` reads (the
    architecture's own names for the ordered formats)."""
    return read_weights(artefact_format(artefact), path, artefact.architecture)


def read_weights(fmt: CheckpointFormat, path: Path, architecture: str) -> State:
    """The tensors of ``path``, a file of format ``fmt``, under the names ``fmt.rename``
    reads. Raises ModelError naming the file."""
    if fmt.read is not None:
        return fmt.read(path, architecture)
    return prepared(fmt, read_state(path), architecture, path)


def fit_artefact(artefact: Artefact, state: State, path: Path) -> None:
    """Check that a registry artefact's tensors (from :func:`artefact_state`) make its
    architecture's backbone, by loading them into one. Raises ModelError naming ``path``."""
    holder = nn.Module()
    holder.backbone, _ = build_backbone(artefact.architecture, 1)
    fit(holder, artefact_format(artefact).place(state, artefact.architecture), artefact.architecture, path, exact=False)
