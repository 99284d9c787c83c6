"""Triplet loss against the worked numbers of the triplet seed document and brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from torch import nn

from reid.errors import ConfigError
from reid.losses import TripletLoss, build_loss

# The seed's example: anchor, positive, negative in the plane.
SEED_POINTS = [[0.0, 0.0], [0.9, 0.0], [0.6, 0.8]]
SEED_LABELS = [0, 0, 1]


def seed_batch(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    points = torch.tensor(SEED_POINTS, dtype=dtype, requires_grad=True)
    return points, torch.tensor(SEED_LABELS)


def seed_numpy_batch_hard(E: np.ndarray, labels: np.ndarray, margin: float) -> float:
    """The document's own NumPy batch-hard, used as the reference."""
    sq = (E * E).sum(1)
    d2 = sq[:, None] - 2.0 * E @ E.T + sq[None, :]
    D = np.sqrt(np.maximum(d2, 1e-12))
    same = labels[:, None] == labels[None, :]
    hardest_pos = np.where(same, D, 0.0).max(1)
    hardest_neg = np.where(same, np.inf, D).min(1)
    has_pos = same.sum(1) > 1
    loss = np.maximum(hardest_pos - hardest_neg + margin, 0.0)
    return float(loss[has_pos].mean())


def brute_force(
    x: torch.Tensor, labels: torch.Tensor, margin: float, swap: bool = False, squared: bool = False
) -> list[float]:
    """Every valid triplet's hinge loss, one at a time."""
    def d(i: int, j: int) -> float:
        value = float(torch.linalg.vector_norm(x[i] - x[j]))
        return value * value if squared else value

    losses = []
    n = len(labels)
    for a, p, q in itertools.product(range(n), repeat=3):
        if a == p or labels[a] != labels[p] or labels[a] == labels[q]:
            continue
        negative = min(d(a, q), d(p, q)) if swap else d(a, q)
        losses.append(max(0.0, d(a, p) - negative + margin))
    return losses


def pk_batch(p: int = 4, k: int = 4, dim: int = 5, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(p * k, dim, generator=generator, dtype=torch.float64)
    return x, torch.arange(p).repeat_interleave(k)


def test_seed_batch_hard_example_is_01728() -> None:
    x, labels = seed_batch()
    loss = build_loss("triplet", mining="hard", margin=0.2)(x, labels)
    assert loss.item() == pytest.approx(0.1728, abs=1e-4)
    # (0.1 + 0.2456) / 2: the negative has no positive and is skipped as an anchor.
    second = 0.9 - math.hypot(0.3, 0.8) + 0.2
    assert loss.item() == pytest.approx((0.1 + second) / 2, abs=1e-6)


def test_seed_numpy_reference_matches_on_random_batches() -> None:
    for seed in range(3):
        x, labels = pk_batch(seed=seed)
        ours = build_loss("triplet", mining="hard", margin=0.3)(x, labels).item()
        assert ours == pytest.approx(seed_numpy_batch_hard(x.numpy(), labels.numpy(), 0.3), abs=1e-9)


def test_seed_triplet_margin_loss_value_and_gradients() -> None:
    # nn.TripletMarginLoss on (a, p, n) gives 0.1 with unit-vector gradients.  In a batch
    # the same single triplet is what semi-hard mining keeps: anchor 1's negative is
    # closer than its positive (hard), so only anchor 0 finds a semi-hard negative.
    x, labels = seed_batch()
    loss = build_loss("triplet", mining="semihard", margin=0.2)(x, labels)
    loss.backward()
    assert loss.item() == pytest.approx(0.1, abs=1e-6)
    torch.testing.assert_close(x.grad[1], torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(x.grad[2], torch.tensor([-0.6, -0.8]))

    a, p, n = (torch.tensor([row], requires_grad=True) for row in SEED_POINTS)
    reference = nn.TripletMarginLoss(margin=0.2, p=2)(a, p, n)
    reference.backward()
    assert loss.item() == pytest.approx(reference.item(), abs=1e-5)
    for ours, theirs in zip(x.grad, (a.grad[0], p.grad[0], n.grad[0])):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_seed_regime_examples() -> None:
    # m = 0.2: d(a,p) = 0.4, d(a,n) = 1.1 is easy (0); 0.9 and 1.0 give 0.1.
    loss = build_loss("triplet", mining="all", margin=0.2)
    labels = torch.tensor([0, 0, 1])
    easy = torch.tensor([[0.0, 0.0], [0.4, 0.0], [0.0, 1.1]], requires_grad=True)
    value = loss(easy, labels)
    value.backward()
    # Anchor 1 sees the negative at sqrt(0.16 + 1.21) = 1.17 > 0.4 + 0.2: also easy.
    assert value.item() == 0.0
    assert torch.count_nonzero(easy.grad) == 0
    close = torch.tensor([[0.0, 0.0], [0.9, 0.0], [0.0, 1.0]])
    expected = [0.1, max(0.0, 0.9 - math.hypot(0.9, 1.0) + 0.2)]
    nonzero = [v for v in expected if v > 0]
    assert loss(close, labels).item() == pytest.approx(sum(nonzero) / len(nonzero), abs=1e-6)


def test_seed_p_by_k_triplet_count() -> None:
    # P = 4, K = 4 holds 576 triplets; P = 18, K = 4 holds 14,688.
    from reid.losses.mining import pair_masks, positive_pairs

    for p, count in ((4, 576), (18, 14688)):
        masks = pair_masks(torch.arange(p).repeat_interleave(4))
        pairs = positive_pairs(masks)
        assert int(masks.negative[pairs.anchor].sum()) == count


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("squared", [False, True])
def test_batch_all_is_mean_over_nonzero_triplets(swap: bool, squared: bool) -> None:
    x, labels = pk_batch(p=3, k=3, dim=3)
    x = x * 0.4  # some triplets active, some not
    ours = build_loss("triplet", mining="all", margin=0.5, swap=swap, squared=squared)(x, labels)
    losses = [v for v in brute_force(x, labels, 0.5, swap=swap, squared=squared) if v > 0]
    assert 0 < len(losses) < len(brute_force(x, labels, 0.5))
    assert ours.item() == pytest.approx(sum(losses) / len(losses), rel=1e-9)


def test_batch_all_matches_nn_triplet_margin_loss_with_swap() -> None:
    x, labels = pk_batch(p=3, k=2, dim=4)
    x = x * 0.5
    index = [
        (a, p, n)
        for a, p, n in itertools.product(range(len(labels)), repeat=3)
        if a != p and labels[a] == labels[p] and labels[a] != labels[n]
    ]
    a, p, n = (torch.tensor(column) for column in zip(*index))
    reference = nn.TripletMarginLoss(margin=1.0, swap=True, eps=0.0, reduction="none")(x[a], x[p], x[n])
    expected = reference[reference > 0].mean()
    ours = build_loss("triplet", mining="all", margin=1.0, swap=True)(x, labels)
    assert ours.item() == pytest.approx(expected.item(), rel=1e-9)


def test_batch_hard_swap_uses_the_mined_triplet() -> None:
    x, labels = seed_batch()
    # Anchor 0: n = 2, d(p, n) = 0.854 < d(a, n) = 1.0; anchor 1: d(p, n) = 1.0 > 0.854.
    value = build_loss("triplet", mining="hard", margin=0.2, swap=True)(x, labels)
    assert value.item() == pytest.approx(0.9 - math.hypot(0.3, 0.8) + 0.2, abs=1e-6)


def test_soft_margin_is_softplus_of_delta() -> None:
    x, labels = seed_batch()
    value = build_loss("triplet", mining="hard", margin=0.3, soft=True)(x, labels)
    deltas = (0.9 - 1.0, 0.9 - math.hypot(0.3, 0.8))
    expected = sum(math.log1p(math.exp(d)) for d in deltas) / 2
    assert value.item() == pytest.approx(expected, abs=1e-6)


def test_soft_margin_gradient_is_sigmoid() -> None:
    x, labels = seed_batch(torch.float64)
    build_loss("triplet", mining="hard", soft=True)(x, labels).backward()
    # Anchor 0's positive (point 1) is moved by sigmoid(Δ0)/2 along the unit vector
    # from a to p, and as anchor 1 it moves by sigmoid(Δ1)/2 along its own unit vectors.
    delta0 = 0.9 - 1.0
    delta1 = 0.9 - math.hypot(0.3, 0.8)
    s0, s1 = 1 / (1 + math.exp(-delta0)), 1 / (1 + math.exp(-delta1))
    to_p = torch.tensor([1.0, 0.0], dtype=torch.float64)
    from_n = (torch.tensor([0.9, 0.0]) - torch.tensor([0.6, 0.8])).double()
    from_n = from_n / from_n.norm()
    expected = 0.5 * s0 * to_p + 0.5 * s1 * (to_p - from_n)
    torch.testing.assert_close(x.grad[1], expected)


def test_batch_hard_mean_over_anchors_with_a_positive() -> None:
    x, labels = pk_batch(p=3, k=3, dim=3)
    singleton = torch.randn(1, 3, dtype=torch.float64)
    bigger = torch.cat([x, singleton])
    more_labels = torch.cat([labels, torch.tensor([9])])
    ours = build_loss("triplet", mining="hard", margin=0.3)(bigger, more_labels)
    dist = torch.cdist(bigger, bigger)
    values = []
    for a in range(len(labels)):
        same = more_labels == more_labels[a]
        same[a] = False
        different = more_labels != more_labels[a]
        values.append(max(0.0, dist[a][same].max().item() - dist[a][different].min().item() + 0.3))
    assert ours.item() == pytest.approx(sum(values) / len(values), rel=1e-9)


def test_semihard_selects_closest_negative_inside_the_margin() -> None:
    # Anchor 0, positive 1 at distance 1.  Negatives at 0.5 (hard), 1.2 and 1.4 (semi-hard
    # for m = 0.6), 3.0 (easy): the closest semi-hard negative, 1.2, is chosen.
    x = torch.tensor([[0.0], [1.0], [-0.5], [-1.2], [-1.4], [-3.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 2, 3, 4])
    value = build_loss("triplet", mining="semihard", margin=0.6)(x, labels)
    # Anchor 1 (positive 0 at 1): negatives at 1.5, 2.2, 2.4, 4.0 -> only 1.5 is semi-hard.
    expected = ((1.0 - 1.2 + 0.6) + (1.0 - 1.5 + 0.6)) / 2
    assert value.item() == pytest.approx(expected, abs=1e-12)


def test_semihard_pairs_without_a_negative_are_not_counted() -> None:
    # With m = 0.5, anchor 1's nearest negative (1.5) sits on the margin: no semi-hard
    # negative, so the mean is over anchor 0's pair alone, not over both pairs.
    x = torch.tensor([[0.0], [1.0], [-0.5], [-1.2], [-3.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 2, 3])
    value = build_loss("triplet", mining="semihard", margin=0.5)(x, labels)
    assert value.item() == pytest.approx(1.0 - 1.2 + 0.5, abs=1e-12)


def test_semihard_without_a_semihard_negative_is_zero() -> None:
    # Every negative is either hard (inside d(a, p)) or easy (beyond d(a, p) + m).
    x = torch.tensor([[0.0], [1.0], [0.5], [5.0]], dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 0, 1, 2])
    value = build_loss("triplet", mining="semihard", margin=0.2)(x, labels)
    value.backward()
    assert value.item() == 0.0
    assert torch.count_nonzero(x.grad) == 0


def test_normalize_makes_the_loss_scale_free() -> None:
    x, labels = pk_batch()
    loss = build_loss("triplet", mining="all", margin=0.3, normalize=True)
    assert loss(x, labels).item() == pytest.approx(loss(7.5 * x, labels).item(), rel=1e-9)


def test_squared_uses_squared_distances() -> None:
    x, labels = seed_batch()
    value = build_loss("triplet", mining="hard", margin=0.2, squared=True)(x, labels)
    # Anchor 0: 0.81 - 1.0 + 0.2 = 0.01; anchor 1: 0.81 - 0.73 + 0.2 = 0.28.
    assert value.item() == pytest.approx((0.01 + 0.28) / 2, abs=1e-6)


@pytest.mark.parametrize(
    "options",
    [{"mining": "random"}, {"margin": -0.1}, {"mining": "semihard", "soft": True}],
)
def test_invalid_options_raise_config_error(options: dict) -> None:
    with pytest.raises(ConfigError):
        TripletLoss(**options)
