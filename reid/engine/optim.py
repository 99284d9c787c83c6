"""The optimizer and the learning-rate schedule of a training run.

A :class:`ReidNet`'s parameters form two groups: the layers a start fills (its
:meth:`~reid.models.network.ReidNet.start_layers`) at ``lr * backbone_lr_scale`` (by default
a tenth from a Re-ID model, all of it otherwise), then the head at ``lr``; any other module is one group at ``lr``. A metric loss with parameters of
its own (SoftTriple's centers) gets a last group with its own learning rate and no weight
decay.
Every group keeps its ``base_lr``; the schedule multiplies it by :func:`lr_factor` at every
step.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from reid.engine.config import EMBEDDING_START_LR_SCALE, WARMUP_START_FACTOR, TrainConfig
from reid.engine.wise import wise_alpha
from reid.models.network import ReidNet

# The cosine schedule ends at a hundredth of the learning rate instead of zero, so the
# last epochs still move the weights.
COSINE_FLOOR_FACTOR = 0.01

# A ReidNet's head group, whose learning rate is --lr's as scheduled (the one a history
# reports); the start's layers are group 0.
HEAD_GROUP = 1

# Keeps the cosine span positive when the warm-up takes every epoch.
_MIN_COSINE_SPAN = 1e-9


def lr_factor(config: TrainConfig, epoch_progress: float) -> float:
    """The multiplier of every group's base learning rate at ``epoch_progress`` (epochs
    done, fractional): linear warm-up from :data:`WARMUP_START_FACTOR` over
    ``config.warmup_epochs``, then step decay (``gamma`` at each milestone), cosine decay
    to :data:`COSINE_FLOOR_FACTOR`, or constant."""
    if config.warmup_epochs > 0 and epoch_progress < config.warmup_epochs:
        return WARMUP_START_FACTOR + (1 - WARMUP_START_FACTOR) * epoch_progress / config.warmup_epochs
    if config.schedule == "cosine":
        span = max(config.epochs - config.warmup_epochs, _MIN_COSINE_SPAN)
        t = min((epoch_progress - config.warmup_epochs) / span, 1.0)
        return COSINE_FLOOR_FACTOR + (1 - COSINE_FLOOR_FACTOR) * 0.5 * (1 + math.cos(math.pi * t))
    if config.schedule == "step":
        return config.gamma ** sum(epoch_progress >= m for m in config.milestones)
    return 1.0


def set_learning_rate(optimizer: torch.optim.Optimizer, factor: float) -> None:
    """Set every group's learning rate to its ``base_lr`` times ``factor``."""
    for group in optimizer.param_groups:
        group["lr"] = group["base_lr"] * factor


def has_parameters(module: nn.Module | None) -> bool:
    """Whether ``module`` exists and owns at least one parameter."""
    return module is not None and any(True for _ in module.parameters())


def network_groups(network: nn.Module) -> list[list[nn.Parameter]]:
    """The network's trainable parameters by group: a ReidNet's start layers, then its
    head (either may be empty); any other module's all in one group."""
    trainable = [p for p in network.parameters() if p.requires_grad]
    if not isinstance(network, ReidNet):
        return [trainable]
    start = {id(p) for layer in network.start_layers() for p in layer.parameters()}
    return [[p for p in trainable if id(p) in start], [p for p in trainable if id(p) not in start]]


def backbone_lr_scale(config: TrainConfig, network: nn.Module) -> float:
    """``config.backbone_lr_scale``; where it is None, :data:`EMBEDDING_START_LR_SCALE`
    for a network started from a model that already embeds, unless the saved network is a
    blend with that start (:func:`reid.engine.wise.wise_alpha` below 1: the blend keeps the
    start, so its layers learn at the full rate), else 1."""
    if config.backbone_lr_scale is not None:
        return config.backbone_lr_scale
    if not getattr(network, "embedding_start", False) or not isinstance(network, ReidNet):
        return 1.0
    return 1.0 if wise_alpha(config, network) < 1 else EMBEDDING_START_LR_SCALE


def base_lrs(config: TrainConfig, network: nn.Module, metric: nn.Module | None) -> list[float]:
    """Learning rate of each parameter group: a ReidNet's start layers at ``lr`` times
    :func:`backbone_lr_scale` and its head at ``lr`` (another module: one group at
    ``lr``), then a loss's own centers (its ``center_lr`` where it has one)."""
    lrs = [config.lr * backbone_lr_scale(config, network), config.lr] if isinstance(network, ReidNet) else [config.lr]
    if has_parameters(metric):
        lrs.append(float(getattr(metric, "center_lr", config.lr)))
    return lrs


def build_optimizer(config: TrainConfig, network: nn.Module, metric: nn.Module | None) -> torch.optim.Optimizer:
    """The optimizer ``config.optimizer`` names over the network's trainable parameters
    (grouped as :func:`network_groups` says) and the metric loss's own ones; SGD is
    Nesterov SGD with ``config.momentum``."""
    lrs = base_lrs(config, network, metric)
    groups = [{"params": params, "lr": lr, "base_lr": lr} for params, lr in zip(network_groups(network), lrs)]
    if metric is not None and has_parameters(metric):
        groups.append({"params": list(metric.parameters()), "lr": lrs[-1], "base_lr": lrs[-1], "weight_decay": 0.0})
    if config.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay, nesterov=True)
    cls = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    return cls(groups, lr=config.lr, weight_decay=config.weight_decay)


def reset_base_lrs(optimizer: torch.optim.Optimizer, config: TrainConfig, network: nn.Module, metric: nn.Module | None) -> None:
    """Give a restored optimizer the base learning rates of ``config``: the checkpoint
    holds the old run's, and the options of the resumed run win."""
    for group, lr in zip(optimizer.param_groups, base_lrs(config, network, metric)):
        group["base_lr"] = lr
