"""The Encoder contract: images in, float32 L2-normalized embeddings out, plus a card.

Everything downstream (evaluation, galleries, query, verification, apps) depends on this
interface only.  Images are RGB uint8 arrays of shape (H, W, 3) of any size; the encoder
resizes and normalizes them as its card says.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import cv2
import numpy as np
import torch

from reid.models.card import ModelCard


class Encoder(ABC):
    """Turns a batch of images into L2-normalized float32 embeddings."""

    card: ModelCard

    @property
    def dim(self) -> int:
        return self.card.embedding_dim

    @property
    def fingerprint(self) -> str:
        return self.card.fingerprint

    @property
    def threshold(self) -> float | None:
        return self.card.threshold

    @abstractmethod
    def embed(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Return an (N, dim) float32 array of unit-norm rows, one per image."""


def preprocess(images: Sequence[np.ndarray], card: ModelCard) -> np.ndarray:
    """Resize to the card's input size and normalize: (N, 3, H, W) float32, RGB or BGR."""
    height, width = card.input_size
    batch = np.empty((len(images), height, width, 3), dtype=np.float32)
    for i, image in enumerate(images):
        if image.ndim == 2:
            image = np.repeat(image[:, :, None], 3, axis=2)
        batch[i] = cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
    if card.channel_order == "bgr":
        batch = batch[..., ::-1]
    batch = (batch / 255.0 - np.asarray(card.mean, np.float32)) / np.asarray(card.std, np.float32)
    return np.ascontiguousarray(batch.transpose(0, 3, 1, 2), dtype=np.float32)


def l2_normalize(features: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return (features / np.maximum(norms, 1e-12)).astype(np.float32)


class TorchEncoder(Encoder):
    """An encoder backed by a PyTorch module whose eval-mode output has an ``embedding``."""

    def __init__(self, network: torch.nn.Module, card: ModelCard, device: str | torch.device = "cpu") -> None:
        self.card = card
        self.device = torch.device(device)
        self.network = network.to(self.device).eval()

    @torch.inference_mode()
    def embed_tensor(self, batch: torch.Tensor) -> torch.Tensor:
        """Embed an already preprocessed (N, 3, H, W) batch; returns unit-norm rows."""
        embedding = self.network(batch.to(self.device)).embedding
        return torch.nn.functional.normalize(embedding.float(), dim=1)

    def embed(self, images: Sequence[np.ndarray]) -> np.ndarray:
        if len(images) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = torch.from_numpy(preprocess(images, self.card))
        return self.embed_tensor(batch).cpu().numpy()
