"""Helpers shared by the gallery tests (and their worker processes): cards and clustered embeddings."""

from __future__ import annotations

import numpy as np

from reid.gallery import EmbeddingModel, ItemMeta

DIM = 32


def make_card(name: str = "alpha", fingerprint: str = "f00d0000cafe0001", dim: int = DIM) -> EmbeddingModel:
    # The gallery reads only these facts of a model card; this keeps the worker processes
    # free of PyTorch, whose import would dominate their run time.  The pipeline and CLI
    # tests use real ModelCards of real networks.
    return EmbeddingModel(name=name, fingerprint=fingerprint, embedding_dim=dim, threshold=0.8)


def clustered(
    identities: int, per_identity: int, dim: int = DIM, spread: float = 0.25, seed: int = 0
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Unit embeddings: ``per_identity`` noisy samples around each identity's centre.

    Returns (embeddings, labels, centres); ``spread`` is the noise norm relative to the centre.
    """
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(identities, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.normal(size=(identities * per_identity, dim)) * spread / np.sqrt(dim)
    vectors = np.repeat(centres, per_identity, axis=0) + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    labels = [f"id{i:04d}" for i in range(identities) for _ in range(per_identity)]
    return vectors.astype(np.float32), labels, centres.astype(np.float32)


def metas(labels: list[str], prefix: str = "img") -> list[ItemMeta]:
    return [
        ItemMeta(
            label, source=f"{prefix}/{n}.jpg", camera="c1", frame=n, box=(0, 0, 64, 128), image_hash=f"{prefix}-{n}"
        )
        for n, label in enumerate(labels)
    ]
