"""Metric-learning losses, selectable by name with :func:`build_loss`.

Every loss is an ``nn.Module`` called as ``loss(embeddings, labels)`` with float (N, D)
embeddings and integer (N,) labels, returning a float32 scalar tensor; a batch with
nothing to learn gives a differentiable zero. Distances are Euclidean (0..2 between unit
embeddings) unless a loss's ``squared`` option asks for their square. Bad options raise
:class:`reid.errors.ConfigError` when the loss is built; a malformed batch (wrong shape or
dtype, NaN or infinite values, labels outside a loss's classes) raises
:class:`reid.errors.BatchError` when it is called.

Papers: triplet — Hermans et al. 2017 "In Defense of the Triplet Loss"; contrastive —
Hadsell et al. 2006 and Chopra et al. 2005; lifted structured — Oh Song et al. 2016;
centroid triplet — Wieczorek et al. 2021; SoftTriple — Qian et al. 2019; cross-entropy
with label smoothing — Szegedy et al. 2016.
"""

from typing import TYPE_CHECKING

from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.losses.centroid_triplet import CentroidTripletLoss
    from reid.losses.contrastive import ContrastiveLoss
    from reid.losses.cross_entropy import CrossEntropyLoss
    from reid.losses.distances import pairwise_distance
    from reid.losses.lifted import LiftedStructuredLoss
    from reid.losses.names import LOSS_NAMES
    from reid.losses.registry import build_loss, loss_options
    from reid.losses.softtriple import SoftTripleLoss
    from reid.losses.triplet import TripletLoss

__getattr__, __dir__ = lazy_names(__name__, __file__)

__all__ = [
    "LOSS_NAMES",
    "CentroidTripletLoss",
    "ContrastiveLoss",
    "CrossEntropyLoss",
    "LiftedStructuredLoss",
    "SoftTripleLoss",
    "TripletLoss",
    "build_loss",
    "loss_options",
    "pairwise_distance",
]
