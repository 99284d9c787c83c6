"""Centroid triplet loss against every rule of its seed document."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from reid.errors import ConfigError
from reid.losses import CentroidTripletLoss, build_loss


def brute_force(x: torch.Tensor, labels: torch.Tensor, margin: float, smooth: bool = False) -> list[float]:
    """One loss per anchor (class of 2+ members) and other class, with loops."""
    losses = []
    classes = sorted(set(labels.tolist()))
    for i in range(len(labels)):
        own = [j for j in range(len(labels)) if labels[j] == labels[i] and j != i]
        if not own:
            continue
        positive = x[own].mean(0)
        for c in classes:
            if c == labels[i]:
                continue
            negative = x[labels == c].mean(0)
            delta = float((x[i] - positive).square().sum() - (x[i] - negative).square().sum()) + margin
            hinge = F.softplus(torch.tensor(delta, dtype=torch.float64)).item() if smooth else max(0.0, delta)
            losses.append(hinge)
    return losses


def test_hand_computed() -> None:
    # Class 0 = {0, 2}, class 1 = {1, 3}, singleton class 2 = {10}; squared distances.
    x = torch.tensor([[0.0], [2.0], [1.0], [3.0], [10.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2])
    value = build_loss("centroid_triplet", margin=0.05)(x, labels)
    # Anchor 0: c_P = 2 (d 4), c_1 = 2 (d 4) -> 0.05;  anchor 2 (x=2): c_P = 0 (4), c_1 (0) -> 4.05;
    # anchor 1 (x=1): c_P = 3 (4), c_0 = 1 (0) -> 4.05;  anchor 3 (x=3): c_P = 1 (4), c_0 (4) -> 0.05.
    # The singleton's centroid (10) is far from all: zeros, left out of the mean.
    assert value.item() == pytest.approx((0.05 + 4.05 + 4.05 + 0.05) / 4, abs=1e-12)


def test_anchor_is_left_out_of_its_own_centroid() -> None:
    x = torch.tensor([[0.0], [1.0], [3.0], [5.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1])
    value = build_loss("centroid_triplet", margin=1.0, smooth_loss=False)(x, labels)
    assert value.item() == pytest.approx(
        sum(v for v in brute_force(x, labels, 1.0) if v > 0)
        / len([v for v in brute_force(x, labels, 1.0) if v > 0]),
        rel=1e-12,
    )
    # Including the anchor in its centroid would give another number.
    with_anchor = (x[0] - x[:3].mean(0)).square().sum() - (x[0] - x[3]).square().sum() + 1.0
    leave_out = (x[0] - x[1:3].mean(0)).square().sum() - (x[0] - x[3]).square().sum() + 1.0
    assert with_anchor != leave_out


def test_p_m_p_minus_one_losses() -> None:
    # With softplus every loss is non-zero, so the mean is over exactly P·M·(P - 1) of them.
    p, m = 4, 3
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(p * m, 5, generator=generator, dtype=torch.float64)
    labels = torch.arange(p).repeat_interleave(m)
    losses = brute_force(x, labels, 0.05, smooth=True)
    assert len(losses) == p * m * (p - 1)
    value = build_loss("centroid_triplet", smooth_loss=True)(x, labels)
    assert value.item() == pytest.approx(sum(losses) / len(losses), rel=1e-12)


def test_classes_of_different_sizes_and_singletons() -> None:
    generator = torch.Generator().manual_seed(1)
    labels = torch.tensor([3, 3, 3, 3, 3, 8, 8, 1, 5, 5, 5, 9])
    x = torch.randn(len(labels), 4, generator=generator, dtype=torch.float64) * 0.3
    losses = [v for v in brute_force(x, labels, 0.5) if v > 0]
    # 10 anchors (1 and 9 are singletons) times 4 other classes, singletons included.
    assert len(brute_force(x, labels, 0.5)) == 10 * 4
    value = build_loss("centroid_triplet", margin=0.5)(x, labels)
    assert value.item() == pytest.approx(sum(losses) / len(losses), rel=1e-12)


def test_singleton_centroid_is_still_a_negative() -> None:
    x = torch.tensor([[0.0], [0.2], [0.15]], dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 0, 1])
    value = build_loss("centroid_triplet", margin=0.05)(x, labels)
    value.backward()
    assert value.item() > 0
    assert x.grad[2].item() != 0  # the singleton is pushed, though it is no anchor


@pytest.mark.parametrize(
    "labels",
    [torch.zeros(5, dtype=torch.long), torch.arange(5)],
    ids=["one class", "all singletons"],
)
def test_nothing_to_learn_is_a_differentiable_zero(labels: torch.Tensor) -> None:
    x = torch.randn(5, 3, requires_grad=True)
    value = build_loss("centroid_triplet")(x, labels)
    value.backward()
    assert value.item() == 0.0 and value.requires_grad
    assert torch.count_nonzero(x.grad) == 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_are_computed_and_returned_in_float32(dtype: torch.dtype) -> None:
    # Squared distances of ~ 1e5 overflow float16 even though the loss does not.
    x = torch.tensor([[0.0, 0.0], [300.0, 0.0], [0.0, 250.0], [300.0, 260.0]])
    labels = torch.tensor([0, 0, 1, 1])
    half = x.to(dtype).requires_grad_(True)
    value = build_loss("centroid_triplet")(half, labels)
    value.backward()
    assert value.dtype == torch.float32
    assert torch.isfinite(value) and torch.isfinite(half.grad.float()).all()
    reference = build_loss("centroid_triplet")(half.detach().float(), labels)
    assert value.item() == pytest.approx(reference.item(), rel=1e-6)
    # The squared distances overflow float16 although the loss itself fits in it.
    assert torch.isinf((half[1] - half[2]).square().sum().to(torch.float16))
    assert value.item() < 65504


@pytest.mark.parametrize(
    "extra", [{"indices_tuple": (torch.tensor([0]),) * 3}, {"ref_emb": torch.zeros(2, 2)}]
)
def test_anything_but_labels_raises_value_error(extra: dict) -> None:
    loss = CentroidTripletLoss()
    with pytest.raises(ValueError, match="labels only"):
        loss(torch.zeros(2, 2), torch.tensor([0, 1]), **extra)


def test_missing_labels_or_extra_positional_raise_value_error() -> None:
    loss = CentroidTripletLoss()
    with pytest.raises(ValueError):
        loss(torch.zeros(2, 2))
    with pytest.raises(ValueError):
        loss(torch.zeros(2, 2), torch.tensor([0, 1]), (torch.tensor([0]),) * 3)


def test_embeddings_are_not_normalized() -> None:
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(8, 3, generator=generator, dtype=torch.float64)
    labels = torch.arange(8) // 2
    loss = build_loss("centroid_triplet", margin=0.0)
    # With margin 0 every loss is homogeneous of degree 2 in the embeddings.
    assert loss(3 * x, labels).item() == pytest.approx(9 * loss(x, labels).item(), rel=1e-10)


def test_negative_margin_raises() -> None:
    with pytest.raises(ConfigError):
        CentroidTripletLoss(margin=-0.1)
