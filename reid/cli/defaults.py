"""Option defaults read from the library, so that the command line states none of its own.

A command's options default to None and only the ones given reach the library
(:func:`given`); help texts show the library's default (:func:`with_default`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def given(**values: Any) -> dict[str, Any]:
    """The options the user gave, by parameter name; the rest stays with the library's defaults."""
    return {key: value for key, value in values.items() if value is not None}


def default_of(function: Callable[..., Any], name: str) -> Any:
    """The default of parameter ``name`` of ``function``."""
    return inspect.signature(function).parameters[name].default


def with_default(text: str, shown: str) -> str:
    """``text`` followed by the default as the option is typed."""
    return f"{text} (default: {shown})".lstrip()
