"""The losses' names and the defaults a recipe spells out, in a module that imports no
PyTorch, so that ``reid train --help`` lists them at once: :data:`reid.losses.registry`
builds each name and checks at import that it holds exactly these."""

from __future__ import annotations

# The metric losses by name, in the order help lists them.
LOSS_NAMES = ("triplet", "contrastive", "lifted", "centroid_triplet", "softtriple", "cross_entropy")
# The triplet loss's mining and margin when not given: batch-hard, 0.3 (Hermans et al. 2017;
# Luo et al. 2019's strong baseline). :class:`reid.losses.triplet.TripletLoss` defaults to them.
TRIPLET_MINING = "hard"
TRIPLET_MARGIN = 0.3
