"""Tracks: one person followed through consecutive frames of one camera."""

from typing import TYPE_CHECKING

from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.track.config import TrackerConfig
    from reid.track.tracker import Observation, Track, Tracker, iou

__getattr__, __dir__ = lazy_names(__name__, __file__)

__all__ = ["Observation", "Track", "Tracker", "TrackerConfig", "iou"]
