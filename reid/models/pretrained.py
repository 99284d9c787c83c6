"""Where a network's training starts: ``--pretrained imagenet``, a registry artefact by
name, a checkpoint file, or ``none``.

``imagenet`` means it: the registry's cached ImageNet weights for the architecture, else a
download, else a one-line error that says how to train from scratch. There is no silent
random start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from reid.errors import ModelError
from reid.models.backbones import architecture_available, backbone_spec
from reid.models.card import IMAGENET_MEAN, IMAGENET_STD
from reid.models.checkpoints import read_state
from reid.models.formats import FORMATS, artefact_format, artefact_state, checkpoint_format, fit, prepared, read_weights
from reid.models.registry import (
    ARTEFACTS,
    Artefact,
    artefact_path,
    cached,
    fetch,
    imagenet_artefacts,
    is_present,
    is_valid,
)

NO_START = ("none", "")


@dataclass
class Start:
    """Tensors to start from, their format (a key of :data:`reid.models.formats.FORMATS`),
    a description for the card, and the input normalisation the tensors were trained with
    (per channel, on pixels scaled to 0..1). Training normalises with it and the model's
    card records it, so the start sees the inputs it learned from. ``embeds``: the start
    is an embedding model (a registry artefact of another kind than an ImageNet backbone,
    or a checkpoint file in a Re-ID format: reid's, torchreid's, fast-reid's, an OSNet
    ONNX export), whose layers training moves more gently."""

    state: dict[str, torch.Tensor]
    format: str
    label: str
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    # A model that already embeds (a Re-ID model or face encoder), not an ImageNet backbone.
    embeds: bool = False


def start_normalisation(start: Start | None) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """``(mean, std)`` a network built from ``start`` is trained with: the start's own,
    ImageNet's for a random start."""
    return (IMAGENET_MEAN, IMAGENET_STD) if start is None else (start.mean, start.std)


def _artefact_start(artefact: Artefact, path: Path) -> Start:
    return Start(
        artefact_state(artefact, path), artefact_format(artefact).name, f"{artefact.name} ({artefact.description}, {artefact.licence})",
        mean=artefact.mean, std=artefact.std, embeds=artefact.kind != "imagenet-backbone",
    )


def imagenet_offline(architecture: str, verify: bool = True) -> Artefact | None:
    """The architecture's first ImageNet start that needs no network: a verified file in
    the cache, or inside an installed package (the ``pretrained`` extra installs
    EfficientNet-Lite0's). None when there is none, or the architecture needs a library
    this installation lacks.

    ``verify`` False only asks whether such a file is there, reading and hashing nothing:
    for help texts, which every start of the program builds."""
    if not architecture_available(architecture):
        return None
    check = is_valid if verify else is_present
    for artefact in imagenet_artefacts(architecture):
        member = artefact.installed_member()
        if check(artefact, artefact_path(artefact)) or (member is not None and check(artefact, member)):
            return artefact
    return None


def imagenet_start(architecture: str) -> Start:
    """The architecture's ImageNet weights: a cached artefact, else the first that downloads.

    Raises ModelError when none is known for the architecture, or none can be fetched
    (the first artefact's offline message, plus how to train from scratch).
    """
    artefacts = imagenet_artefacts(architecture)
    if not artefacts:
        raise ModelError(f"no ImageNet weights are known for {architecture}; train from scratch with --pretrained none")
    for artefact in artefacts:
        path = cached(artefact)
        if path is not None:
            return _artefact_start(artefact, path)
    first_error: ModelError | None = None
    for artefact in artefacts:
        try:
            return _artefact_start(artefact, fetch(artefact.name))
        except ModelError as exc:
            first_error = first_error or exc
    raise ModelError(f"{first_error}; or train from scratch with --pretrained none")


def resolve_start(architecture: str, pretrained: str | Path | Start | None, source: str | None = None) -> Start | None:
    """Turn a ``--pretrained`` value into tensors: None/``none`` for random weights,
    ``imagenet``, a registry name (``osnet_x1_0.market1501``, ``osnet_x0_25.msmt17-onnx``),
    a checkpoint file whose format is recognised unless ``source`` (a format name: reid,
    fastreid, torchreid, torchvision) says it, or an ``.onnx`` export of torchreid's OSNet. A Start already resolved is returned as it is."""
    if isinstance(pretrained, Start):
        return pretrained
    backbone_spec(architecture)  # an unknown architecture is named as such, not as missing weights
    if pretrained is None or str(pretrained) in NO_START:
        return None
    if pretrained == "imagenet":
        return imagenet_start(architecture)
    if str(pretrained) in ARTEFACTS:
        artefact = ARTEFACTS[str(pretrained)]
        if artefact.architecture != architecture:
            raise ModelError(f"{artefact.name} holds {artefact.architecture} weights; it cannot start {architecture}")
        return _artefact_start(artefact, fetch(artefact.name))
    path = Path(pretrained)
    if not path.is_file():
        raise ModelError(f"{path}: pretrained weights file not found (nor a registry name; see `reid models list`)")
    if source is None and path.suffix.lower() == ".onnx":
        source = "torchreid-onnx"
    if source in FORMATS and FORMATS[source].read is not None:
        fmt = FORMATS[source]
        return Start(read_weights(fmt, path, architecture), fmt.name, str(path), embeds=True)
    state = read_state(path)
    fmt = checkpoint_format(state, architecture, source)
    return Start(prepared(fmt, state, architecture, path), fmt.name, str(path), embeds=fmt.name != "torchvision")


def start_neck(start: Start | None, architecture: str, keep_fc: bool, embedding_dim: int | None) -> tuple[str, int | None]:
    """The ``(neck, embedding_dim)`` a network trained from ``start`` gets. With
    ``keep_fc``, a start that embeds with torchreid's ``fc`` (Linear + BatchNorm1d + ReLU,
    ``reduction.0.`` once placed) keeps it as the ``fc`` neck at its width, so that the
    network before training embeds as the start does, unless ``embedding_dim`` asks for
    another width. Otherwise a BNNeck at ``embedding_dim``."""
    if keep_fc and start is not None:
        fc = FORMATS[start.format].place(start.state, architecture).state.get("reduction.0.weight")
        if fc is not None and fc.dim() == 2 and embedding_dim in (None, fc.shape[0]):
            return "fc", int(fc.shape[0])
    return "bnneck", embedding_dim


def load_start(network: nn.Module, start: Start | None) -> str:
    """Load ``start`` (from :func:`resolve_start`) into a freshly built ReidNet and return
    the provenance note for its card; also records it as ``network.pretrained_note`` and
    the start's normalisation as ``network.input_mean``/``input_std``.

    The one place training and ``--pretrained`` load starting weights: every backbone
    tensor comes from the start; head tensors are taken where they fit. Raises ModelError,
    one line naming the start, when its backbone does not fit.
    """
    if start is None:
        note = "random initialisation (--pretrained none)"
    else:
        architecture = network.architecture
        placed = FORMATS[start.format].place(start.state, architecture)
        notes = fit(network, placed, architecture, start.label, exact=False)
        note = f"started from {start.label}" + (f"; {', '.join(notes)}" if notes else "")
    network.pretrained_note = note
    network.frozen_norms = start is not None and FORMATS[start.format].folded_norms
    network.embedding_start = start is not None and start.embeds
    network.input_mean, network.input_std = start_normalisation(start)
    return note
