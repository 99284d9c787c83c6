"""Cross-camera person search built on reid's public API.

``python -m apps.camera_search --model M --out DIR VIDEO [VIDEO ...]`` detects and tracks
people in each camera's video, embeds every track, and names the tracks after a reference
camera's tracks or after the people of an existing gallery.  See README.md.
"""

from typing import Any

from apps.camera_search.config import SearchConfig

# The search's names are imported when first asked for: importing the package (as
# ``python -m apps.camera_search --help`` does) loads no engine.
_SEARCH = ("CameraRun", "SearchResult", "TrackEvent", "run_search")

__all__ = ["SearchConfig", *_SEARCH]


def __getattr__(name: str) -> Any:
    if name in _SEARCH:
        from apps.camera_search import search

        return getattr(search, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
