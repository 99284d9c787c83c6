"""No server path in an answer: the one function that takes the server's own paths out of
a line before a client reads it (error messages, a watch's error)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# An absolute path: a "/" that starts a token (not the "/" of "read/write", of a URL's
# "//" or of a relative path), then anything up to a space or a quote.
ABSOLUTE_PATH = re.compile(r"(?<![\w/.:~%-])/[^\s'\"`,;()<>\[\]{}]+")


def hide_paths(text: str, known: Mapping[str, str] | None = None) -> str:
    """``text`` with each path of ``known`` (a server path -> what a client is told instead,
    longest first) replaced, then every other absolute path cut to its last part."""
    for path, shown in sorted((known or {}).items(), key=lambda kv: -len(kv[0])):
        if path and path != os.sep:
            text = text.replace(path, shown)
    return ABSOLUTE_PATH.sub(lambda m: m.group(0).rstrip("/").rsplit("/", 1)[-1] or "/", text)
