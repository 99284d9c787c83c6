"""Decisions on distances: how a distance is computed, what a valid threshold is, and which
threshold a run answers at.

Distances in reid are Euclidean between L2-normalized embeddings, so they lie in 0..2
(0: the same direction, sqrt(2): orthogonal, 2: opposite).  For unit vectors
``||a - b||^2 = 2 - 2 a.b``, so the distance follows from the inner product (FAISS's
score, the cosine similarity) as ``sqrt(2 - 2 a.b)``.  Every place that reports or
compares a distance — gallery search, pair verification, threshold calibration, ranking,
and the losses — computes it through this module, so a number means the same everywhere.

A threshold outside (0, 2] would accept nothing or everything, and is a mistake (a cosine
similarity, a percentage) rather than a choice; :func:`check_distance_threshold` refuses
it.  :func:`resolve_threshold` picks the threshold a run answers at and says where it came
from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from reid.errors import ConfigError

GIVEN, MODEL_CARD, GALLERY, DEFAULT = "given", "model card", "gallery", "default"
THRESHOLD_SOURCES = (GIVEN, MODEL_CARD, GALLERY, DEFAULT)

Matrix = TypeVar("Matrix")


def check_distance_threshold(value: float | None, option: str = "--threshold") -> float | None:
    """Return ``value`` as a float (None stays None) when it is a distance threshold in (0, 2].

    Raises ConfigError naming ``option`` for anything else (NaN, infinite, negative, 0, above 2).
    """
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or not 0 < value <= 2:
        raise ConfigError(f"{option} is a distance between unit embeddings, in (0, 2]; got {value}")
    return float(value)


def similarity_to_distance(similarity: Any) -> np.ndarray:
    """Euclidean distance between unit embeddings from their inner product (cosine similarity).

    ``similarity``: an array of any shape, values in [-1, 1]; returns float64 of the same
    shape in 0..2, ``sqrt(2 - 2 * similarity)``.  Rounding can push ``2 - 2 s`` just below 0
    (or a non-unit vector past 4), so it is clipped to [0, 4] before the root.
    """
    return np.sqrt(np.clip(2.0 - 2.0 * np.asarray(similarity, dtype=np.float64), 0.0, 4.0))


def pair_distance(a: Any, b: Any) -> np.ndarray:
    """Euclidean distance between matching rows of two (N, D) arrays of unit embeddings.

    Returns float64 (N,) in 0..2.  Computed from the difference in float64, not from the
    inner product: for near-identical rows ``2 - 2 a.b`` cancels to a few ulps, while the
    difference keeps full precision, and pair verification cares about small distances.
    """
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return np.sqrt(np.einsum("ij,ij->i", diff, diff))


def squared_distances_from_gram(gram: Matrix, row_norms: Any, col_norms: Any) -> Matrix:
    """Turn a Gram matrix ``u_i . v_j`` into squared Euclidean distances, in place, and return it.

    ``gram`` (..., N, M) is a float numpy array or torch tensor; ``row_norms`` (..., N, 1) and
    ``col_norms`` (..., 1, M) hold ``||u_i||^2`` and ``||v_j||^2``.  The result is
    ``||u||^2 - 2 u.v + ||v||^2`` clamped at 0 (rounding can make it slightly negative),
    computed in that order so numpy (ranking) and torch (losses, with autograd written out
    in :mod:`reid.losses.distances`) give the same bits.  For unit rows both norms are 1 and
    this is ``2 - 2 u.v``, the square of :func:`similarity_to_distance`.
    """
    gram *= -2.0
    gram += row_norms
    gram += col_norms
    if isinstance(gram, np.ndarray):
        np.maximum(gram, 0.0, out=gram)
    else:
        gram.clamp_(min=0.0)  # type: ignore[attr-defined]
    return gram


class ThresholdCard(Protocol):
    """What :func:`resolve_threshold` reads from a model card."""

    name: str
    threshold: float | None
    threshold_source: str


class ThresholdGallery(Protocol):
    """What :func:`resolve_threshold` reads from a gallery."""

    @property
    def threshold(self) -> float | None: ...

    @property
    def folder(self) -> Any: ...


@dataclass(frozen=True)
class Threshold:
    """A decision threshold (Euclidean distance between unit embeddings, in (0, 2]) and its origin.

    ``source`` is one of :data:`THRESHOLD_SOURCES`: "given" (an option or the caller),
    "model card" (its calibrated threshold), "gallery" (the one recorded at its creation)
    or "default"; ``detail`` says more where known (the card's ``threshold_source``, the
    gallery folder, how a given value was chosen).
    """

    value: float
    source: str
    detail: str = ""

    def describe(self) -> str:
        """One line for summaries and JSON: ``source`` and, when known, ``(detail)``."""
        return f"{self.source} ({self.detail})" if self.detail else self.source


def resolve_threshold(
    given: float | None,
    card: ThresholdCard,
    gallery: ThresholdGallery | None = None,
    *,
    given_detail: str = "",
    default: float | None = None,
    model_name: str | None = None,
) -> Threshold:
    """The threshold to decide at: ``given``, else the card's, else the gallery's, else ``default``.

    The card wins over the gallery: recalibrating a model keeps its weights and so its
    fingerprint, and a gallery enrolled before must then answer at the new threshold.
    ``given_detail`` describes a given value (e.g. "--threshold"); ``model_name`` names the
    model in the error (default: the card's name).

    Raises ConfigError when ``given`` or ``default`` is outside (0, 2], and when no source
    has a threshold (naming the model, and the gallery when one was consulted).
    """
    if check_distance_threshold(given) is not None:
        return Threshold(float(given), GIVEN, given_detail)  # type: ignore[arg-type]
    if card.threshold is not None:
        return Threshold(float(card.threshold), MODEL_CARD, card.threshold_source)
    if gallery is not None and gallery.threshold is not None:
        return Threshold(float(gallery.threshold), GALLERY, str(gallery.folder))
    if check_distance_threshold(default, "default threshold") is not None:
        return Threshold(float(default), DEFAULT)  # type: ignore[arg-type]
    name = model_name or card.name
    where = f" and gallery {gallery.folder} records none" if gallery is not None else ""
    raise ConfigError(
        f"{name}: the model card has no calibrated threshold{where}; run 'reid calibrate' or pass "
        "--threshold (a distance between unit embeddings, in (0, 2])"
    )


class Match(Protocol):
    """What :func:`nearest_identity` reads from a search answer (a gallery's ``IdentityMatch``)."""

    @property
    def identity(self) -> str: ...

    @property
    def distance(self) -> float: ...


def nearest_identity(matches: list[Any], threshold: Threshold) -> str | None:
    """The identity of the nearest of ``matches`` (nearest first, as a gallery search
    returns them) when its distance (Euclidean between unit embeddings, 0..2) is at most
    ``threshold.value``; None (unknown) when it is farther or there is none.  The one rule
    by which query, camera search and face check-in name a person."""
    nearest: Match | None = matches[0] if matches else None
    if nearest is None or not nearest.distance <= threshold.value:
        return None
    return nearest.identity
