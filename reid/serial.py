"""Dataclasses as plain JSON/YAML values, by one rule; the bounds a YAML settings file is read within.

:func:`as_dict` gives a dataclass's fields, in declaration order, as values ``json.dumps``
and ``yaml.safe_dump`` take: paths as strings, tuples and sets as lists, enums as their
values, nested dataclasses as dicts, numpy scalars as Python numbers and numpy arrays as
lists.  A ``to_dict`` that only lists fields is ``as_dict(self)``; one that renames,
rounds or adds derived values builds on it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import yaml

from reid.errors import ConfigError
from reid.text import MAX_NUMBER_TEXT


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


# Bounds of a recipe file, checked before its values are built: a recipe is a few dozen
# keys; aliases are refused outright (nothing needs them, and a few of them nested expand
# a kilobyte into gigabytes).
MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_NESTING = 8
MAX_CONFIG_NODES = 10_000


# A plain YAML scalar that YAML 1.1 resolves as a number: signs, digits, '_', ':', '.',
# exponents, hexadecimal and binary forms.
LONG_NUMBER = re.compile(r"[-+]?(0x[0-9a-fA-F_]+|0b[01_]+|[0-9_.:]+([eE][-+]?[0-9_]+)?)")


def check_yaml_shape(text: str, path: Path | str, what: str = "recipe") -> None:
    """Refuse, from YAML's event stream (nothing built yet), an alias, nesting deeper than
    :data:`MAX_CONFIG_NESTING` and more than :data:`MAX_CONFIG_NODES` values, with a
    ConfigError naming ``path`` and saying what a ``what`` (a recipe, serve settings) may have."""
    depth = nodes = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, yaml.AliasEvent):
            raise ConfigError(f"{path}: line {line}: YAML aliases (*{event.anchor}) are not taken in a {what}; write the value out")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_CONFIG_NESTING:
                raise ConfigError(f"{path}: line {line}: nested deeper than the {MAX_CONFIG_NESTING} levels a {what} may have")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > MAX_CONFIG_NODES:
                raise ConfigError(f"{path}: more than the {MAX_CONFIG_NODES:,} values a {what} may have")
        # YAML builds a plain scalar of digits as an int: thousands of them are a
        # ValueError (Python's limit on converting digits), not a value a setting takes.
        if (
            isinstance(event, yaml.ScalarEvent) and event.style is None and len(event.value) > MAX_NUMBER_TEXT
            and LONG_NUMBER.fullmatch(event.value)
        ):  # fmt: skip
            raise ConfigError(f"{path}: line {line}: a number longer than {MAX_NUMBER_TEXT} characters")
