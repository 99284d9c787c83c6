"""The saved network as a weight-space ensemble of the trained network and its start.

A network fine-tuned from a start that already embeds (a published Re-ID model whose whole
embedding path, backbone and ``fc``, is kept) is saved as ``alpha * trained + (1 - alpha) *
start``, tensor by tensor, over the layers the start filled; the fresh head (the identity
classifier) is left as trained and is not used at test time. Both ends share their
initialisation, so their average lies in one basin of the loss and keeps more of the
start's generality than the fine-tuned end alone, on identities and cameras that training
did not see.

Reference: Wortsman et al., "Robust fine-tuning of zero-shot models" (WiSE-FT), CVPR 2022.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from reid.engine.config import EMBEDDING_START_WISE_ALPHA, TrainConfig
from reid.errors import ConfigValueError
from reid.models.network import ReidNet


def blends_with_start(network: ReidNet) -> bool:
    """True when every layer of ``network``'s embedding path came from its start: a start
    that embeds, with its ``fc`` kept as the neck (a fresh BNNeck has no start to blend with)."""
    return bool(getattr(network, "embedding_start", False)) and network.neck == "fc"


def wise_alpha(config: TrainConfig, network: ReidNet) -> float:
    """``config.wise_alpha``; where it is None, :data:`EMBEDDING_START_WISE_ALPHA` for a
    network that :func:`blends_with_start`, else 1 (the trained weights as they are).
    Raises ConfigValueError for a value below 1 where there is no start to blend with."""
    if config.wise_alpha is None:
        return EMBEDDING_START_WISE_ALPHA if blends_with_start(network) else 1.0
    if config.wise_alpha < 1 and not blends_with_start(network):
        raise ConfigValueError(
            "wise_alpha",
            "blends the trained weights with the start's, which needs a start that already embeds with its whole "
            "network (a Re-ID model whose fc is kept); this run's start is not one: give 1",
        )
    return config.wise_alpha


def start_weights(network: ReidNet) -> dict[str, torch.Tensor]:
    """A copy of the floating-point tensors of the layers the start filled
    (:meth:`ReidNet.start_layers`), keyed as in ``network.state_dict()``; taken right after
    the start is loaded."""
    filled = {id(t) for layer in network.start_layers() for t in (*layer.parameters(), *layer.buffers())}
    return {
        key: tensor.detach().clone()
        for key, tensor in network.state_dict(keep_vars=True).items()
        if id(tensor) in filled and tensor.is_floating_point()
    }


def blend(network: ReidNet, start: dict[str, torch.Tensor], alpha: float) -> dict[str, torch.Tensor]:
    """Set each tensor of ``start`` in ``network`` to ``alpha * trained + (1 - alpha) *
    start`` in place; return the trained tensors it replaced (for :func:`restore`)."""
    state = network.state_dict()
    trained = {key: state[key].detach().clone() for key in start}
    with torch.no_grad():
        for key, begun in start.items():
            begun = begun.to(state[key].device)
            # start + alpha * (trained - start): a tensor training left alone (a frozen
            # BatchNorm's statistics) stays bit for bit the start's.
            state[key].copy_(begun + alpha * (trained[key] - begun))
    return trained


def restore(network: ReidNet, trained: dict[str, torch.Tensor]) -> None:
    """Put back the tensors :func:`blend` replaced."""
    state = network.state_dict()
    with torch.no_grad():
        for key, tensor in trained.items():
            state[key].copy_(tensor)


@contextmanager
def blended(network: ReidNet, start: dict[str, torch.Tensor], alpha: float) -> Iterator[ReidNet]:
    """``network`` as it would be saved, for the duration of the block (an evaluation
    between epochs); training goes on from the trained weights afterwards."""
    if alpha == 1:
        yield network
        return
    trained = blend(network, start, alpha)
    try:
        yield network
    finally:
        restore(network, trained)
