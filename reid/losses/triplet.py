"""Triplet loss with batch-all, batch-hard and semi-hard mining.

Per triplet (a, p, n), with Δ = d(a, p) - d(a, n) (triplet seed document; Schroff et al.
2015, FaceNet, eq. 2; Hermans et al. 2017, "In Defense of the Triplet Loss", Sec. 2):

    hinge:        L = max(0, Δ + m)
    soft margin:  L = ln(1 + e^Δ)          (Hermans et al., Sec. 2, "soft-margin")

The soft margin replaces the hinge and its margin altogether, as in Hermans et al., so
``margin`` is not used when ``soft=True``.  d is the Euclidean norm, or its square with
``squared=True`` (FaceNet's choice); ``normalize=True`` puts the embeddings on the unit
sphere first.  With ``swap=True`` the negative distance of a triplet is
min(d(a, n), d(p, n)) (Balntas et al. 2016, the distance swap of nn.TripletMarginLoss).

Mining and reduction, so that a number means one thing:

* ``"hard"`` (Hermans et al. L_BH): one triplet per anchor, its farthest positive and
  closest negative; mean over the anchors that have a positive (and a negative).  With
  ``swap`` the swap is applied to that mined triplet and the mean is over the non-zero
  losses.
* ``"all"`` (Hermans et al. L_BA≠0): every valid triplet; mean over the non-zero losses,
  so that the easy triplets do not dilute the signal.
* ``"semihard"`` (FaceNet, Sec. 3.2): for every anchor-positive pair, the closest negative
  with d(a, p) < d(a, n) < d(a, p) + m; mean over the pairs that found one.  A pair whose
  negatives are all easy or all hard contributes nothing and is not counted (FaceNet
  skips hard negatives to avoid collapse); a batch where no pair finds one gives 0.
  Every selected triplet has a positive loss, so this is also a mean over non-zero losses.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from reid.errors import ConfigError
from reid.losses.base import MetricLoss, masked_mean, nonzero_mean
from reid.losses.distances import pairwise_distance
from reid.losses.names import TRIPLET_MARGIN, TRIPLET_MINING
from reid.losses.mining import (
    PairMasks,
    PositivePairs,
    batch_hard,
    pair_masks,
    positive_pairs,
    semihard_negatives,
    swapped_negative_distance,
)

MINING_CHOICES = ("all", "hard", "semihard")


class TripletLoss(MetricLoss):
    """Triplet loss over a P x K batch (Hermans, Beyer and Leibe 2017, "In Defense of the
    Triplet Loss for Person Re-Identification"; Schroff et al. 2015, FaceNet); the module
    docstring gives the exact formula and what each mining averages over.

    Args:
        mining: ``"hard"`` (batch-hard, one triplet per anchor), ``"all"`` (every valid
            triplet, mean over the non-zero ones) or ``"semihard"`` (FaceNet's choice).
        margin: m of the hinge, in the units of d: the Euclidean distance (0..2 between
            unit embeddings), or its square (0..4) with ``squared``. Unused with ``soft``.
        swap: the negative distance is min(d(a, n), d(p, n)) (Balntas et al. 2016).
        soft: ln(1 + e^Δ) instead of the hinge (Hermans et al.'s soft margin).
        squared: d is the squared Euclidean distance.
        normalize: put the embeddings on the unit sphere first.

    Called as ``loss(embeddings, labels)`` with float (N, D) embeddings (float16/bfloat16
    are computed in float32) and integer (N,) identity labels; returns a float32 scalar >= 0, a differentiable zero when the batch has
    no valid triplet (one identity, or no identity with two images).

    Raises:
        ConfigError: when built with an unknown mining, a negative margin, or ``soft``
            with ``"semihard"``.
        BatchError: when called with a wrong shape or dtype or NaN/infinite embeddings.
    """

    def __init__(
        self,
        mining: str = TRIPLET_MINING,
        margin: float = TRIPLET_MARGIN,
        swap: bool = False,
        soft: bool = False,
        squared: bool = False,
        normalize: bool = False,
    ) -> None:
        super().__init__()
        if mining not in MINING_CHOICES:
            raise ConfigError(
                f"triplet: unknown mining {mining!r}; choose one of {', '.join(MINING_CHOICES)}"
            )
        if margin < 0:
            raise ConfigError(f"triplet: margin must be >= 0, got {margin}")
        if soft and mining == "semihard":
            raise ConfigError(
                "triplet: soft=True needs mining 'hard' or 'all'; "
                "semi-hard selection is defined by the margin that soft drops"
            )
        self.mining = mining
        self.margin = float(margin)
        self.swap = swap
        self.soft = soft
        self.squared = squared
        self.normalize = normalize

    def extra_repr(self) -> str:
        return (
            f"mining={self.mining!r}, margin={self.margin}, swap={self.swap}, "
            f"soft={self.soft}, squared={self.squared}, normalize={self.normalize}"
        )

    def _per_triplet(self, delta: torch.Tensor) -> torch.Tensor:
        if self.soft:
            return F.softplus(delta)
        return F.relu(delta + self.margin)

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        dist = pairwise_distance(embeddings, squared=self.squared, normalize=self.normalize)
        masks = pair_masks(labels)
        if self.mining == "hard":
            return self._batch_hard(dist, masks)
        pairs = positive_pairs(masks)
        if self.mining == "all":
            return self._batch_all(dist, masks, pairs)
        return self._semihard(dist, masks, pairs)

    def _negative_grid(self, dist: torch.Tensor, pairs: PositivePairs) -> torch.Tensor:
        if self.swap:
            return swapped_negative_distance(dist, pairs)
        return dist[pairs.anchor]

    def _batch_hard(self, dist: torch.Tensor, masks: PairMasks) -> torch.Tensor:
        hardest = batch_hard(dist.detach(), masks)
        anchor = torch.arange(dist.shape[0], device=dist.device)
        positive = dist[anchor, hardest.positive]
        negative = dist[anchor, hardest.negative]
        if self.swap:
            swapped = dist[hardest.positive, hardest.negative]
            losses = self._per_triplet(positive - torch.minimum(negative, swapped))
            return nonzero_mean(losses, hardest.valid)
        return masked_mean(self._per_triplet(positive - negative), hardest.valid)

    def _batch_all(self, dist: torch.Tensor, masks: PairMasks, pairs: PositivePairs) -> torch.Tensor:
        positive = dist[pairs.anchor, pairs.positive]
        delta = positive[:, None] - self._negative_grid(dist, pairs)
        return nonzero_mean(self._per_triplet(delta), masks.negative[pairs.anchor])

    def _semihard(self, dist: torch.Tensor, masks: PairMasks, pairs: PositivePairs) -> torch.Tensor:
        positive = dist[pairs.anchor, pairs.positive]
        chosen, found = semihard_negatives(
            positive.detach(),
            self._negative_grid(dist.detach(), pairs),
            masks.negative[pairs.anchor],
            self.margin,
        )
        negative = dist[pairs.anchor, chosen]
        if self.swap:
            negative = torch.minimum(negative, dist[pairs.positive, chosen])
        return masked_mean(self._per_triplet(positive - negative), found)
