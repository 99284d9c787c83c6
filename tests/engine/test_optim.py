"""The learning-rate schedule and the optimizer's parameter groups."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from reid.engine import TrainConfig
from reid.engine.optim import (
    COSINE_FLOOR_FACTOR,
    WARMUP_START_FACTOR,
    base_lrs,
    build_optimizer,
    lr_factor,
    reset_base_lrs,
    set_learning_rate,
)
from reid.losses import SoftTripleLoss


def test_warmup_rises_linearly_from_its_start_factor() -> None:
    config = TrainConfig(epochs=10, warmup_epochs=4, schedule="constant")
    assert lr_factor(config, 0.0) == pytest.approx(WARMUP_START_FACTOR)
    assert lr_factor(config, 2.0) == pytest.approx(WARMUP_START_FACTOR + (1 - WARMUP_START_FACTOR) / 2)
    assert lr_factor(config, 4.0) == 1.0
    assert lr_factor(config, 9.5) == 1.0


def test_cosine_falls_from_one_to_its_floor_and_stays() -> None:
    config = TrainConfig(epochs=11, warmup_epochs=1, schedule="cosine")
    assert lr_factor(config, 1.0) == pytest.approx(1.0)
    assert lr_factor(config, 6.0) == pytest.approx(COSINE_FLOOR_FACTOR + (1 - COSINE_FLOOR_FACTOR) / 2)
    assert lr_factor(config, 11.0) == pytest.approx(COSINE_FLOOR_FACTOR)
    assert lr_factor(config, 30.0) == pytest.approx(COSINE_FLOOR_FACTOR)
    values = [lr_factor(config, 1 + t / 4) for t in range(41)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_cosine_with_warmup_over_every_epoch_stays_finite() -> None:
    config = TrainConfig(epochs=2, warmup_epochs=2, schedule="cosine")
    assert math.isfinite(lr_factor(config, 2.0)) and lr_factor(config, 2.0) == pytest.approx(1.0)


def test_step_schedule_multiplies_by_gamma_at_each_milestone() -> None:
    config = TrainConfig(epochs=10, warmup_epochs=0, schedule="step", milestones=(3, 6), gamma=0.5)
    assert [lr_factor(config, e) for e in (0, 2.9, 3, 5.9, 6, 9)] == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]


def test_a_loss_with_centers_gets_its_own_group_without_weight_decay() -> None:
    network = nn.Linear(4, 3)
    centers = SoftTripleLoss(num_classes=3, embedding_dim=4, center_lr=0.05)
    config = TrainConfig(optimizer="sgd", lr=0.1, weight_decay=1e-3, schedule="constant")
    optimizer = build_optimizer(config, network, centers)
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.defaults["nesterov"]
    assert [g["base_lr"] for g in optimizer.param_groups] == base_lrs(config, centers) == [0.1, 0.05]
    assert [g["weight_decay"] for g in optimizer.param_groups] == [1e-3, 0.0]
    set_learning_rate(optimizer, 0.5)
    assert [g["lr"] for g in optimizer.param_groups] == [0.05, 0.025]
    reset_base_lrs(optimizer, TrainConfig(optimizer="sgd", lr=0.2), centers)
    assert [g["base_lr"] for g in optimizer.param_groups] == [0.2, 0.05]


def test_a_loss_without_parameters_adds_no_group() -> None:
    optimizer = build_optimizer(TrainConfig(optimizer="adamw"), nn.Linear(4, 3), nn.MSELoss())
    assert isinstance(optimizer, torch.optim.AdamW) and len(optimizer.param_groups) == 1
