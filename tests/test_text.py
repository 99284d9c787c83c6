"""Numbers read from text a user wrote: one checked parser, which takes only ASCII decimal
numbers of bounded length in range, where ``str.isdigit``, ``int`` and ``float`` take more."""

from __future__ import annotations

import pytest

from reid.text import MAX_NUMBER_TEXT, real_number, whole_number


@pytest.mark.parametrize("text,value", [("0", 0), ("42", 42), ("-7", -7), ("9" * 20, int("9" * 20))])
def test_whole_numbers_in_ascii_digits_are_read(text: str, value: int) -> None:
    assert whole_number(text) == value


@pytest.mark.parametrize(
    "text",
    ["", "²", "١٢", "１２", "1_000", " 12", "12 ", "+", "-", "--1", "1.0", "0x10", "1e3", "9" * 5000,
     "9" * (MAX_NUMBER_TEXT + 1), None, 12],
)  # fmt: skip
def test_anything_else_is_no_whole_number(text: object) -> None:
    assert whole_number(text) is None


def test_whole_numbers_out_of_range_are_none() -> None:
    assert whole_number("5", 1, 5) == 5 and whole_number("0", 1) is None and whole_number("6", high=5) is None


@pytest.mark.parametrize("text,value", [("0.5", 0.5), ("-1.5", -1.5), ("2e-3", 0.002), ("3", 3.0)])
def test_real_numbers_are_read(text: str, value: float) -> None:
    assert real_number(text) == value


@pytest.mark.parametrize("text", ["nan", "inf", "-Infinity", "1e400", "1_0", "１", " 1", "0x1p3", "1" * 5000, "", "²"])
def test_anything_else_is_no_real_number(text: str) -> None:
    assert real_number(text) is None


def test_real_numbers_out_of_range_are_none() -> None:
    assert real_number("2.5", 0, 2) is None and real_number("2", 0, 2) == 2.0
