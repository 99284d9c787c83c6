"""Contrastive loss: hand-computed values and the properties the contrastive seed states."""

from __future__ import annotations

import math

import pytest
import torch

from reid.errors import ConfigError
from reid.losses import ContrastiveLoss, build_loss

# 1-D points: a similar pair at 0.6 apart, and a dissimilar point 0.6 beyond the second.
POINTS = torch.tensor([[0.0], [0.6], [1.2]], dtype=torch.float64)
LABELS = torch.tensor([0, 0, 1])


def test_hadsell_hand_computed() -> None:
    value = build_loss("contrastive", form="hadsell", margin=1.0)(POINTS, LABELS)
    # (0,1) similar: ½·0.6²; (0,2) dissimilar at 1.2 >= m: 0; (1,2) dissimilar: ½·0.4².
    assert value.item() == pytest.approx((0.18 + 0.0 + 0.08) / 3, abs=1e-12)


def test_chopra_hand_computed() -> None:
    q = 2.0
    value = build_loss("contrastive", form="chopra", q=q)(POINTS, LABELS)
    genuine = (2 / q) * 0.36
    impostors = [2 * q * math.exp(-2.77 * e / q) for e in (1.2, 0.6)]
    assert value.item() == pytest.approx((genuine + sum(impostors)) / 3, abs=1e-12)


def test_chopra_default_q_is_the_sphere_bound() -> None:
    assert ContrastiveLoss(form="chopra").q == 2.0
    assert ContrastiveLoss(form="chopra", squared=True).q == 4.0


def test_two_margin_averages_nonzero_positive_and_negative_losses_separately() -> None:
    x = torch.tensor([[0.0], [0.1], [0.6], [1.2], [5.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 2])
    value = build_loss("contrastive", form="two_margin", pos_margin=0.2, neg_margin=1.0)(x, labels)
    # Positive pairs: 0.1, 0.6, 0.5 -> [d - 0.2]+ = 0, 0.4, 0.3; non-zero mean 0.35.
    # Negative pairs below 1.0: (2,3) at 0.6 -> 0.4 and (1,3) at 1.1 -> 0; (0,3) at 1.2 -> 0;
    # the rest are far.  Non-zero mean 0.4.
    assert value.item() == pytest.approx(0.35 + 0.4, abs=1e-12)


def test_hadsell_mean_over_all_ordered_pairs() -> None:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(6, 3, generator=generator, dtype=torch.float64) * 0.5
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    value = build_loss("contrastive", margin=1.0)(x, labels)
    total, count = 0.0, 0
    for i in range(6):
        for j in range(6):
            if i == j:
                continue
            d = float(torch.linalg.vector_norm(x[i] - x[j]))
            total += 0.5 * d * d if labels[i] == labels[j] else 0.5 * max(0.0, 1.0 - d) ** 2
            count += 1
    assert value.item() == pytest.approx(total / count, rel=1e-12)


def test_attract_only_term_is_minimized_by_collapse() -> None:
    # A batch of one class is exactly the similar-pair term.  Training a linear map on it
    # drives every distance (and the loss) to zero: the constant mapping.
    torch.manual_seed(0)
    x = torch.randn(12, 6)
    labels = torch.zeros(12, dtype=torch.long)
    linear = torch.nn.Linear(6, 4, bias=False)
    loss = build_loss("contrastive", form="hadsell", margin=1.0)
    optimizer = torch.optim.SGD(linear.parameters(), lr=0.3)
    start = loss(linear(x), labels).item()
    for _ in range(150):
        optimizer.zero_grad()
        value = loss(linear(x), labels)
        value.backward()
        optimizer.step()
    assert start > 0.1
    assert value.item() < 1e-6
    assert torch.cdist(linear(x), linear(x)).max().item() < 1e-3
    assert linear.weight.abs().max().item() < 1e-3  # the map itself goes to zero


def test_push_term_keeps_collapse_from_being_a_minimum() -> None:
    # With dissimilar pairs present, the collapsed embedding pays ½m² for each of them.
    labels = torch.tensor([0, 0, 1, 1])
    collapsed = torch.zeros(4, 3)
    value = build_loss("contrastive", margin=1.0)(collapsed, labels)
    share_dissimilar = 8 / 12
    assert value.item() == pytest.approx(share_dissimilar * 0.5, abs=1e-7)
    separated = torch.tensor([[0.0, 0, 0], [0.0, 0, 0], [2.0, 0, 0], [2.0, 0, 0]])
    assert build_loss("contrastive", margin=1.0)(separated, labels).item() == 0.0


def test_scaling_distances_and_margin_by_c_multiplies_hadsell_by_c_squared() -> None:
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(10, 4, generator=generator, dtype=torch.float64)
    labels = torch.arange(10) % 3
    base = build_loss("contrastive", form="hadsell", margin=1.5)(x, labels).item()
    for c in (0.25, 0.5, 2.0, 8.0):
        scaled = build_loss("contrastive", form="hadsell", margin=1.5 * c)(c * x, labels).item()
        assert scaled == pytest.approx(c * c * base, rel=1e-10)


def _push_gradient_norm(t: float, form: str, squared: bool) -> tuple[float, float, float]:
    """Gradient norm w.r.t. the linear map L of the push on one dissimilar pair embedded
    as G(x) = tLx, with the distance and ||δ||, as in the seed's table: L is scaled so that
    the pair starts 0.036 apart at t = 1, like the seed's closest dissimilar pair."""
    generator = torch.Generator().manual_seed(3)
    base = torch.randn(8, 8, generator=generator, dtype=torch.float64)
    inputs = torch.randn(2, 8, generator=generator, dtype=torch.float64)
    delta = inputs[0] - inputs[1]
    base = base * (0.036 / float(torch.linalg.vector_norm(base @ delta)))
    weight = (t * base).requires_grad_(True)
    embeddings = inputs @ weight.t()
    loss = build_loss("contrastive", form=form, margin=1.0, q=2.0, squared=squared)
    (grad,) = torch.autograd.grad(loss(embeddings, torch.tensor([0, 1])), weight)
    distance = float(torch.linalg.vector_norm(embeddings[0] - embeddings[1]).detach())
    return float(grad.norm()), distance, float(torch.linalg.vector_norm(delta))


def test_push_gradients_near_zero_distance_follow_the_seed_table() -> None:
    ts = (1.0, 0.1, 0.01, 0.001)
    rows = {
        (form, squared): [_push_gradient_norm(t, form, squared) for t in ts]
        for form in ("hadsell", "chopra")
        for squared in (False, True)
    }
    # Norm energy (columns "Hadsell D" and "Chopra D"): the push tends to a non-zero
    # limit, m||δ|| and 2·2.77||δ|| = 5.54||δ||; at every t it is exactly (m - D)||δ|| and
    # 5.54 exp(-2.77 D/Q)||δ||.
    for grad, distance, delta_norm in rows[("hadsell", False)]:
        assert grad == pytest.approx((1.0 - distance) * delta_norm, rel=1e-9)
    for grad, distance, delta_norm in rows[("chopra", False)]:
        assert grad == pytest.approx(5.54 * math.exp(-2.77 * distance / 2.0) * delta_norm, rel=1e-9)
    grad, _, delta_norm = rows[("hadsell", False)][-1]
    assert grad == pytest.approx(1.0 * delta_norm, rel=1e-3)
    grad, _, delta_norm = rows[("chopra", False)][-1]
    assert grad == pytest.approx(5.54 * delta_norm, rel=1e-3)
    # Squared energy ("Hadsell D^2", "Chopra D^2"): the push falls tenfold for each tenfold
    # drop of t and D — Chopra et al.'s plateau at near-zero energy.
    for key in (("hadsell", True), ("chopra", True)):
        grads = [grad for grad, _, _ in rows[key]]
        for bigger, smaller in zip(grads, grads[1:]):
            assert smaller / bigger == pytest.approx(0.1, rel=1e-2)


def test_only_nearby_dissimilar_pairs_contribute_to_hadsell_but_chopra_pushes_all() -> None:
    far = torch.tensor([[0.0, 0.0], [3.0, 0.0]], requires_grad=True)
    labels = torch.tensor([0, 1])
    hadsell = build_loss("contrastive", form="hadsell", margin=1.0)(far, labels)
    (grad,) = torch.autograd.grad(hadsell, far)
    assert hadsell.item() == 0.0 and torch.count_nonzero(grad) == 0
    chopra = build_loss("contrastive", form="chopra", q=2.0)(far, labels)
    (grad,) = torch.autograd.grad(chopra, far)
    assert chopra.item() > 0 and grad[1, 0] < 0  # gradient descent pushes them further apart


def test_with_normalize_a_margin_above_2_keeps_every_dissimilar_pair_active() -> None:
    x = torch.randn(8, 5) * 10
    labels = torch.arange(8)
    loss = build_loss("contrastive", margin=2.5, normalize=True)(x, labels)
    # Every pair is at most 2 apart, so each pays at least ½(2.5 - 2)².
    assert loss.item() >= 0.5 * 0.25


def test_unknown_form_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="hadsell, chopra, two_margin"):
        ContrastiveLoss(form="infonce")
