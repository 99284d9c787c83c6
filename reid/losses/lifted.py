"""Lifted structured loss (Song, Xiang, Jegelka and Savarese 2016), as in its seed document.

For every positive pair (i, j) of the batch, with D the Euclidean distance and α the margin:

    hard   (eq. 3):  J_ij = max( max_{(i,k) ∈ N} α - D_ik,  max_{(j,l) ∈ N} α - D_jl ) + D_ij
    smooth (eq. 4):  J_ij = log( Σ_{(i,k) ∈ N} exp(α - D_ik) + Σ_{(j,l) ∈ N} exp(α - D_jl) ) + D_ij

    J = 1 / (2|P|) Σ_{(i,j) ∈ P} max(0, J_ij)^2

The sum runs over ordered pairs, so |P| counts (i, j) and (j, i) separately; J_ij is
symmetric, which makes this equal to the paper's sum over unordered pairs divided by
twice their number.  The smooth form is computed as logaddexp of the two per-row
log-sum-exps, which is the single log of the paper without its overflow.  A batch with no
positive pair, or with one class (no negatives), gives a differentiable zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from reid.errors import ConfigError
from reid.losses.base import MetricLoss, masked_mean
from reid.losses.distances import pairwise_distance
from reid.losses.mining import pair_masks


class LiftedStructuredLoss(MetricLoss):
    """Lifted structured loss (Oh Song, Xiang, Jegelka and Savarese 2016, "Deep Metric
    Learning via Lifted Structured Feature Embedding"); the module docstring gives eqs. 3-4.

    Args:
        smooth: eq. 4 (log-sum-exp over the negatives) instead of the nested max of eq. 3.
        margin: α, in Euclidean distance (0..2 between unit embeddings).
        normalize: put the embeddings on the unit sphere first.

    Called as ``loss(embeddings, labels)`` with float (N, D) embeddings (float16/bfloat16
    are computed in float32) and integer (N,) identity labels; returns a float32 scalar >= 0, a differentiable zero when the batch has no
    positive pair or a single identity.

    Raises:
        ConfigError: when built with a negative margin.
        BatchError: when called with a wrong shape or dtype or NaN/infinite embeddings.
    """

    def __init__(self, smooth: bool = True, margin: float = 1.0, normalize: bool = False) -> None:
        super().__init__()
        if margin < 0:
            raise ConfigError(f"lifted: margin must be >= 0, got {margin}")
        self.smooth = smooth
        self.margin = float(margin)
        self.normalize = normalize

    def extra_repr(self) -> str:
        return f"smooth={self.smooth}, margin={self.margin}, normalize={self.normalize}"

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        dist = pairwise_distance(embeddings, normalize=self.normalize)
        masks = pair_masks(labels)
        has_negative = masks.negative.any(1)
        # A row without any negative (only in a one-class batch, whose pairs are all masked
        # out below) is filled with zeros rather than -inf: logsumexp's backward over a row
        # of -inf is NaN even when the upstream gradient is zero.
        filler = torch.where(has_negative, float("-inf"), 0.0).to(dist.dtype)
        violation = torch.where(masks.negative, self.margin - dist, filler[:, None])
        if self.smooth:
            per_row = torch.logsumexp(violation, dim=1)
        else:
            per_row = violation.amax(1)
        if self.smooth:
            both = torch.logaddexp(per_row[:, None], per_row[None, :])
        else:
            both = torch.maximum(per_row[:, None], per_row[None, :])
        pair_loss = F.relu(both + dist).square()
        # masked_mean divides by |P| over ordered pairs; the 1/2 is the paper's.
        return 0.5 * masked_mean(pair_loss, masks.positive & has_negative[:, None])
