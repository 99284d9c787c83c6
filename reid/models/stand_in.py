"""Untrained stand-in models: real networks with seeded random weights, for demos that run
without a trained model, for the score a training run starts from, and for tests.

Their embeddings see colours and shapes only; ``reid demo`` trains a real one.
"""

from __future__ import annotations

from pathlib import Path

import torch

from reid.models.card import ModelCard
from reid.models.folder import save_model
from reid.models.network import ReidNet, build_network
from reid.models.pretrained import load_start, resolve_start

# Input sizes (height, width) of stand-ins by kind when none is given.
STAND_IN_INPUT = {"person": (128, 64), "face": (112, 92)}


def untrained_network(card: ModelCard, seed: int = 0, pretrained: str | None = None) -> ReidNet:
    """The network ``card`` describes, its random weights drawn from ``seed`` (same seed,
    same weights) without moving the caller's random state, then started from
    ``pretrained`` (what ``--pretrained`` takes; None for none) by
    :func:`reid.models.pretrained.load_start`. Raises ModelError as that does."""
    start = resolve_start(card.architecture, pretrained)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        network = build_network(card)
    load_start(network, start)
    return network


def stand_in_model(
    folder: Path,
    kind: str = "person",
    name: str | None = None,
    architecture: str = "resnet18",
    embedding_dim: int = 128,
    input_size: tuple[int, int] | None = None,
    threshold: float | None = None,
    seed: int = 0,
) -> Path:
    """Write an untrained model folder (``weights.pt`` + ``card.json``) at ``folder`` and
    return it.  ``kind`` is "person" or "face"; ``input_size`` is (height, width) pixels
    (default by kind); ``threshold`` a Euclidean distance between unit embeddings (0..2)
    or None.  Raises ConfigError (from the card) for invalid fields."""
    card = ModelCard(
        name=name or f"untrained-{kind}-stand-in",
        architecture=architecture,
        embedding_dim=embedding_dim,
        input_size=input_size or STAND_IN_INPUT.get(kind, STAND_IN_INPUT["person"]),
        num_classes=0,
        kind=kind,
        threshold=threshold,
    )
    save_model(untrained_network(card, seed), card, Path(folder))
    return Path(folder)
