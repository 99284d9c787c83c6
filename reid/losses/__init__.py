"""Metric-learning losses of the seed documents, selectable by name with :func:`build_loss`.

Every loss is an ``nn.Module`` called as ``loss(embeddings, labels)`` with float (N, D)
embeddings and integer (N,) labels, returning a scalar tensor.
"""

from reid.losses.centroid_triplet import CentroidTripletLoss
from reid.losses.contrastive import ContrastiveLoss
from reid.losses.cross_entropy import CrossEntropyLoss
from reid.losses.distances import pairwise_distance
from reid.losses.lifted import LiftedStructuredLoss
from reid.losses.registry import LOSS_NAMES, build_loss, loss_options
from reid.losses.softtriple import SoftTripleLoss
from reid.losses.triplet import TripletLoss

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
