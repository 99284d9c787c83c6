"""Contrastive loss on every pair of the batch, in the three forms of the contrastive seed
document.  E is the Euclidean norm D of the difference of two embeddings, or D^2 with
``squared=True``; Y = 0 marks a similar pair and Y = 1 a dissimilar one.

* ``"hadsell"`` — Hadsell, Chopra and LeCun (2006), eq. 4 with L_S and L_D of eqs. 6, 8:
  L = (1 - Y) ½ E^2 + Y ½ max(0, m - E)^2.
* ``"chopra"`` — Chopra, Hadsell and LeCun (2005), eq. 9, with Q the upper bound of E:
  L = (1 - Y) (2/Q) E^2 + Y 2Q exp(-2.77 E / Q).  No margin: every impostor is pushed.
* ``"two_margin"`` — the unsquared two-margin variant the document reads in
  pytorch-metric-learning: [E - m_pos]_+ for similar pairs, [m_neg - E]_+ for dissimilar.

Reductions: Hadsell and Chopra average over all ordered pairs i != j of the batch (the
papers sum over labelled pairs; a mean keeps the scale independent of the batch size).
Two-margin averages the non-zero similar-pair losses and the non-zero dissimilar-pair
losses separately and adds the two means.

The papers keep E the norm on purpose: with the squared norm, the push on a dissimilar
pair vanishes as the pair closes (Chopra et al.'s plateau), so ``squared`` is off by
default.  At exactly zero distance the norm has no derivative and the push is 0 there
(the subgradient the distance helper takes); any non-zero distance gets the full push.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from reid.errors import ConfigError
from reid.losses.base import MetricLoss, masked_mean, nonzero_mean
from reid.losses.distances import pairwise_distance
from reid.losses.mining import pair_masks

FORM_CHOICES = ("hadsell", "chopra", "two_margin")

# Chopra et al. (2005) fix the exponent's constant at 2.77 (their eq. 9).
_CHOPRA_RATE = 2.77


class ContrastiveLoss(MetricLoss):
    """Contrastive loss over all pairs of a batch (Hadsell, Chopra and LeCun 2006;
    Chopra, Hadsell and LeCun 2005); the module docstring gives the three forms.

    Args:
        form: ``"hadsell"``, ``"chopra"`` or ``"two_margin"``.
        margin: m of the Hadsell form, in the units of E: the Euclidean distance (0..2
            between unit embeddings), or its square (0..4) with ``squared``.
        q: Chopra et al.'s upper bound of the energy. Left at ``None`` it is the bound on
            the unit sphere — 2 for the norm, 4 for its square — which is exact with
            ``normalize=True``; give it explicitly for unnormalized embeddings.
        pos_margin, neg_margin: the two margins of ``"two_margin"`` (similar pairs closer
            than ``pos_margin`` and dissimilar ones farther than ``neg_margin`` cost nothing).
        normalize: put the embeddings on the unit sphere first.
        squared: E is the squared Euclidean distance.

    Called as ``loss(embeddings, labels)`` with float (N, D) embeddings (float16/bfloat16
    are computed in float32) and integer (N,) identity labels; returns a float32 scalar >= 0; a batch of one embedding, or none, gives a
    differentiable zero.

    Raises:
        ConfigError: when built with an unknown form or a margin or bound out of range.
        BatchError: when called with a wrong shape or dtype or NaN/infinite embeddings.
    """

    def __init__(
        self,
        form: str = "hadsell",
        margin: float = 1.0,
        q: float | None = None,
        pos_margin: float = 0.0,
        neg_margin: float = 1.0,
        normalize: bool = False,
        squared: bool = False,
    ) -> None:
        super().__init__()
        if form not in FORM_CHOICES:
            raise ConfigError(
                f"contrastive: unknown form {form!r}; choose one of {', '.join(FORM_CHOICES)}"
            )
        if margin <= 0:
            raise ConfigError(f"contrastive: margin must be > 0, got {margin}")
        if q is not None and q <= 0:
            raise ConfigError(f"contrastive: q must be > 0, got {q}")
        self.form = form
        self.margin = float(margin)
        self.q = float(q) if q is not None else (4.0 if squared else 2.0)
        self.pos_margin = float(pos_margin)
        self.neg_margin = float(neg_margin)
        self.normalize = normalize
        self.squared = squared

    def extra_repr(self) -> str:
        return (
            f"form={self.form!r}, margin={self.margin}, q={self.q}, "
            f"pos_margin={self.pos_margin}, neg_margin={self.neg_margin}, "
            f"normalize={self.normalize}, squared={self.squared}"
        )

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        energy = pairwise_distance(embeddings, squared=self.squared, normalize=self.normalize)
        masks = pair_masks(labels)
        if self.form == "two_margin":
            pull = F.relu(energy - self.pos_margin)
            push = F.relu(self.neg_margin - energy)
            return nonzero_mean(pull, masks.positive) + nonzero_mean(push, masks.negative)
        if self.form == "hadsell":
            pull = 0.5 * energy.square()
            push = 0.5 * F.relu(self.margin - energy).square()
        else:
            pull = (2.0 / self.q) * energy.square()
            push = 2.0 * self.q * torch.exp(-_CHOPRA_RATE * energy / self.q)
        pairs = masks.positive | masks.negative
        return masked_mean(torch.where(masks.positive, pull, push), pairs)
