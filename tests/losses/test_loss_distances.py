"""The shared pairwise-distance helper: values, safe square root, precision."""

from __future__ import annotations

import pytest
import torch

from reid.losses.distances import compute_dtype, pairwise_distance, safe_sqrt


def brute(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(x[..., :, None, :] - y[..., None, :, :], dim=-1)


def test_matches_brute_force_for_self_and_cross_distances() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(7, 5, generator=generator, dtype=torch.float64)
    y = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(pairwise_distance(x), brute(x, x))
    torch.testing.assert_close(pairwise_distance(x, y), brute(x, y))
    torch.testing.assert_close(pairwise_distance(x, y, squared=True), brute(x, y).square())


def test_batched_inputs() -> None:
    x = torch.randn(4, 6, 3, dtype=torch.float64)
    torch.testing.assert_close(pairwise_distance(x), brute(x, x))


def test_diagonal_is_exactly_zero_with_zero_gradient() -> None:
    x = torch.randn(6, 4, requires_grad=True) * 10
    x.retain_grad()
    dist = pairwise_distance(x)
    assert torch.all(dist.diagonal() == 0)
    dist.diagonal().sum().backward()
    assert torch.count_nonzero(x.grad) == 0


def test_identical_points_have_finite_gradients() -> None:
    base = torch.randn(1, 8)
    x = torch.cat([base, base, base + 1.0]).requires_grad_(True)
    for squared in (False, True):
        dist = pairwise_distance(x, squared=squared)
        (grad,) = torch.autograd.grad(dist.sum(), x)
        assert torch.isfinite(grad).all()
        assert dist[0, 1].item() == pytest.approx(0.0, abs=1e-3)


def test_safe_sqrt_gradient_at_zero_is_zero() -> None:
    squared = torch.tensor([0.0, 1e-20, 4.0], requires_grad=True)
    root = safe_sqrt(squared)
    root.sum().backward()
    assert root.tolist() == [0.0, 0.0, 2.0]
    assert squared.grad.tolist() == [0.0, 0.0, 0.25]


def test_negative_rounding_is_clamped() -> None:
    # Two nearly identical large vectors: the Gram expansion can go slightly negative.
    x = torch.full((2, 64), 1000.0)
    x[1, 0] += 1e-3
    assert torch.all(pairwise_distance(x, squared=True) >= 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_computed_in_float32(dtype: torch.dtype) -> None:
    # 300^2 * 2 overflows float16 (max 65504); in float32 it does not.
    x = torch.tensor([[300.0, 0.0], [0.0, 300.0]], dtype=dtype)
    dist = pairwise_distance(x, squared=True)
    assert dist.dtype == torch.float32
    assert dist[0, 1].item() == pytest.approx(180000.0, rel=1e-3)
    assert compute_dtype(dtype) == torch.float32
    assert compute_dtype(torch.float64) == torch.float64


def test_normalize_puts_rows_on_the_unit_sphere() -> None:
    x = torch.randn(10, 3) * 50
    dist = pairwise_distance(x, normalize=True)
    assert dist.max() <= 2.0 + 1e-5
    unit = x / x.norm(dim=1, keepdim=True)
    torch.testing.assert_close(dist, brute(unit, unit), atol=1e-5, rtol=0)


def test_gradcheck_float64() -> None:
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    y = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: pairwise_distance(a), (x,))
    assert torch.autograd.gradcheck(lambda a, b: pairwise_distance(a, b), (x, y))
    assert torch.autograd.gradcheck(lambda a: pairwise_distance(a, normalize=True), (x,))


def _reference_squared(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x[:, None, :] - y[None, :, :]).square().sum(-1)


@pytest.mark.parametrize("density", [0.02, 0.5], ids=["sparse backward", "dense backward"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_backward_matches_autograd_of_the_differences(
    density: float, cross: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A miner such as batch-hard leaves ~2 distances per row: the helper's backward then
    # takes its sparse path; a dense loss takes the dense one.  Both must be exact.
    sparse_products = []
    sparse_mm = torch.sparse.mm
    monkeypatch.setattr(torch.sparse, "mm", lambda *a: sparse_products.append(1) or sparse_mm(*a))
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(96, 7, generator=generator, dtype=torch.float64, requires_grad=True)
    y = torch.randn(80, 7, generator=generator, dtype=torch.float64, requires_grad=True) if cross else None
    upstream = torch.randn(96, 80 if cross else 96, generator=generator, dtype=torch.float64)
    upstream = upstream * (torch.rand(upstream.shape, generator=generator, dtype=torch.float64) < density)
    ours = pairwise_distance(x, y, squared=True)
    inputs = (x,) if y is None else (x, y)
    grads = torch.autograd.grad(ours, inputs, upstream)
    reference = _reference_squared(x, x if y is None else y)
    expected = torch.autograd.grad(reference, inputs, upstream)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)
    assert bool(sparse_products) == (density < 0.1)


def test_gradcheck_on_a_batch_hard_sized_gradient() -> None:
    # 40 points, one kept distance per row (2 of 40 after symmetrizing, under the 1/16
    # density bound): the sparse backward path under gradcheck.
    x = torch.randn(40, 3, dtype=torch.float64, requires_grad=True)
    partner = torch.randperm(40, generator=torch.Generator().manual_seed(0))

    def kept(points: torch.Tensor) -> torch.Tensor:
        return pairwise_distance(points)[torch.arange(40), partner]

    assert torch.autograd.gradcheck(kept, (x,), fast_mode=True)
