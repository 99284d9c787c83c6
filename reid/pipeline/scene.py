"""A camera's own impostor pairs: the tracks of a video of the camera, as a query sees them.

People seen in the same frame of one camera are different people, so two tracks with a
box in one frame are an impostor pair of that scene (:mod:`reid.gallery.calibration`).
:func:`scene_tracks` runs the query stream (detect, track, embed: :class:`DetectionStream`) over
a part of a video and returns each track's frames, boxes and the unit mean of its crops'
embeddings, the vector a query decides a track by.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from reid.errors import ConfigError, ConfigValueError
from reid.gallery import GalleryBackend
from reid.gallery.calibration import GalleryCalibration, SceneTrack, SceneTracks
from reid.models.encoder import Encoder
from reid.pipeline.query import QueryConfig, query_detector
from reid.pipeline.stream import DetectionStream
from reid.pipeline.sources import open_source


def parse_frames(text: str | None) -> tuple[int, int | None]:
    """``"A:B"`` as (A, B): frames A up to but not including B, numbered from 0 as a query's
    ``--jsonl`` numbers them; either side may be empty ("":  from 0; B empty: to the end).
    None is every frame.  ConfigError for anything else."""
    if text is None:
        return 0, None
    start, colon, stop = text.partition(":")
    try:
        first = int(start) if start.strip() else 0
        last = int(stop) if stop.strip() else None
    except ValueError:
        first, last = -1, None
    if not colon or first < 0 or (last is not None and last <= first):
        raise ConfigValueError("frames", f"{text!r}: give A:B, frames A up to but not including B (0 <= A < B)", sep=" ")
    return first, last


def scene_tracks(
    encoder: Encoder,
    video: str,
    frames: str | None = None,
    config: QueryConfig | None = None,
) -> SceneTracks:
    """The tracks the query stream (:class:`reid.pipeline.stream.DetectionStream`: detect,
    track, embed) follows in ``video`` (frames ``frames``, "A:B" as :func:`parse_frames`),
    each with the frames it has a box in, those boxes and the unit mean (float32) of the
    embeddings of its crops inside the frames.

    ``config`` sets the detector and tracker as for a query (nothing is named, so its
    threshold is not used).  Tracks of fewer than the tracker's ``min_boxes`` boxes inside
    the frames are left out, as a query leaves them out of its tracks.  Raises ConfigError
    for a source that is not a video file and for bad frames, DataError for an unreadable
    video.
    """
    first, last = parse_frames(frames)
    source = open_source(video, max_frames=last)
    if source.kind != "video":
        raise ConfigError(f"{video}: a scene is a video file of the camera, not {source.kind}")
    config = replace(config or QueryConfig(), track=True)
    detector = query_detector(config, source, encoder)
    stream = DetectionStream(source, detector, encoder, config.stream(), config.margin, config.threaded)
    sums: dict[int, np.ndarray] = {}
    seen: dict[int, list[int]] = {}
    boxes: dict[int, list[tuple[int, int, int, int]]] = {}
    for tracked in stream:
        if tracked.frame.index < first:
            continue
        for sighting in tracked.sightings:
            if sighting.track is None:
                continue
            number = sighting.track.id
            seen.setdefault(number, []).append(tracked.frame.index)
            boxes.setdefault(number, []).append(tuple(sighting.box))
            if sighting.embedding is not None:
                sums[number] = sums.get(number, 0) + sighting.embedding.astype(np.float64)
    tracks = []
    for number in sorted(seen):
        total = sums.get(number)
        norm = 0.0 if total is None else float(np.linalg.norm(total))
        if len(seen[number]) < config.tracker.min_boxes or norm == 0:
            continue
        frames_seen, embedding = np.asarray(seen[number], np.int64), (total / norm).astype(np.float32)
        tracks.append(SceneTrack(frames_seen, embedding, np.asarray(boxes[number], np.float64)))
    span = f"{first}:{'' if last is None else last}" if frames is not None else "all"
    return SceneTracks(str(video), span, tuple(tracks))


def calibrate_on_scene(
    gallery: GalleryBackend,
    encoder: Encoder,
    video: str,
    frames: str | None = None,
    config: QueryConfig | None = None,
    **options: Any,
) -> GalleryCalibration:
    """Store ``gallery``'s own threshold with the impostor pairs of a video of its camera
    (:func:`scene_tracks` over ``frames``, then :meth:`GalleryBackend.calibrate` with ``options``:
    ``far``, ``max_items``).  Raises what those raise."""
    return gallery.calibrate(**options, scene=scene_tracks(encoder, video, frames, config))
