"""Which pairs and triplets of a batch a loss looks at, chosen with masks, never with loops.

The masks come from the labels; the miners take a distance matrix and return indices and
a boolean ``valid``/``found`` mask saying which entries are real.  Losses then reduce with
``torch.where`` and masked sums, so a batch with nothing to learn gives an empty mask and
a differentiable zero instead of an indexing error or a NaN.

Triplets are enumerated as (anchor-positive pair, negative): an (M, N) grid over the M
positive pairs rather than an (N, N, N) cube.  A P x K batch has M = P K (K - 1) positive
pairs, so the grid is about N / K times smaller than the cube.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class PairMasks(NamedTuple):
    """Boolean (N, N) masks: same label without the diagonal, and different label."""

    positive: torch.Tensor
    negative: torch.Tensor


class HardestPairs(NamedTuple):
    """Per anchor: index of its farthest positive, of its closest negative, and whether it
    has both (an anchor without them forms no triplet; its indices are meaningless)."""

    positive: torch.Tensor
    negative: torch.Tensor
    valid: torch.Tensor


class PositivePairs(NamedTuple):
    """The M ordered positive pairs (anchor[m], positive[m])."""

    anchor: torch.Tensor
    positive: torch.Tensor


def pair_masks(labels: torch.Tensor) -> PairMasks:
    """Positive and negative pair masks of a label vector (N,)."""
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(labels.shape[0], dtype=torch.bool, device=labels.device)
    return PairMasks(positive=same & ~eye, negative=~same)


def positive_pairs(masks: PairMasks) -> PositivePairs:
    """Every ordered positive pair of the batch, as index vectors."""
    anchor, positive = masks.positive.nonzero(as_tuple=True)
    return PositivePairs(anchor, positive)


def batch_hard(dist: torch.Tensor, masks: PairMasks) -> HardestPairs:
    """Batch-hard mining (Hermans et al. 2017): the farthest positive and the closest
    negative of every anchor."""
    inf = torch.full_like(dist, float("inf"))
    positive = torch.where(masks.positive, dist, -inf).argmax(1)
    negative = torch.where(masks.negative, dist, inf).argmin(1)
    valid = masks.positive.any(1) & masks.negative.any(1)
    return HardestPairs(positive, negative, valid)


def swapped_negative_distance(dist: torch.Tensor, pairs: PositivePairs) -> torch.Tensor:
    """(M, N) grid of min(d(a, n), d(p, n)) over positive pairs (a, p) and every n: the
    distance swap of Balntas et al. (2016), which measures the negative against the
    closer of a and p."""
    return torch.minimum(dist[pairs.anchor], dist[pairs.positive])


def semihard_negatives(
    positive_dist: torch.Tensor,
    negative_dist: torch.Tensor,
    negatives: torch.Tensor,
    margin: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Semi-hard mining (Schroff et al. 2015, FaceNet): for each anchor-positive pair, the
    closest negative that is farther than the positive but still inside the margin,
    d(a, p) < d(a, n) < d(a, p) + margin.

    ``positive_dist`` (M,) holds d(a, p) of the M positive pairs, ``negative_dist`` (M, N)
    the negative distance of every (pair, n), and ``negatives`` (M, N) which n are
    negatives of the pair.  Returns the chosen negative's index (M,) and whether the pair
    found one.  A pair whose negatives are all easy (beyond the margin) or all hard
    (closer than the positive) finds none and forms no triplet: FaceNet avoids hard
    negatives on purpose, because chasing them early collapses the embedding.
    """
    d_ap = positive_dist[:, None]
    inside = negatives & (negative_dist > d_ap) & (negative_dist < d_ap + margin)
    far = torch.full_like(negative_dist, float("inf"))
    chosen = torch.where(inside, negative_dist, far).argmin(1)
    return chosen, inside.any(1)
