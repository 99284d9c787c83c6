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
