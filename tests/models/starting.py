"""Build-then-start in one call, as training does it in two steps; an OSNet exported to ONNX
as torchreid's users export it, a start that embeds."""

from __future__ import annotations

from pathlib import Path

import torch

from reid.models.network import ReidNet
from reid.models.osnet import OSNet
from reid.models.pretrained import load_start, resolve_start


def started(network: ReidNet, pretrained: str | None) -> ReidNet:
    """``network`` after :func:`load_start` of what ``--pretrained pretrained`` resolves to."""
    load_start(network, resolve_start(network.architecture, pretrained))
    return network


def torchreid_like(architecture: str, seed: int) -> OSNet:
    """An OSNet in eval mode with BatchNorms far from the identity, so that folding them
    changes every convolution's weights."""
    torch.manual_seed(seed)
    network = OSNet(architecture, num_classes=7)
    for module in network.modules():
        if isinstance(module, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)):
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.2, 0.2)
            module.running_mean.uniform_(-0.3, 0.3)
            module.running_var.uniform_(0.5, 2.0)
    return network.eval()


def export_onnx(network: OSNet, path: Path, size: tuple[int, int] = (64, 32)) -> Path:
    """The network exported as torchreid's users do (eval mode, constants folded, which
    folds each BatchNorm into its convolution)."""
    torch.onnx.export(
        network, (torch.zeros(1, 3, *size),), str(path), dynamo=False, input_names=["images"], output_names=["output"],
        dynamic_axes={"images": {0: "batch"}}, do_constant_folding=True,
    )
    return path
