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


def augment(
    batch: torch.Tensor,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    config: AugmentConfig,
    generator: torch.Generator,
) -> torch.Tensor:
    """Training augmentation of a uint8 N x 3 x H x W batch; returns normalized float32."""
    n, _, height, width = batch.shape
    x = normalize(batch, mean, std)
    flip = torch.rand(n, generator=generator) < config.flip
    if flip.any():
        x[flip] = x[flip].flip(-1)
    if config.pad > 0:
        # Zero after normalization is the mean colour, which is what padding should add.
        padded = F.pad(x, (config.pad,) * 4)
        offsets = torch.randint(0, 2 * config.pad + 1, (n, 2), generator=generator).tolist()
        x = torch.stack([padded[i, :, dy : dy + height, dx : dx + width] for i, (dy, dx) in enumerate(offsets)])
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
                    x[i, :, y : y + h, x0 : x0 + w] = torch.randn(3, h, w, generator=generator)
                    break
    return x
