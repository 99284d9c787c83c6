"""Re-ID image transforms, applied to whole uint8 batches at once.

Images are decoded and resized once (uint8, C x H x W); the random part of the pipeline
(horizontal flip, pad + random crop, normalization, random erasing of Zhong et al. 2020)
runs on the batch tensor, so it costs little next to the network and runs on the GPU
when the model does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
import torch
import torch.nn.functional as F


def resize_chw(image: np.ndarray, size: tuple[int, int]) -> torch.Tensor:
    """RGB HxWx3 uint8 -> 3 x H x W uint8 tensor at ``size = (H, W)``."""
    height, width = size
    if image.shape[:2] != (height, width):
        image = cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))


@dataclass(frozen=True)
class AugmentConfig:
    flip: float = 0.5
    pad: int = 10
    erase: float = 0.5
    erase_area: tuple[float, float] = (0.02, 0.4)
    erase_ratio: float = 0.3


def normalize(batch: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """uint8 (or float 0..255) N x 3 x H x W -> normalized float32."""
    mean_t = torch.tensor(mean, device=batch.device).view(1, 3, 1, 1) * 255.0
    std_t = torch.tensor(std, device=batch.device).view(1, 3, 1, 1) * 255.0
    return (batch.float() - mean_t) / std_t


@dataclass
class AugmentPlan:
    """The random choices of one augmented batch, drawn apart from the pixels so that a
    process can draw the plan of a whole global batch and apply only its own rows."""

    flip: torch.Tensor
    offsets: list[tuple[int, int]] | None
    erasures: list[tuple[int, int, int, torch.Tensor]]

    def rows(self, start: int, stop: int) -> AugmentPlan:
        """The plan of rows ``start:stop``, renumbered from 0."""
        return AugmentPlan(
            flip=self.flip[start:stop],
            offsets=None if self.offsets is None else self.offsets[start:stop],
            erasures=[(i - start, y, x, noise) for i, y, x, noise in self.erasures if start <= i < stop],
        )


def draw_augmentation(n: int, height: int, width: int, config: AugmentConfig, generator: torch.Generator) -> AugmentPlan:
    """Draw flips, crop offsets and erased boxes for ``n`` images of ``height`` x ``width``."""
    flip = torch.rand(n, generator=generator) < config.flip
    offsets = None
    if config.pad > 0:
        offsets = [(dy, dx) for dy, dx in torch.randint(0, 2 * config.pad + 1, (n, 2), generator=generator).tolist()]
    erasures = []
    if config.erase > 0:
        erase = (torch.rand(n, generator=generator) < config.erase).tolist()
        for i in (i for i, e in enumerate(erase) if e):
            for _ in range(10):
                area = height * width * float(torch.empty(1).uniform_(*config.erase_area, generator=generator))
                log_ratio = torch.empty(1).uniform_(math.log(config.erase_ratio), -math.log(config.erase_ratio), generator=generator)
                aspect = math.exp(float(log_ratio))
                h = int(round(math.sqrt(area * aspect)))
                w = int(round(math.sqrt(area / aspect)))
                if 0 < h < height and 0 < w < width:
                    y = int(torch.randint(0, height - h + 1, (1,), generator=generator))
                    x0 = int(torch.randint(0, width - w + 1, (1,), generator=generator))
                    erasures.append((i, y, x0, torch.randn(3, h, w, generator=generator)))
                    break
    return AugmentPlan(flip, offsets, erasures)


def apply_augmentation(x: torch.Tensor, plan: AugmentPlan, pad: int) -> torch.Tensor:
    """Apply ``plan`` to a normalized float N x 3 x H x W batch (in place where it can)."""
    _, _, height, width = x.shape
    if plan.flip.any():
        x[plan.flip] = x[plan.flip].flip(-1)
    if plan.offsets is not None:
        # Zero after normalization is the mean colour, which is what padding should add.
        padded = F.pad(x, (pad,) * 4)
        x = torch.stack([padded[i, :, dy : dy + height, dx : dx + width] for i, (dy, dx) in enumerate(plan.offsets)])
    for i, y, x0, noise in plan.erasures:
        x[i, :, y : y + noise.shape[1], x0 : x0 + noise.shape[2]] = noise
    return x


def augment(
    batch: torch.Tensor,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    config: AugmentConfig,
    generator: torch.Generator,
    rows: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Training augmentation of a uint8 N x 3 x H x W batch; returns normalized float32.

    With ``rows = (start, total)`` the batch is rows ``start:start + N`` of a batch of
    ``total`` images: the random choices of all ``total`` are drawn (so ``generator``
    advances alike in every process) and this batch gets its own rows of them.
    """
    n, _, height, width = batch.shape
    start, total = rows or (0, n)
    plan = draw_augmentation(total, height, width, config, generator)
    if total != n:
        plan = plan.rows(start, start + n)
    return apply_augmentation(normalize(batch, mean, std), plan, config.pad)
