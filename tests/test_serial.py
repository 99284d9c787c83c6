"""Dataclasses as plain JSON values through one helper."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np
import pytest

from reid.serial import as_dict, plain


class Colour(Enum):
    RED = "red"


@dataclass
class Inner:
    where: Path
    size: tuple[int, int]


@dataclass
class Outer:
    name: str
    inner: Inner
    colour: Colour
    tags: set[str] = field(default_factory=set)
    scores: dict[str, np.float32] = field(default_factory=dict)
    hidden: int = 0


def test_fields_become_plain_values_in_declaration_order() -> None:
    outer = Outer("a", Inner(Path("x/y.jpg"), (64, 32)), Colour.RED, {"b", "a"}, {"s": np.float32(0.5)}, 3)
    data = as_dict(outer, exclude=("hidden",))
    assert list(data) == ["name", "inner", "colour", "tags", "scores"]
    assert data == {
        "name": "a",
        "inner": {"where": "x/y.jpg", "size": [64, 32]},
        "colour": "red",
        "tags": ["a", "b"],
        "scores": {"s": 0.5},
    }
    assert type(data["scores"]["s"]) is float
    assert json.loads(json.dumps(data)) == data
    assert plain(np.arange(3)) == [0, 1, 2] and plain((Path("p"),)) == ["p"]


def test_only_dataclass_instances_are_taken() -> None:
    with pytest.raises(TypeError, match="dataclass instance, got dict"):
        as_dict({"a": 1})
    with pytest.raises(TypeError, match="got type"):
        as_dict(Outer)
