"""The training objective: identity cross-entropy on the BNNeck logits plus a metric loss
on the pre-BN feature (Luo et al. 2019, "Bag of Tricks and A Strong Baseline for Deep
Person Re-identification"), weighted as ``ce_weight * CE + metric_weight * metric``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from reid.engine.config import EMBEDDING_START_NORMALIZE, TrainConfig
from reid.losses import build_loss
from reid.losses.base import MetricLoss
from reid.losses.registry import loss_options, typed_options
from reid.models.network import ReidNet


def metric_options(config: TrainConfig, num_classes: int, dim: int, embedding_start: bool = False) -> dict[str, Any] | None:
    """The metric loss's typed options, with the class count and dimension a loss with
    its own centers needs; None when no metric loss is used.  From a start that already
    embeds (``embedding_start``) a loss that can normalise takes its distances on the unit
    sphere unless the recipe says otherwise (:data:`reid.engine.config.EMBEDDING_START_NORMALIZE`).

    Raises:
        ConfigError: an option the loss does not have, or a value of the wrong type.
    """
    if not config.uses_metric_loss:
        return None
    options = dict(config.metric_options)
    accepted = loss_options(config.metric_loss)
    if "num_classes" in accepted:
        options.setdefault("num_classes", num_classes)
    if "embedding_dim" in accepted:
        options.setdefault("embedding_dim", dim)
    if embedding_start and "normalize" in accepted:
        options.setdefault("normalize", EMBEDDING_START_NORMALIZE)
    return typed_options(config.metric_loss, **options)


def build_metric(config: TrainConfig, num_classes: int, dim: int, embedding_start: bool = False) -> MetricLoss | None:
    """The metric loss ``config`` asks for (:func:`metric_options`), or None when it uses none."""
    options = metric_options(config, num_classes, dim, embedding_start)
    if options is None:
        return None
    metric = build_loss(config.metric_loss, **options)
    # A diverging run has NaN features; the trainer checks the loss averaged over its
    # processes instead, so that every process stops at the same step with one error.
    metric.check_finite = False
    return metric


class TrainingObjective(nn.Module):
    """The network and its losses as one module, so that DistributedDataParallel sees every
    parameter it must keep in step (a metric loss's own centers included) used in forward.

    Called with a float (B, 3, H, W) batch and its int64 (B,) identity labels, it returns
    three scalars: the weighted total, the identity cross-entropy of this process's batch
    and the metric loss, the latter over the global batch when ``gather`` collects the
    features of every process. A term that is not used is a zero; the metric term is NaN
    when a feature is not finite, so that the trainer's divergence check sees it.
    """

    def __init__(
        self,
        network: ReidNet,
        metric: nn.Module | None,
        config: TrainConfig,
        use_amp: bool,
        gather: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        self.network = network
        self.metric = metric
        self.ce_weight = config.ce_weight
        self.metric_weight = config.metric_weight
        self.label_smoothing = config.label_smoothing
        self.use_amp = use_amp
        self.gather = gather

    def forward(self, images: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ce, metric = self._terms(images, targets)
        return self.ce_weight * ce + self.metric_weight * metric, ce, metric

    def _terms(self, images: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(images.device.type, enabled=self.use_amp):
            output = self.network(images)
        zero = torch.zeros((), device=images.device)
        ce = F.cross_entropy(output.logits.float(), targets, label_smoothing=self.label_smoothing) if output.logits is not None else zero
        if self.metric is None:
            return ce, zero
        feature = output.feature.float()
        if self.gather is not None:
            feature, targets = self.gather(feature), self.gather(targets)
        metric = self.metric(feature, targets)
        # Mining compares distances and a NaN compares false, so a metric loss can stay
        # finite on NaN features; NaN here lets the trainer's check stop a diverged run.
        return ce, torch.where(torch.isfinite(feature).all(), metric, torch.full_like(metric, math.nan))
