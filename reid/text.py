"""Showing user-controlled strings (paths, identity labels, sources) on a terminal."""

from __future__ import annotations


def printable(text: object) -> str:
    """``text`` with control characters (terminal escapes, newlines, bells) written as
    escapes such as ``\\x1b``, so that a label or a file name cannot move the cursor,
    recolour the terminal or forge output lines."""
    value = str(text)
    if value.isprintable():
        return value
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in value)


# The longest number text read from a user: a 64-bit count has 20 digits, a float written
# out in full a few more; anything longer is refused before Python converts it.
MAX_NUMBER_TEXT = 40


def whole_number(text: object, low: int | None = None, high: int | None = None) -> int | None:
    """``text`` as an int when it is a whole number written in ASCII digits (an optional
    leading ``-``, at most :data:`MAX_NUMBER_TEXT` characters) within ``low``..``high``;
    None otherwise.  ``str.isdigit`` and ``int`` take what this refuses: superscripts
    (``²``), other scripts' digits, underscores, surrounding space, thousands of digits."""
    if not isinstance(text, str) or not 0 < len(text) <= MAX_NUMBER_TEXT:
        return None
    digits = text[1:] if text.startswith("-") else text
    if not digits or not (digits.isascii() and digits.isdigit()):
        return None
    value = int(text)
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


def real_number(text: object, low: float | None = None, high: float | None = None) -> float | None:
    """``text`` as a finite float when it is a decimal number in ASCII (``-1.5``, ``2e-3``;
    at most :data:`MAX_NUMBER_TEXT` characters) within ``low``..``high``; None otherwise
    (``nan``, ``inf``, ``1_0``, full-width digits, surrounding space)."""
    if not isinstance(text, str) or not 0 < len(text) <= MAX_NUMBER_TEXT or not text.isascii():
        return None
    if not all(c in "0123456789+-.eE" for c in text):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value
