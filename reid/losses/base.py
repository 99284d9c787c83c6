"""What every loss shares: input checks, float32 computation, and the masked reductions."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod

import torch
from torch import nn

from reid.losses.distances import compute_dtype


def check_batch(embeddings: torch.Tensor, labels: torch.Tensor) -> None:
    """Raise ValueError unless ``embeddings`` is a float (N, D) and ``labels`` an int (N,)."""
    if not isinstance(embeddings, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise ValueError("a loss takes (embeddings, labels) as two tensors")
    if embeddings.dim() != 2 or not embeddings.is_floating_point():
        raise ValueError(
            f"embeddings must be a float (N, D) tensor, got {embeddings.dtype} "
            f"of shape {tuple(embeddings.shape)}"
        )
    if labels.dim() != 1 or labels.shape[0] != embeddings.shape[0]:
        raise ValueError(
            f"labels must be a (N,) tensor with N = {embeddings.shape[0]}, "
            f"got shape {tuple(labels.shape)}"
        )
    if labels.is_floating_point() or labels.is_complex():
        raise ValueError(f"labels must be integers, got {labels.dtype}")


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` holds; a differentiable 0 when it holds nowhere.

    ``torch.where`` rather than a product keeps an inf or NaN in a masked-out entry (the
    distance to a missing negative is inf) out of the value and out of the gradient.
    """
    kept = torch.where(mask, values, torch.zeros_like(values))
    return kept.sum() / mask.sum().clamp_min(1)


def nonzero_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the entries of ``mask`` whose value is not zero (Hermans et al.'s BA≠0)."""
    return masked_mean(values, mask & (values != 0))


def _autocast_disabled(device_type: str) -> contextlib.AbstractContextManager:
    """A context that turns autocast off on ``device_type`` where autocast exists at all."""
    available = getattr(torch.amp, "is_autocast_available", None)
    if available is not None and not available(device_type):
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, enabled=False)


class MetricLoss(nn.Module, ABC):
    """A loss called as ``loss(embeddings, labels)`` that returns a scalar tensor.

    Subclasses implement :meth:`compute`, which receives the embeddings already promoted to
    float32 (float16/bfloat16) and runs with autocast disabled, so that mixed-precision
    training cannot push the distances back into half precision.
    """

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        check_batch(embeddings, labels)
        embeddings = embeddings.to(compute_dtype(embeddings.dtype))
        if embeddings.shape[0] == 0:
            return embeddings.sum()  # an empty batch: a differentiable zero
        with _autocast_disabled(embeddings.device.type):
            return self.compute(embeddings, labels)

    @abstractmethod
    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of a float32 batch."""
