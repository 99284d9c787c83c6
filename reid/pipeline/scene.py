"""A camera's own impostor pairs: the tracks of a video of the camera, as a query sees them.

People seen in the same frame of one camera are different people, so two tracks with a
box in one frame are an impostor pair of that scene (:mod:`reid.gallery.calibration`).
:func:`scene_tracks` runs the query stream (detect, track, embed: :class:`QueryRun`) over
a part of a video and returns each track's frames, boxes and the unit mean of its crops'
embeddings, the vector a query decides a track by.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from reid.errors import ConfigError
from reid.gallery import Gallery
from reid.gallery.calibration import GalleryCalibration, SceneTrack, SceneTracks
from reid.models.encoder import Encoder, embed_images
from reid.pipeline.query import QueryConfig, QueryRun
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
        raise ConfigError(f"--frames {text!r}: give A:B, frames A up to but not including B (0 <= A < B)")
    return first, last


def scene_tracks(
    gallery: Gallery,
    encoder: Encoder,
    video: str,
    frames: str | None = None,
    config: QueryConfig | None = None,
) -> SceneTracks:
    """The tracks a query of ``video`` (frames ``frames``, "A:B" as :func:`parse_frames`)
    follows, each with the frames it has a box in, those boxes and its mean embedding
    (float32, unit).

    ``config`` sets the detector and tracker as for a query (its threshold is not used:
    nothing is named).  Tracks of fewer than the tracker's ``min_boxes`` boxes inside the
    frames are left out, as a query leaves them out of its tracks.  Raises ConfigError for
    a source that is not a video file and for bad frames, DataError for an unreadable video.
    """
    first, last = parse_frames(frames)
    source = open_source(video, max_frames=last)
    if source.kind != "video":
        raise ConfigError(f"{video}: a scene is a video file of the camera, not {source.kind}")
    # Nothing is named, so no threshold is needed: the widest one spares a gallery and card
    # that have none the error a query would stop with.
    config = replace(config or QueryConfig(), track=True, threshold=2.0, far=None)
    run = QueryRun(gallery, encoder, source, config)
    sums: dict[int, np.ndarray] = {}
    seen: dict[int, list[int]] = {}
    boxes: dict[int, list[tuple[int, int, int, int]]] = {}
    crops: list[np.ndarray] = []
    owners: list[int] = []

    def embed() -> None:
        names = [f"{video} track {owner}" for owner in owners]
        embedded = embed_images(encoder, crops, names, config.no_face)
        for row, position in enumerate(embedded.kept):
            owner = owners[position]
            sums[owner] = sums.get(owner, 0) + embedded.features[row].astype(np.float64)
        crops.clear()
        owners.clear()

    for result in run:
        if result.frame < first:
            continue
        for detection in result.detections:
            if detection.track is None:
                continue
            seen.setdefault(detection.track, []).append(result.frame)
            boxes.setdefault(detection.track, []).append(tuple(detection.box))
            crops.append(detection.crop)
            owners.append(detection.track)
        if len(crops) >= config.batch_size:
            embed()
    embed()
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
    gallery: Gallery,
    encoder: Encoder,
    video: str,
    frames: str | None = None,
    config: QueryConfig | None = None,
    **options: Any,
) -> GalleryCalibration:
    """Store ``gallery``'s own threshold with the impostor pairs of a video of its camera
    (:func:`scene_tracks` over ``frames``, then :meth:`Gallery.calibrate` with ``options``:
    ``far``, ``max_items``).  Raises what those raise."""
    return gallery.calibrate(**options, scene=scene_tracks(gallery, encoder, video, frames, config))
