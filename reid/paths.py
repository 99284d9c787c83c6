"""How a model or gallery the user names becomes a folder: the one rule for both."""

from __future__ import annotations

import os
from pathlib import Path


def has_folder_part(spec: str | Path) -> bool:
    """True when the user wrote a path (``./x``, ``../x``, ``a/b``, ``/abs``, ``~/x``), not a bare name.

    Path("./x") normalizes to "x", so the text as written is what counts.
    """
    text = os.fspath(spec)
    separators = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return any(sep in text for sep in separators) or text in (".", "..") or text.startswith("~")


def resolve_named(spec: str | Path, home: Path) -> Path:
    """A path as written when it has a folder part; a bare name is ``./NAME`` when that
    exists, else ``home/NAME`` (``models/`` or ``galleries/``)."""
    if has_folder_part(spec):
        return Path(os.path.expanduser(os.fspath(spec)))
    path = Path(spec)
    if path.exists():
        return path
    return home / path
