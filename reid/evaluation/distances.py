"""Query-to-gallery distances, computed a block of query rows at a time."""

from __future__ import annotations

from typing import Any

import numpy as np

from reid.decision import squared_distances_from_gram
from reid.errors import ConfigError, DataError

METRICS = ("euclidean", "cosine")


def _as_features(name: str, features: Any) -> np.ndarray:
    array = np.asarray(features)
    if array.ndim != 2:
        raise DataError(f"{name} must be a 2-D (N, D) array, found shape {array.shape}")
    if not np.isfinite(array).all():
        raise DataError(f"{name} contains NaN or infinite values")
    return np.ascontiguousarray(array, dtype=np.float32)


def prepare_features(q_feats: Any, g_feats: Any, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate features; return (query, gallery, squared gallery norms) ready for distances."""
    if metric not in METRICS:
        raise ConfigError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    q = _as_features("query features", q_feats)
    g = _as_features("gallery features", g_feats)
    if q.shape[1] != g.shape[1]:
        raise DataError(f"query features have dimension {q.shape[1]}, gallery features {g.shape[1]}")
    if metric == "cosine":
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        g = g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-12)
    return q, g, np.einsum("ij,ij->i", g, g)


def distance_rows(q: np.ndarray, g: np.ndarray, g_sq: np.ndarray, metric: str) -> np.ndarray:
    """Distances of query rows to every gallery row, float32.

    ``euclidean`` gives the *squared* Euclidean distance
    (:func:`reid.decision.squared_distances_from_gram`): it orders exactly as the Euclidean
    distance and skips a square root per entry.  ``cosine`` gives 1 - cosine similarity.
    ``q`` and ``g`` come from :func:`prepare_features`.
    """
    dot = q @ g.T
    if metric == "cosine":
        np.subtract(1.0, dot, out=dot)
        return dot
    return squared_distances_from_gram(dot, np.einsum("ij,ij->i", q, q)[:, None], g_sq[None, :])
