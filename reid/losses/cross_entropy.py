"""Identity cross-entropy with label smoothing (Szegedy et al. 2016, Sec. 7), the
classification loss that Re-ID trains alongside a metric loss.

    L = (1/N) Σ_i Σ_c -q_{i,c} log softmax(W x_i)_c,   q_{i,c} = (1 - ε) [c = y_i] + ε / C

The classifier W (C x D, no bias) is the loss's own parameter, so that selecting this loss
by name brings the head it needs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from reid.errors import ConfigError
from reid.losses.base import MetricLoss, check_labels_in_range


class CrossEntropyLoss(MetricLoss):
    """Softmax cross-entropy over ``num_classes`` identities with its own linear
    classifier (``classifier.weight``: float32 (C, D), no bias) and label smoothing ε
    (Szegedy et al. 2016, "Rethinking the Inception Architecture", Sec. 7).

    Called as ``loss(embeddings, labels)`` with float (N, D) embeddings (float16/bfloat16
    are computed in float32) and integer (N,) identity labels; returns a float32 scalar >= 0.

    Raises:
        ConfigError: when built with a non-positive class count or dimension, or ε
            outside [0, 1).
        BatchError: when called with a wrong shape or dtype, labels outside [0, C), or
            NaN/infinite embeddings.
    """

    needs_positives = False  # its classifier rows are what an image is pulled to

    def __init__(self, num_classes: int, embedding_dim: int, label_smoothing: float = 0.1) -> None:
        super().__init__()
        if int(num_classes) != num_classes or num_classes < 1:
            raise ConfigError(f"cross_entropy: num_classes must be a positive integer, got {num_classes}")
        if int(embedding_dim) != embedding_dim or embedding_dim < 1:
            raise ConfigError(
                f"cross_entropy: embedding_dim must be a positive integer, got {embedding_dim}"
            )
        if not 0.0 <= label_smoothing < 1.0:
            raise ConfigError(f"cross_entropy: label_smoothing must lie in [0, 1), got {label_smoothing}")
        self.num_classes = int(num_classes)
        self.label_smoothing = float(label_smoothing)
        self.classifier = nn.Linear(int(embedding_dim), self.num_classes, bias=False)

    def extra_repr(self) -> str:
        return f"label_smoothing={self.label_smoothing}"

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        check_labels_in_range("cross_entropy", labels, self.num_classes)
        logits = F.linear(embeddings, self.classifier.weight.to(embeddings.dtype))
        return F.cross_entropy(logits, labels.long(), label_smoothing=self.label_smoothing)
