"""Option defaults read from the library, so that the command line states none of its own.

A command's options default to None and only the ones given reach the library
(:func:`given`); help texts show the library's default (:func:`with_default`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from reid.errors import ConfigError

# The one range of each count option, whichever command takes it: a value outside would
# allocate without bound (a top-k of 10**9, a batch of a million crops) or do nothing.
LIMITS: dict[str, tuple[int, int]] = {
    "batch_size": (1, 4096),
    "top_k": (1, 10_000),
    "threads": (1, 1024),
    "workers": (1, 256),
    "every": (1, 1_000_000),
    "max_frames": (1, 10**12),
    "queries": (1, 10_000_000),
}


def check_option(name: str, value: Any) -> None:
    """Raise ConfigError, in one line naming the option (``--batch-size`` for
    ``batch_size``), for a count outside :data:`LIMITS` or a number that is not finite."""
    flag = "--" + name.replace("_", "-")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{flag} {value}: must be a finite number")
    if name in LIMITS and isinstance(value, int) and not isinstance(value, bool):
        low, high = LIMITS[name]
        if not low <= value <= high:
            raise ConfigError(f"{flag} {value}: must be between {low:,} and {high:,}")


def given(**values: Any) -> dict[str, Any]:
    """The options the user gave, by parameter name, each checked (:func:`check_option`);
    the rest stays with the library's defaults.  Raises ConfigError for a value out of range."""
    for name, value in values.items():
        if value is not None:
            check_option(name, value)
    return {key: value for key, value in values.items() if value is not None}


def default_of(function: Callable[..., Any], name: str) -> Any:
    """The default of parameter ``name`` of ``function``."""
    return inspect.signature(function).parameters[name].default


def with_default(text: str, shown: str) -> str:
    """``text`` followed by the default as the option is typed."""
    return f"{text} (default: {shown})".lstrip()
