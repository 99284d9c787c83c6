"""The Encoder contract: images in, float32 L2-normalized embeddings out, plus a card.

Everything downstream (evaluation, galleries, query, verification, apps) depends on this
interface only.  Images are RGB uint8 arrays of shape (H, W, 3) of any size; the encoder
resizes and normalizes them as its card says.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np
import torch

from reid.errors import ConfigValueError, DataError, ModelError
from reid.models.card import ModelCard
# What to do with a photo in which a face model finds no face: embed the whole image,
# skip it (counted and named), or stop with an error naming it.
from reid.photos import NO_FACE_CHOICES


@dataclass
class EmbedResult:
    """Embeddings of the images that could be embedded.

    ``features`` is (len(kept), dim) float32 with unit rows; ``kept`` holds the input
    positions they belong to; ``failures`` holds (position, reason) for the others.
    """

    features: np.ndarray
    kept: list[int]
    failures: list[tuple[int, str]] = field(default_factory=list)


class Encoder(ABC):
    """Turns a batch of images into L2-normalized float32 embeddings.

    :meth:`embed` takes RGB uint8 (H, W, 3) arrays of any size and returns an (N, ``dim``)
    float32 array of unit rows; the distance between two embeddings is their Euclidean
    distance, 0..2 (``card.threshold`` is one). ``card`` says how the model was made;
    ``fingerprint`` identifies its weights (galleries refuse embeddings of another).
    Call it through :func:`embed_images`, which checks what comes back.
    """

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

    @property
    def aligned_face_size(self) -> tuple[int, int] | None:
        """(height, width) of the aligned face chips the encoder asks for, or None when it
        takes plain crops (its card's ``face_alignment``)."""
        return self.card.aligned_face_size

    @abstractmethod
    def embed(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Return an (N, dim) float32 array of unit-norm rows, one per image."""

    def embed_each(self, images: Sequence[np.ndarray], whole_fallback: bool = False) -> EmbedResult:
        """Embed what can be embedded and say why the rest cannot.

        Encoders that can refuse one image (a face model on a photo without a face) override
        this; ``whole_fallback`` asks them to embed such an image whole instead.
        """
        return EmbedResult(self.embed(images), list(range(len(images))))


def embed_images(
    encoder: Encoder, images: Sequence[np.ndarray], sources: Sequence[str], no_face: str = "skip"
) -> EmbedResult:
    """Embed ``images`` (named ``sources`` in errors) and check what the encoder returned.

    ``no_face`` (one of NO_FACE_CHOICES) says what happens to an image the encoder refuses:
    "whole" embeds it whole, "skip" leaves it in ``failures``, "error" raises DataError
    naming it.  Raises ModelError when the encoder returns a wrong shape or a non-finite
    value, since every distance computed from it would be meaningless.
    """
    if no_face not in NO_FACE_CHOICES:
        raise ConfigValueError("no_face", f"{no_face!r}: choose one of {', '.join(NO_FACE_CHOICES)}", sep=" ")
    if len(images) != len(sources):
        raise ValueError(f"{len(images)} images for {len(sources)} source names")
    if not images:
        return EmbedResult(np.zeros((0, encoder.dim), np.float32), [])
    result = encoder.embed_each(images, whole_fallback=no_face == "whole")
    if no_face == "error" and result.failures:
        position, reason = result.failures[0]
        raise DataError(f"{sources[position]}: {reason}")
    check_embeddings(encoder, result.features, len(result.kept))
    return result


def check_embeddings(encoder: Encoder, features: np.ndarray, rows: int) -> None:
    """Check that ``features`` is (``rows``, ``encoder.dim``) with every value finite.

    Raises:
        ModelError: a wrong shape, or a NaN or infinity; one line naming the model.
    """
    name = encoder.card.name
    if features.ndim != 2 or features.shape != (rows, encoder.dim):
        raise ModelError(
            f"model {name!r} returned embeddings of shape {tuple(features.shape)}, expected ({rows}, {encoder.dim})"
        )
    if not np.isfinite(features).all():
        raise ModelError(f"model {name!r} returned non-finite embeddings (NaN or infinity); its weights are unusable")


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
    """(N, D) rows scaled to unit Euclidean norm, as float32; an all-zero row stays zero."""
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return (features / np.maximum(norms, 1e-12)).astype(np.float32)


def embed_with_runtime(
    encoder: Encoder, images: Sequence[np.ndarray], run: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """(N, D) float32 unit rows of ``images`` from a graph runtime's ``run`` over the
    card's preprocessed (N, 3, H, W) batch (ONNX, OpenVINO), checked by
    :func:`check_embeddings` before they are normalized; (0, D) for no images."""
    if len(images) == 0:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    features = run(preprocess(images, encoder.card))
    check_embeddings(encoder, features, len(images))
    return l2_normalize(features)


class TorchEncoder(Encoder):
    """An encoder backed by a PyTorch module whose eval-mode output has an ``embedding``
    (a :class:`ReidNet`); images are resized and normalized as ``card`` says
    (:func:`preprocess`) and embedded on ``device`` in one batch."""

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
