"""Config fields checked by their types: ranges and choices, strictly, one line naming the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import pytest
from pydantic import Field

from reid.errors import ConfigValueError
from reid.options import check_fields, option, option_fields


@dataclass
class Inner:
    count: Annotated[int, Field(ge=1)] = 1

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class Outer:
    rate: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = option(0.5, help="A rate.")
    kind: Literal["a", "b"] = "a"
    limit: Annotated[int, Field(ge=0)] | None = None
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self) -> None:
        check_fields(self)


@pytest.mark.parametrize(
    ("values", "line"),
    [
        ({"rate": 0.0}, "rate: input should be greater than 0 (got 0.0)"),
        ({"rate": float("nan")}, "rate: input should be a finite number (got nan)"),
        ({"rate": "0.5"}, "rate: input should be a valid number (got '0.5')"),
        ({"kind": "c"}, "kind: input should be 'a' or 'b' (got 'c')"),
        ({"limit": -1}, "limit: input should be greater than or equal to 0 (got -1)"),
        ({"limit": True}, "limit: input should be a valid integer (got True)"),
    ],
)
def test_a_wrong_value_is_one_line_naming_its_key(values: dict[str, object], line: str) -> None:
    with pytest.raises(ConfigValueError) as caught:
        Outer(**values)  # type: ignore[arg-type]
    assert str(caught.value) == line and caught.value.key == next(iter(values))


def test_values_in_range_pass_and_a_nested_config_checks_itself() -> None:
    config = Outer(rate=1, kind="b", limit=None)
    assert (config.rate, config.kind, config.limit) == (1, "b", None)
    with pytest.raises(ConfigValueError, match="^count: "):
        Outer(inner=Inner(count=0))
    assert [f.name for f in option_fields(Outer)] == ["rate"]
