"""Lifted structured loss against its seed document's formula and code."""

from __future__ import annotations

import math

import pytest
import torch

from reid.errors import ConfigError
from reid.losses import LiftedStructuredLoss, build_loss


def seed_reference(embeddings: torch.Tensor, labels: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """The document's minimal PyTorch version of the smooth form."""
    dists = torch.cdist(embeddings, embeddings, p=2)
    labels = labels.unsqueeze(0)
    pos_mask = (labels == labels.T).float()
    neg_mask = (labels != labels.T).float()
    pos_mask.fill_diagonal_(0)
    neg_exponents = margin - dists
    neg_exponents = neg_exponents * neg_mask + (-1e9) * (1 - neg_mask)
    lse_per_row = torch.logsumexp(neg_exponents, dim=1)
    lse_i = lse_per_row.unsqueeze(1).expand_as(dists)
    lse_j = lse_per_row.unsqueeze(0).expand_as(dists)
    combined_lse = torch.logaddexp(lse_i, lse_j)
    loss_mat = torch.clamp(combined_lse + dists, min=0).pow(2) * pos_mask
    return loss_mat.sum() / (2 * pos_mask.sum())


def unordered_pairs(labels: torch.Tensor) -> list[tuple[int, int]]:
    n = len(labels)
    return [(i, j) for i in range(n) for j in range(i + 1, n) if labels[i] == labels[j]]


def paper_loss(x: torch.Tensor, labels: torch.Tensor, margin: float, smooth: bool) -> float:
    """Song et al. eqs. 3-4 with loops: 1/(2|P|) Σ over the unordered positive pairs."""
    d = torch.cdist(x, x)
    total = 0.0
    pairs = unordered_pairs(labels)
    for i, j in pairs:
        negatives_i = [margin - float(d[i, k]) for k in range(len(labels)) if labels[k] != labels[i]]
        negatives_j = [margin - float(d[j, k]) for k in range(len(labels)) if labels[k] != labels[j]]
        if smooth:
            inner = math.log(sum(math.exp(v) for v in negatives_i + negatives_j))
        else:
            inner = max(max(negatives_i), max(negatives_j))
        total += max(0.0, inner + float(d[i, j])) ** 2
    return total / (2 * len(pairs))


def batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(12, 6, generator=generator, dtype=torch.float64)
    return torch.nn.functional.normalize(x, dim=1), torch.arange(12) // 3


def test_hand_computed_smooth_and_hard() -> None:
    # 1-D: positive pair {0, 1} at distance 1, one negative at 1.5 (0.5 from point 1).
    x = torch.tensor([[0.0], [1.0], [1.5]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1])
    margin = 1.0
    smooth = math.log(math.exp(margin - 1.5) + math.exp(margin - 0.5)) + 1.0
    hard = max(margin - 1.5, margin - 0.5) + 1.0
    # One unordered positive pair: J = J_01² / 2.
    lifted = build_loss("lifted", smooth=True, margin=margin)(x, labels)
    assert lifted.item() == pytest.approx(smooth**2 / 2, abs=1e-12)
    lifted_hard = build_loss("lifted", smooth=False, margin=margin)(x, labels)
    assert lifted_hard.item() == pytest.approx(hard**2 / 2, abs=1e-12)


@pytest.mark.parametrize("smooth", [True, False])
def test_matches_the_paper_formula(smooth: bool) -> None:
    for seed in range(3):
        x, labels = batch(seed)
        ours = build_loss("lifted", smooth=smooth, margin=1.0)(x, labels)
        assert ours.item() == pytest.approx(paper_loss(x, labels, 1.0, smooth), rel=1e-10)


def test_matches_the_seed_code_value_and_gradient() -> None:
    x, labels = batch(4)
    ours_x = x.clone().requires_grad_(True)
    theirs_x = x.clone().requires_grad_(True)
    ours = build_loss("lifted", margin=0.5)(ours_x, labels)
    theirs = seed_reference(theirs_x, labels, margin=0.5)
    ours.backward()
    theirs.backward()
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-10)
    torch.testing.assert_close(ours_x.grad, theirs_x.grad)


def test_smooth_is_an_upper_bound_of_hard() -> None:
    x, labels = batch(5)
    smooth = build_loss("lifted", smooth=True)(x, labels)
    hard = build_loss("lifted", smooth=False)(x, labels)
    assert smooth.item() >= hard.item()


def test_normalize_option() -> None:
    x, labels = batch(6)
    loss = build_loss("lifted", normalize=True)
    assert loss(3.0 * x, labels).item() == pytest.approx(loss(x, labels).item(), rel=1e-10)


def test_satisfied_pairs_contribute_nothing() -> None:
    # Classes 10 apart, members 0.1 apart: every J_ij < 0 at margin 1.
    x = torch.tensor([[0.0], [0.1], [10.0], [10.1]], dtype=torch.float64, requires_grad=True)
    value = build_loss("lifted", smooth=False)(x, torch.tensor([0, 0, 1, 1]))
    value.backward()
    assert value.item() == 0.0 and torch.count_nonzero(x.grad) == 0


def test_negative_margin_raises() -> None:
    with pytest.raises(ConfigError):
        LiftedStructuredLoss(margin=-1.0)
