"""Cross-camera person search built on reid's public API.

``python -m apps.camera_search --model M --out DIR VIDEO [VIDEO ...]`` detects and tracks
people in each camera's video, embeds every track, and names the tracks after a reference
camera's tracks or after the people of an existing gallery.  See README.md.
"""

from apps.camera_search.search import CameraRun, SearchConfig, SearchResult, TrackEvent, run_search

__all__ = [
    "CameraRun",
    "SearchConfig",
    "SearchResult",
    "TrackEvent",
    "run_search",
]
