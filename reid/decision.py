"""Decisions on distances: what a valid distance threshold is.

Distances in reid are Euclidean between L2-normalized embeddings, so they lie in 0..2; a
threshold outside (0, 2] would accept nothing or everything, and is a mistake (a cosine
similarity, a percentage) rather than a choice.
"""

from __future__ import annotations

import math

from reid.errors import ConfigError


def check_distance_threshold(value: float | None, option: str = "--threshold") -> float | None:
    """Return ``value`` (None stays None) when it is a distance threshold in (0, 2].

    Raises ConfigError naming ``option`` for anything else (NaN, negative, 0, above 2).
    """
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or not 0 < value <= 2:
        raise ConfigError(f"{option} is a distance between unit embeddings, in (0, 2]; got {value}")
    return float(value)
