"""The one pairwise-distance helper every loss goes through.

Distances are computed from the Gram matrix, ||u||^2 - 2 u.v + ||v||^2, which costs one
matrix product instead of an (N, M, D) tensor of differences.  Two numerical traps are
handled here so that no loss has to think about them:

* rounding can make a squared distance slightly negative, so it is clamped at zero;
* the square root has an infinite derivative at zero, which turns the diagonal of a
  self-distance matrix, or two identical points, into a NaN or infinite gradient.  The
  root is taken only where the squared distance exceeds ``eps``; elsewhere the distance is
  exactly zero and its gradient is zero (the subgradient that code usually takes, as the
  triplet document notes for ||u - v|| at u = v).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

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
    row on the unit sphere.  float16 and bfloat16 inputs are computed and returned in float32
    because squared distances overflow float16 long before the losses built on them do.
    """
    dtype = compute_dtype(x.dtype)
    x = x.to(dtype)
    if normalize:
        x = F.normalize(x, dim=-1)
    if y is None:
        other = x
    else:
        other = y.to(dtype)
        if normalize:
            other = F.normalize(other, dim=-1)
    x_sq = (x * x).sum(-1, keepdim=True)
    other_sq = (other * other).sum(-1).unsqueeze(-2)
    if x.dim() == 2:
        squared_dist = torch.addmm(x_sq + other_sq, x, other.t(), alpha=-2.0)
    else:
        squared_dist = x_sq + other_sq - 2.0 * (x @ other.transpose(-1, -2))
    squared_dist = squared_dist.clamp_min(0.0)
    if y is None:
        # The diagonal is zero by definition; computed, it is rounding noise whose root
        # would feed a huge 1/(2 sqrt(noise)) into the backward pass.
        eye = torch.eye(x.shape[-2], dtype=torch.bool, device=x.device)
        squared_dist = squared_dist.masked_fill(eye, 0.0)
    if squared:
        return squared_dist
    return safe_sqrt(squared_dist, eps)
