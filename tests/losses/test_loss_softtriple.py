"""SoftTriple loss against eqs. 5-10 of its seed document."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from reid.errors import ConfigError
from reid.losses import SoftTripleLoss, build_loss


def reference(loss: SoftTripleLoss, x: torch.Tensor, labels: torch.Tensor, hard: bool = False) -> float:
    """Eqs. 5/8 (relaxed or, with ``hard``, the max similarity), 9 and 10 with loops."""
    w = F.normalize(loss.centers.detach().double(), dim=-1)
    x = F.normalize(x.double(), dim=1)
    classes, k, _ = w.shape
    total = 0.0
    for i in range(len(labels)):
        similarity = []
        for c in range(classes):
            inner = [float(x[i] @ w[c, t]) for t in range(k)]
            if hard:
                similarity.append(max(inner))
            else:
                weights = [math.exp(v / loss.gamma) for v in inner]
                similarity.append(sum(q * v for q, v in zip(weights, inner)) / sum(weights))
        y = int(labels[i])
        own = math.exp(loss.la * (similarity[y] - loss.margin))
        others = sum(math.exp(loss.la * similarity[j]) for j in range(classes) if j != y)
        total += -math.log(own / (own + others))
    regularizer = 0.0
    for c in range(classes):
        for t in range(k):
            for s in range(t + 1, k):
                regularizer += math.sqrt(max(2 - 2 * float(w[c, s] @ w[c, t]), 0.0))
    penalty = loss.tau * regularizer / (classes * k * (k - 1)) if k > 1 else 0.0
    return total / len(labels) + penalty


def make(**options: float) -> SoftTripleLoss:
    torch.manual_seed(0)
    return build_loss("softtriple", num_classes=4, embedding_dim=6, **options).double()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(10, 6, generator=generator, dtype=torch.float64), torch.arange(10) % 4


def test_paper_defaults_and_center_shape() -> None:
    loss = build_loss("softtriple", num_classes=5, embedding_dim=7)
    assert (loss.la, loss.gamma, loss.margin, loss.tau) == (20.0, 0.1, 0.01, 0.2)
    assert loss.centers.shape == (5, 10, 7)
    assert loss.center_lr == 0.01
    torch.testing.assert_close(loss.centers.norm(dim=-1), torch.ones(5, 10))
    assert [name for name, _ in loss.named_parameters()] == ["centers"]


def test_matches_eqs_8_to_10() -> None:
    loss = make()
    x, labels = batch()
    assert loss(x, labels).item() == pytest.approx(reference(loss, x, labels), rel=1e-10)


def test_small_gamma_recovers_hardtriple_eq_6() -> None:
    loss = make(gamma=1e-4, tau=0.0)
    x, labels = batch()
    assert loss(x, labels).item() == pytest.approx(reference(loss, x, labels, hard=True), rel=1e-6)


def test_one_center_is_normalized_softmax_with_margin() -> None:
    loss = make(centers_per_class=1)
    x, labels = batch()
    w = F.normalize(loss.centers[:, 0], dim=1)
    logits = loss.la * (F.normalize(x, dim=1) @ w.t() - loss.margin * F.one_hot(labels, 4).double())
    assert loss(x, labels).item() == pytest.approx(F.cross_entropy(logits, labels).item(), rel=1e-12)


def test_regularizer_is_eq_9_over_c_k_k_minus_1() -> None:
    with_reg = make(tau=0.2)
    without = make(tau=0.0)
    x, labels = batch()
    w = F.normalize(with_reg.centers.detach(), dim=-1)
    expected = 0.0
    for c in range(4):
        for t in range(10):
            for s in range(t + 1, 10):
                expected += math.sqrt(2 - 2 * float(w[c, s] @ w[c, t]))
    difference = with_reg(x, labels).item() - without(x, labels).item()
    assert difference == pytest.approx(0.2 * expected / (4 * 10 * 9), rel=1e-10)


def test_merged_centers_have_finite_gradient() -> None:
    loss = make()
    with torch.no_grad():
        loss.centers[0, 1] = loss.centers[0, 0]
        loss.centers[2, :] = loss.centers[2, 0]
    x, labels = batch()
    value = loss(x, labels)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(loss.centers.grad).all()


def test_merged_centers_in_float32_have_finite_gradient() -> None:
    loss = build_loss("softtriple", num_classes=3, embedding_dim=16, centers_per_class=4)
    with torch.no_grad():
        loss.centers[:] = loss.centers[:, :1]
    x = torch.randn(6, 16, requires_grad=True)
    loss(x, torch.arange(6) % 3).backward()
    assert torch.isfinite(loss.centers.grad).all() and torch.isfinite(x.grad).all()


def test_centers_are_used_on_the_sphere() -> None:
    loss = make()
    x, labels = batch()
    before = loss(x, labels).item()
    with torch.no_grad():
        loss.centers.mul_(3.0)
    assert loss(x, labels).item() == pytest.approx(before, rel=1e-12)


def test_labels_out_of_range_raise() -> None:
    loss = make()
    with pytest.raises(ValueError):
        loss(torch.randn(2, 6, dtype=torch.float64), torch.tensor([0, 4]))


def test_dimension_mismatch_raises() -> None:
    with pytest.raises(ValueError):
        make()(torch.randn(2, 5, dtype=torch.float64), torch.tensor([0, 1]))


@pytest.mark.parametrize(
    "options",
    [{"centers_per_class": 0}, {"gamma": 0.0}, {"la": -1.0}, {"tau": -0.1}, {"center_lr": 0.0}],
)
def test_invalid_options_raise_config_error(options: dict) -> None:
    with pytest.raises(ConfigError):
        SoftTripleLoss(num_classes=3, embedding_dim=4, **options)


def test_center_lr_option_for_the_trainer() -> None:
    loss = build_loss("softtriple", num_classes=3, embedding_dim=4, center_lr="0.1")
    assert loss.center_lr == 0.1
