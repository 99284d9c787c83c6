"""Tracks: one person followed through consecutive frames of one camera."""

from reid.track.tracker import Observation, Track, Tracker, TrackerConfig, iou

__all__ = ["Observation", "Track", "Tracker", "TrackerConfig", "iou"]
