"""Centroid triplet loss (Wieczorek et al. 2021, "On the Unreasonable Effectiveness of
Centroids in Image Retrieval"), exactly as its seed document specifies.

Eq. 2 of the paper with the centroids of eq. 3:

    L = [ d(f(A), c_P) - d(f(A), c_N) + α_c ]_+

d is the squared Euclidean distance on the embeddings as passed (no normalization).
c_P is the mean of the *other* embeddings of the anchor's class — the anchor is left out
of its own centroid — and c_N the mean of every embedding of another class.  One loss per
anchor and other class: P classes of M samples give P·M·(P - 1) losses, and classes may
have different sizes.  A class with one embedding has no positive centroid, so its
member is no anchor, but its centroid is still a negative for the others.  The losses are
averaged over the non-zero ones (the convention of the library the document describes);
with no anchor left, or one class, the result is a differentiable zero.  ``smooth_loss``
uses softplus(Δ + α_c) instead of the hinge.  The paper gives no value for α_c; 0.05 is
the document's default.

Since c_P = (n μ - f(A)) / (n - 1) for a class of n members with mean μ,
f(A) - c_P = n / (n - 1) · (f(A) - μ): one distance matrix to the class means serves both
the positive and the negative centroids.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from reid.errors import BatchError, ConfigError
from reid.losses.base import MetricLoss, nonzero_mean
from reid.losses.distances import pairwise_distance


class CentroidTripletLoss(MetricLoss):
    """Centroid triplet loss over the class centroids of a batch (Wieczorek et al. 2021,
    "On the Unreasonable Effectiveness of Centroids in Image Retrieval", eq. 2-3).

    Args:
        margin: α_c, in squared Euclidean distance (0..4 between unit embeddings; the
            embeddings are used as given, not normalized).
        smooth_loss: softplus(Δ + α_c) instead of the hinge.

    Called as ``loss(embeddings, labels)`` with float (N, D) embeddings (float16/bfloat16
    are computed in float32) and integer (N,) identity labels; returns a float32 scalar >= 0, a differentiable zero when no identity has two
    embeddings or the batch has one identity.

    Raises:
        ConfigError: when built with a negative margin.
        BatchError: when called without labels, with anything but labels
            (``indices_tuple``, ``ref_emb``), a wrong shape or dtype, or NaN/infinite embeddings.
    """

    def __init__(self, margin: float = 0.05, smooth_loss: bool = False) -> None:
        super().__init__()
        if margin < 0:
            raise ConfigError(f"centroid_triplet: margin must be >= 0, got {margin}")
        self.margin = float(margin)
        self.smooth_loss = smooth_loss

    def extra_repr(self) -> str:
        return f"margin={self.margin}, smooth_loss={self.smooth_loss}"

    def forward(
        self, embeddings: torch.Tensor, labels: torch.Tensor | None = None, *args: Any, **kwargs: Any
    ) -> torch.Tensor:
        if args or kwargs:
            extras = sorted(kwargs) + (["extra positional arguments"] if args else [])
            raise BatchError(
                f"centroid triplet loss takes labels only, got {', '.join(extras)} "
                "(indices_tuple and ref_emb are not supported)"
            )
        if labels is None:
            raise BatchError("centroid triplet loss needs labels")
        return super().forward(embeddings, labels)

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        _, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
        members = F.one_hot(inverse, counts.shape[0]).to(embeddings.dtype)  # (N, C)
        means = (members.t() @ embeddings) / counts[:, None].to(embeddings.dtype)
        to_means = pairwise_distance(embeddings, means, squared=True)  # (N, C)
        size = counts[inverse].to(embeddings.dtype)
        leave_one_out = (size / (size - 1).clamp_min(1)).square()
        positive = to_means.gather(1, inverse[:, None]).squeeze(1) * leave_one_out
        delta = positive[:, None] - to_means + self.margin
        losses = F.softplus(delta) if self.smooth_loss else F.relu(delta)
        is_anchor = (size > 1)[:, None]
        return nonzero_mean(losses, is_anchor & (members == 0))
