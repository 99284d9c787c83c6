"""The learning-rate schedule and the optimizer's parameter groups."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from reid.engine import TrainConfig
from reid.engine.config import EMBEDDING_START_LR_SCALE
from reid.engine.optim import (
    COSINE_FLOOR_FACTOR,
    WARMUP_START_FACTOR,
    base_lrs,
    build_optimizer,
    lr_factor,
    network_groups,
    reset_base_lrs,
    set_learning_rate,
)
from reid.losses import SoftTripleLoss
from reid.models.network import ReidNet


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
    assert [g["base_lr"] for g in optimizer.param_groups] == base_lrs(config, network, centers) == [0.1, 0.05]
    assert [g["weight_decay"] for g in optimizer.param_groups] == [1e-3, 0.0]
    set_learning_rate(optimizer, 0.5)
    assert [g["lr"] for g in optimizer.param_groups] == [0.05, 0.025]
    reset_base_lrs(optimizer, TrainConfig(optimizer="sgd", lr=0.2), network, centers)
    assert [g["base_lr"] for g in optimizer.param_groups] == [0.2, 0.05]


def test_a_loss_without_parameters_adds_no_group() -> None:
    optimizer = build_optimizer(TrainConfig(optimizer="adamw"), nn.Linear(4, 3), nn.MSELoss())
    assert isinstance(optimizer, torch.optim.AdamW) and len(optimizer.param_groups) == 1


def _names(network: nn.Module, params: list[nn.Parameter]) -> set[str]:
    ids = {id(p) for p in params}
    return {name.split(".")[0] for name, p in network.named_parameters() if id(p) in ids}


@pytest.mark.parametrize(("neck", "start"), [("bnneck", {"backbone"}), ("fc", {"backbone", "reduction"})])
def test_a_starts_layers_learn_at_a_fraction_of_the_heads_rate(neck: str, start: set[str]) -> None:
    network = ReidNet("resnet18", num_classes=5, embedding_dim=64, neck=neck)
    centers = SoftTripleLoss(num_classes=5, embedding_dim=64, center_lr=0.05)
    config = TrainConfig(lr=1e-3, backbone_lr_scale=0.1, weight_decay=5e-4)
    optimizer = build_optimizer(config, network, centers)
    assert [g["base_lr"] for g in optimizer.param_groups] == pytest.approx([1e-4, 1e-3, 0.05])
    backbone_group, head_group, _ = (g["params"] for g in optimizer.param_groups)
    assert _names(network, backbone_group) == start
    # The head: the classifier, and a BNNeck with the reduction before it where it is fresh.
    assert _names(network, head_group) == {"classifier", "reduction", "bnneck"} - start - ({"reduction", "bnneck"} if neck == "fc" else set())
    trainable = {id(p) for p in network.parameters() if p.requires_grad}
    assert {id(p) for p in backbone_group + head_group} == trainable and len(backbone_group) + len(head_group) == len(trainable)
    # The schedule scales both alike, keeping their ratio.
    set_learning_rate(optimizer, 0.5)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([5e-5, 5e-4, 0.025])
    reset_base_lrs(optimizer, TrainConfig(lr=2e-3, backbone_lr_scale=0.5), network, centers)
    assert [g["base_lr"] for g in optimizer.param_groups] == pytest.approx([1e-3, 2e-3, 0.05])


def _one_step(scale: float) -> dict[str, torch.Tensor]:
    """How far one SGD step moves each parameter of a fixed network on a fixed batch."""
    torch.manual_seed(0)
    network = ReidNet("resnet18", num_classes=4, neck="bnneck")
    images = torch.rand(4, 3, 64, 32)
    before = {name: p.detach().clone() for name, p in network.named_parameters()}
    optimizer = build_optimizer(TrainConfig(optimizer="sgd", lr=0.1, backbone_lr_scale=scale, weight_decay=0.0), network, None)
    network.train()
    nn.functional.cross_entropy(network(images).logits, torch.tensor([0, 1, 2, 3])).backward()
    optimizer.step()
    return {name: p.detach() - before[name] for name, p in network.named_parameters()}


def test_a_scaled_backbone_moves_by_that_fraction_and_the_head_as_before() -> None:
    full, scaled = _one_step(1.0), _one_step(0.01)
    assert full["classifier.weight"].abs().max() > 0
    torch.testing.assert_close(scaled["classifier.weight"], full["classifier.weight"])
    for name in ("backbone.0.weight", "backbone.7.1.conv2.weight"):
        assert full[name].abs().max() > 0
        expected = full[name] * 0.01
        # The step is read back as a difference of float32 weights: exact to their rounding.
        torch.testing.assert_close(scaled[name], expected, rtol=0, atol=1e-3 * expected.abs().max().item())


def test_any_other_module_is_one_group() -> None:
    network = nn.Linear(4, 3)
    assert network_groups(network) == [list(network.parameters())]
    assert base_lrs(TrainConfig(lr=0.1, backbone_lr_scale=0.1), network, None) == [0.1]


def test_by_default_only_a_start_that_already_embeds_gets_a_scaled_backbone() -> None:
    network = ReidNet("resnet18", num_classes=5)
    assert base_lrs(TrainConfig(lr=1e-3), network, None) == pytest.approx([1e-3, 1e-3])
    network.embedding_start = True  # what load_start records for a Re-ID model
    assert base_lrs(TrainConfig(lr=1e-3), network, None) == pytest.approx([1e-3 * EMBEDDING_START_LR_SCALE, 1e-3])
    assert base_lrs(TrainConfig(lr=1e-3, backbone_lr_scale=1.0), network, None) == pytest.approx([1e-3, 1e-3])


def test_a_start_the_saved_model_blends_with_learns_at_the_full_rate_by_default() -> None:
    """With fc kept the saved model is a blend with the start (WiSE-FT), which is what keeps
    the start; the layers then learn at --lr. Asked not to blend, they learn at a tenth."""
    network = ReidNet("osnet_x0_25", num_classes=5, embedding_dim=512, neck="fc")
    network.embedding_start = True
    assert base_lrs(TrainConfig(lr=1e-3), network, None) == pytest.approx([1e-3, 1e-3])
    assert base_lrs(TrainConfig(lr=1e-3, wise_alpha=1.0), network, None) == pytest.approx([1e-3 * EMBEDDING_START_LR_SCALE, 1e-3])
    assert base_lrs(TrainConfig(lr=1e-3, backbone_lr_scale=0.5), network, None) == pytest.approx([5e-4, 1e-3])
