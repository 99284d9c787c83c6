"""The one distance helper every loss goes through.

:func:`pairwise_distance` gives the matrix of distances between two sets of rows from the
Gram matrix, ||u||^2 - 2 u.v + ||v||^2: one matrix product instead of an (N, M, D) tensor of
differences.  Its backward pass is written out so that it, too, costs one product for a
set against itself (autograd would spend two, one per operand of u.v), and a sparse one
when a miner has kept only a few distances per row.

Two numerical traps are handled here so that no loss has to think about them:

* rounding can make a squared distance slightly negative, so it is clamped at zero (the
  formula and the clamp are :func:`reid.decision.squared_distances_from_gram`, the one
  ranking uses too);
* the square root has an infinite derivative at zero, which turns the diagonal of a
  self-distance matrix, or two identical points, into a NaN or infinite gradient.  The
  root is taken only where the squared distance exceeds ``eps``; elsewhere the distance is
  exactly zero and its gradient is zero (the subgradient that code usually takes, as the
  triplet document notes for ||u - v|| at u = v).

float16 and bfloat16 are computed and returned in float32: squared distances overflow
float16 long before the losses built on them do.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from reid.decision import squared_distances_from_gram

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float16 and bfloat16 are promoted to float32; every other float type is kept."""
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def safe_sqrt(squared: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Square root whose value and gradient are 0 wherever ``squared <= eps``."""
    positive = squared > eps
    # The inner where keeps sqrt's backward away from zero: a masked-out branch still
    # receives a zero upstream gradient, and 0 * inf would be NaN.
    root = torch.sqrt(torch.where(positive, squared, torch.ones_like(squared)))
    return torch.where(positive, root, torch.zeros_like(squared))


class _SquaredDistances(torch.autograd.Function):
    """||x_i - y_j||^2 for every i, j, clamped at 0; ``y=None`` means x against itself,
    with an exactly zero diagonal."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, y: torch.Tensor | None) -> torch.Tensor:
        other = x if y is None else y
        x_norms = (x * x).sum(-1, keepdim=True)
        other_norms = x_norms if y is None else (other * other).sum(-1, keepdim=True)
        squared = x @ other.transpose(-1, -2)
        squared_distances_from_gram(squared, x_norms, other_norms.transpose(-1, -2))
        if y is None:
            squared.diagonal(dim1=-2, dim2=-1).zero_()
        ctx.save_for_backward(x, other, squared)
        ctx.same = y is None
        return squared

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        x, other, squared = ctx.saved_tensors
        # Clamped entries (and the diagonal) are constants: no gradient flows through them.
        grad = torch.where(squared > 0, grad, torch.zeros_like(grad))
        if ctx.same:
            # d/dx_i of Σ g_ij ||x_i - x_j||^2 = 2 Σ_j (g_ij + g_ji)(x_i - x_j).
            both = grad + grad.transpose(-1, -2)
            return _weighted_difference(both, x, x), None
        needs_x, needs_y = ctx.needs_input_grad
        grad_x = _weighted_difference(grad, x, other) if needs_x else None
        grad_y = _weighted_difference(grad.transpose(-1, -2), other, x) if needs_y else None
        return grad_x, grad_y


def _weighted_difference(weights: torch.Tensor, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """2 Σ_j w_ij (x_i - other_j) for every i."""
    scaled = x * (2.0 * weights.sum(-1, keepdim=True))
    if weights.dim() == 2 and _is_sparse_enough(weights):
        # A miner leaves a few entries per row (batch-hard: two); a sparse product costs
        # O(nnz D) instead of O(N M D) for the dense one.
        return scaled.sub_(torch.sparse.mm(weights.to_sparse(), other), alpha=2.0)
    return scaled.sub_(weights @ other, alpha=2.0)


def _is_sparse_enough(weights: torch.Tensor) -> bool:
    # Below about one entry in 16 the sparse product beats the dense one on CPU and GPU.
    return int(torch.count_nonzero(weights)) * 16 <= weights.numel()


def pairwise_distance(
    x: torch.Tensor,
    y: torch.Tensor | None = None,
    *,
    squared: bool = False,
    normalize: bool = False,
    eps: float = 1e-12,
) -> torch.Tensor:
    """Euclidean distances between the rows of ``x`` (..., N, D) and ``y`` (..., M, D).

    With ``y`` omitted the distances are those of ``x`` to itself and the diagonal is exactly
    zero.  ``squared`` returns ||u - v||^2 instead of the norm; ``normalize`` first puts every
    row on the unit sphere.
    """
    x = _prepare(x, normalize)
    other = None if y is None else _prepare(y, normalize)
    distances = _SquaredDistances.apply(x, other)
    return distances if squared else safe_sqrt(distances, eps)


def _prepare(x: torch.Tensor, normalize: bool) -> torch.Tensor:
    x = x.to(compute_dtype(x.dtype))
    return F.normalize(x, dim=-1) if normalize else x
