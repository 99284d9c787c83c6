"""SoftTriple loss (Qian, Shang, Sun, Hu, Li and Jin 2019), as in its seed document.

Each of C classes owns K learnable unit-norm centers w_c^k.  With x_i on the unit sphere:

    relaxed similarity:  S'_{i,c} = Σ_k softmax_k(x_i·w_c^k / γ) x_i·w_c^k
    eq. 8:  ℓ(x_i) = -log  exp(λ(S'_{i,y_i} - δ)) / ( exp(λ(S'_{i,y_i} - δ)) + Σ_{j≠y_i} exp(λ S'_{i,j}) )
    eq. 9:  R(w_j^1..w_j^K) = Σ_{t=1}^{K} Σ_{s=t+1}^{K} sqrt(2 - 2 w_j^s·w_j^t)
    eq. 10: L = (1/N) Σ_i ℓ(x_i) + τ Σ_j R_j / (C K (K - 1))

Defaults are the paper's: λ = 20, γ = 0.1, δ = 0.01, τ = 0.2, K = 10, and 0.01 as the
centers' learning rate (the paper raised it to 0.1, and dropped the regularizer, only for
Stanford Online Products with K = 2).  The trainer reads ``center_lr`` to give the centers
their own optimizer group.  The paper takes the embeddings on the unit sphere (its
similarities are inner products of unit vectors), hence ``normalize=True`` by default.

sqrt(2 - 2 w^s·w^t) is ||w^s - w^t|| for unit centers; it is taken with the distance
helper's safe root, so when two centers merge — which is what the regularizer drives them
to — the gradient is zero, not infinite.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from reid.errors import BatchError, ConfigError
from reid.losses.base import MetricLoss, check_labels_in_range
from reid.losses.distances import safe_sqrt

# Guards the division by a center's norm; a center is never this short in practice.
_TINY = 1e-12


class SoftTripleLoss(MetricLoss):
    """SoftTriple loss (Qian et al. 2019, "SoftTriple Loss: Deep Metric Learning Without
    Triplet Sampling", eqs. 8-10) with its learnable parameter ``centers``, float32 of
    shape (``num_classes``, ``centers_per_class``, ``embedding_dim``), unit rows.

    Args:
        num_classes, embedding_dim: C and D; labels must lie in [0, C).
        centers_per_class: K centers per class.
        la, gamma, margin, tau: λ (scale), γ (softmax temperature over a class's centers),
            δ (margin, in cosine similarity) and τ (weight of the centers' regularizer).
        center_lr: the learning rate the trainer gives the centers.
        normalize: put the embeddings on the unit sphere first (the paper's setting).

    Called as ``loss(embeddings, labels)`` with float (N, D) embeddings (float16/bfloat16
    are computed in float32) and integer (N,) identity labels; returns a float32 scalar >= 0.

    Raises:
        ConfigError: when built with a non-positive count, scale, temperature or center
            learning rate, or a negative τ.
        BatchError: when called with a wrong shape or dtype, a dimension other than D,
            labels outside [0, C), or NaN/infinite embeddings.
    """

    needs_positives = False  # its proxies, the class centres, are what an image is pulled to

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        centers_per_class: int = 10,
        la: float = 20.0,
        gamma: float = 0.1,
        margin: float = 0.01,
        tau: float = 0.2,
        center_lr: float = 0.01,
        normalize: bool = True,
    ) -> None:
        super().__init__()
        for key, value in (
            ("num_classes", num_classes),
            ("embedding_dim", embedding_dim),
            ("centers_per_class", centers_per_class),
        ):
            if int(value) != value or value < 1:
                raise ConfigError(f"softtriple: {key} must be a positive integer, got {value}")
        for key, value in (("la", la), ("gamma", gamma), ("center_lr", center_lr)):
            if value <= 0:
                raise ConfigError(f"softtriple: {key} must be > 0, got {value}")
        if tau < 0:
            raise ConfigError(f"softtriple: tau must be >= 0, got {tau}")
        self.num_classes = int(num_classes)
        self.centers_per_class = int(centers_per_class)
        self.la = float(la)
        self.gamma = float(gamma)
        self.margin = float(margin)
        self.tau = float(tau)
        self.center_lr = float(center_lr)
        self.normalize = normalize
        initial = torch.randn(self.num_classes, self.centers_per_class, int(embedding_dim))
        self.centers = nn.Parameter(F.normalize(initial, dim=-1))

    def extra_repr(self) -> str:
        classes, k, dim = self.centers.shape
        return (
            f"num_classes={classes}, embedding_dim={dim}, centers_per_class={k}, la={self.la}, "
            f"gamma={self.gamma}, margin={self.margin}, tau={self.tau}, "
            f"center_lr={self.center_lr}, normalize={self.normalize}"
        )

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if embeddings.shape[1] != self.centers.shape[2]:
            raise BatchError(
                f"softtriple: embeddings have dimension {embeddings.shape[1]}, "
                f"the centers {self.centers.shape[2]}"
            )
        check_labels_in_range("softtriple", labels, self.num_classes)
        x = F.normalize(embeddings, dim=1) if self.normalize else embeddings
        centers = self.centers.to(x.dtype)
        classes, k, dim = centers.shape
        # The centers are used on the unit sphere whatever an optimizer step did to them.
        # Dividing the (N, C K) similarities by the norms is cheaper than normalizing the
        # (C K, D) centers and gives the same x·w/||w||.
        norms = torch.linalg.vector_norm(centers, dim=-1).clamp_min(_TINY)
        similarity = (x @ centers.reshape(classes * k, dim).t()).reshape(-1, classes, k) / norms
        weights = torch.softmax(similarity / self.gamma, dim=2)
        relaxed = (weights * similarity).sum(2)
        shift = F.one_hot(labels.long(), classes).to(x.dtype) * self.margin
        loss = F.cross_entropy(self.la * (relaxed - shift), labels.long())
        if k > 1 and self.tau > 0:
            loss = loss + self.tau * self._spread(centers, norms) / (classes * k * (k - 1))
        return loss

    @staticmethod
    def _spread(centers: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
        """Σ_j R_j of eq. 9: Σ over the pairs t < s of a class of sqrt(2 - 2 w^s·w^t)."""
        k = centers.shape[1]
        cosine = (centers @ centers.transpose(1, 2)) / (norms[:, :, None] * norms[:, None, :])
        first, second = torch.triu_indices(k, k, offset=1, device=centers.device)
        chord = (2.0 - 2.0 * cosine[:, first, second]).clamp_min(0.0)
        return safe_sqrt(chord).sum()
