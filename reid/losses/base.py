"""What every loss shares: input checks, float32 computation, and the masked reductions.

Bad input raises :class:`reid.errors.BatchError` (a ``ValueError`` too) naming the problem.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod

import torch
from torch import nn

from reid.errors import BatchError
from reid.losses.distances import compute_dtype


def check_batch(embeddings: torch.Tensor, labels: torch.Tensor) -> None:
    """Check that ``embeddings`` is a float (N, D) tensor and ``labels`` an integer (N,) one.

    Raises:
        BatchError: either is not a tensor, or a shape or dtype is wrong.
    """
    if not isinstance(embeddings, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise BatchError("a loss takes (embeddings, labels) as two tensors")
    if embeddings.dim() != 2 or not embeddings.is_floating_point():
        raise BatchError(
            f"embeddings must be a float (N, D) tensor, got {embeddings.dtype} "
            f"of shape {tuple(embeddings.shape)}"
        )
    if labels.dim() != 1 or labels.shape[0] != embeddings.shape[0]:
        raise BatchError(
            f"labels must be a (N,) tensor with N = {embeddings.shape[0]}, "
            f"got shape {tuple(labels.shape)}"
        )
    if labels.is_floating_point() or labels.is_complex():
        raise BatchError(f"labels must be integers, got {labels.dtype}")


def check_finite(embeddings: torch.Tensor) -> None:
    """Raise :class:`BatchError` if an embedding holds NaN or an infinity."""
    bad = ~torch.isfinite(embeddings).all(dim=1)
    if bad.any():
        rows = bad.nonzero().flatten().tolist()
        raise BatchError(f"embeddings must be finite; {len(rows)} of {embeddings.shape[0]} rows hold NaN or inf (first row {rows[0]})")


def check_labels_in_range(name: str, labels: torch.Tensor, num_classes: int) -> None:
    """Raise :class:`BatchError` unless every label is a class index in [0, ``num_classes``)."""
    if labels.numel() and (labels.min() < 0 or labels.max() >= num_classes):
        raise BatchError(
            f"{name}: labels must lie in [0, {num_classes}), got {int(labels.min())}..{int(labels.max())}"
        )


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

    ``embeddings``: float (N, D), any float dtype (float16/bfloat16 are computed in
    float32); ``labels``: integer (N,) identity labels. A batch with nothing to learn (one
    embedding, none, or for losses that need pairs a single identity) gives a
    differentiable zero.

    Raises :class:`reid.errors.BatchError` for a wrong shape or dtype and, while
    ``check_finite`` holds, for NaN or infinite embeddings. The trainer turns that check
    off: it checks the loss itself, averaged over its processes, so that every process
    stops at the same step.

    Subclasses implement :meth:`compute`, which receives the embeddings already promoted to
    float32 (float16/bfloat16) and runs with autocast disabled, so that mixed-precision
    training cannot push the distances back into half precision.
    """

    check_finite: bool = True
    # Whether the loss learns only from two images of one identity in a batch (pair and
    # triplet losses); a loss over learnt class proxies learns from one image alone.
    needs_positives: bool = True

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        check_batch(embeddings, labels)
        if self.check_finite:
            check_finite(embeddings)
        embeddings = embeddings.to(compute_dtype(embeddings.dtype))
        if embeddings.shape[0] == 0:
            return embeddings.sum()  # an empty batch: a differentiable zero
        with _autocast_disabled(embeddings.device.type):
            return self.compute(embeddings, labels)

    @abstractmethod
    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of a float32 batch."""
