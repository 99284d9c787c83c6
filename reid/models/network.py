"""The Re-ID network: backbone, pooling, optional reduction, BNNeck and identity classifier.

BNNeck (Luo et al., "Bag of Tricks and A Strong Baseline for Deep Person
Re-identification", 2019): metric losses see the feature before the BatchNorm, the
classifier sees the feature after it, and at test time the BN feature is the embedding.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from reid.errors import ConfigError
from reid.models.backbones import build_backbone
from reid.models.card import IMAGENET_MEAN, IMAGENET_STD, NECKS, STEM_POOLS, ModelCard


class GeM(nn.Module):
    """Generalized-mean pooling (Radenović et al. 2018) with a learnable exponent p."""

    def __init__(self, p: float = 3.0, eps: float = 1e-6) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.tensor(p))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = F.adaptive_avg_pool2d(x.clamp(min=self.eps).pow(self.p), 1)
        return pooled.pow(1.0 / self.p).flatten(1)


class AvgPool(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(x, 1).flatten(1)


POOLINGS: dict[str, type[nn.Module]] = {"avg": AvgPool, "gem": GeM}


class NetOutput(NamedTuple):
    feature: torch.Tensor
    embedding: torch.Tensor
    logits: torch.Tensor | None


class ReidNet(nn.Module):
    """Backbone -> pooling -> neck -> classifier, with random weights.

    Building one reads no file and opens no connection: starting weights are loaded
    afterwards by :func:`reid.models.pretrained.load_start` (training, ``--pretrained``)
    or from a model folder (:func:`reid.models.load_model`).

    ``neck`` is ``bnneck`` (optional linear reduction, then BatchNorm; what ``reid train``
    trains), ``fc`` (torchreid's head: Linear + BatchNorm1d + ReLU to ``embedding_dim``)
    or ``none`` (the pooled feature). ``stem_pool`` is a ResNet's first max-pool:
    ``padded`` (torchvision's 3x3, stride 2, padding 1) or ``ceil`` (fast-reid's, no
    padding, rounding up). ``input_mean``/``input_std`` are the normalisation (pixels
    scaled to 0..1) its weights expect: ImageNet's until a start says otherwise; what
    training normalises with and what the card records. ``pretrained_note`` says where
    the weights came from. Raises ConfigError for an unknown architecture, pooling, neck
    or stem pool.
    """

    def __init__(
        self,
        architecture: str,
        num_classes: int,
        embedding_dim: int | None = None,
        pooling: str = "avg",
        last_stride: int = 1,
        neck: str = "bnneck",
        stem_pool: str = "padded",
    ) -> None:
        super().__init__()
        if neck not in NECKS:
            raise ConfigError(f"unknown neck {neck!r}; choose one of {', '.join(NECKS)}")
        if stem_pool not in STEM_POOLS:
            raise ConfigError(f"unknown stem pool {stem_pool!r}; choose one of {', '.join(STEM_POOLS)}")
        self.backbone, channels = build_backbone(architecture, last_stride, stem_pool)
        if pooling not in POOLINGS:
            raise ConfigError(f"unknown pooling {pooling!r}; choose {' or '.join(POOLINGS)}")
        self.pool: nn.Module = POOLINGS[pooling]()
        embedding_dim = embedding_dim or channels
        self.bnneck: nn.Module = nn.Identity()
        if neck == "fc":
            self.reduction: nn.Module = nn.Sequential(
                nn.Linear(channels, embedding_dim), nn.BatchNorm1d(embedding_dim), nn.ReLU(inplace=True)
            )
        elif neck == "none":
            self.reduction = nn.Identity()
            embedding_dim = channels
        else:
            self.reduction = (
                nn.Identity() if embedding_dim == channels else nn.Linear(channels, embedding_dim, bias=False)
            )
            self.bnneck = nn.BatchNorm1d(embedding_dim)
            # A BN bias would shift every embedding alike and fight the classifier (Luo et al. 2019).
            self.bnneck.bias.requires_grad_(False)
            nn.init.constant_(self.bnneck.weight, 1.0)
            nn.init.constant_(self.bnneck.bias, 0.0)
        self.classifier = nn.Linear(embedding_dim, num_classes, bias=False) if num_classes > 0 else None
        self.architecture = architecture
        self.neck = neck
        self.embedding_dim = embedding_dim
        if self.classifier is not None:
            nn.init.normal_(self.classifier.weight, std=0.001)
        self.pretrained_note = "random initialisation (--pretrained none)"
        # Set by load_start for a start whose BatchNorms were folded into its convolutions:
        # their statistics are gone, so the start's BatchNorms keep the running ones.
        self.frozen_norms = False
        # Set by load_start for a start that already embeds (a Re-ID model, not ImageNet's).
        self.embedding_start = False
        self.input_mean: tuple[float, float, float] = IMAGENET_MEAN
        self.input_std: tuple[float, float, float] = IMAGENET_STD

    def train(self, mode: bool = True) -> ReidNet:
        """As nn.Module's; with ``frozen_norms`` the BatchNorms of :meth:`start_layers` stay
        in eval mode (their running statistics normalise, and are not updated), so training
        sees the start's own forward."""
        super().train(mode)
        if mode and self.frozen_norms:
            for module in self.start_layers():
                for layer in module.modules():
                    if isinstance(layer, nn.modules.batchnorm._BatchNorm):
                        layer.eval()
        return self

    def start_layers(self) -> list[nn.Module]:
        """The layers a start's weights fill: the backbone, and ``fc`` under the ``fc`` neck
        (training builds that neck only to keep a start's own ``fc``). The rest (a BNNeck, a
        reduction, the classifier) is the head, which starts fresh."""
        return [self.backbone, self.reduction] if self.neck == "fc" else [self.backbone]

    def forward(self, images: torch.Tensor) -> NetOutput:
        feature = self.reduction(self.pool(self.backbone(images)))
        embedding = self.bnneck(feature)
        logits = self.classifier(embedding) if self.training and self.classifier is not None else None
        return NetOutput(feature, embedding, logits)


def build_network(card: ModelCard) -> ReidNet:
    """The network a card describes, with random weights (no file or network access);
    its weights are loaded separately. Raises ConfigError as :class:`ReidNet` does."""
    return ReidNet(
        card.architecture,
        num_classes=card.num_classes,
        embedding_dim=card.embedding_dim,
        pooling=card.pooling,
        last_stride=card.last_stride,
        neck=card.neck,
        stem_pool=card.stem_pool,
    )
