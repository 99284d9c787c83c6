"""Dataclasses as plain JSON/YAML values, by one rule.

:func:`as_dict` gives a dataclass's fields, in declaration order, as values ``json.dumps``
and ``yaml.safe_dump`` take: paths as strings, tuples and sets as lists, enums as their
values, nested dataclasses as dicts, numpy scalars as Python numbers and numpy arrays as
lists.  A ``to_dict`` that only lists fields is ``as_dict(self)``; one that renames,
rounds or adds derived values builds on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from enum import Enum
from pathlib import PurePath
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """``value`` as plain JSON-ready data (see the module docstring); other values unchanged."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return as_dict(value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [plain(item) for item in items]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def as_dict(obj: Any, *, exclude: Collection[str] = ()) -> dict[str, Any]:
    """The fields of the dataclass instance ``obj`` (but ``exclude``), in declaration order,
    each made :func:`plain`.  Raises TypeError for anything that is not a dataclass instance."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"as_dict needs a dataclass instance, got {type(obj).__name__}")
    return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name not in exclude}
