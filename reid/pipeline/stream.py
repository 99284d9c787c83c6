"""Tracked detections as small records: link each frame's boxes to tracks, choose which
of their crops to embed, and attach the embeddings to their tracks.

A :class:`Sighting` is one detection a track took: its frame, box, score, crop, the track,
and which of the track's boxes it is.  :func:`link_frame` makes them from one frame's
crops (a weak box no track took is noise and makes none); :func:`choose_to_embed` is
``--embed-every``: of each track's boxes, the first and then one in ``every`` are embedded,
and so is the next box of a track that still has no embedding (its embedded crops failed),
since successive frames of one person add little to its mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from reid.detect import Box
from reid.pipeline.frames import FrameCrops
from reid.pipeline.sources import Frame
from reid.track import Observation, Track, Tracker


@dataclass
class Sighting:
    """One tracked detection: ``position`` is its crop's index among the crops of the
    frames linked together, ``nth`` which of its track's boxes it is (0: the first)."""

    frame: Frame
    box: Box
    score: float
    crop: np.ndarray = field(repr=False)
    position: int
    track: Track
    nth: int
    embedding: np.ndarray | None = field(default=None, repr=False)


def link_frame(
    tracker: Tracker,
    step: int,
    item: FrameCrops,
    at: int = 0,
    embeddings: np.ndarray | None = None,
    thumbnails: bool = False,
) -> tuple[list[Sighting], list[Track]]:
    """Link the boxes of ``item`` (tracker step ``step``; its crops start at ``at`` among
    the crops linked together) and return the sightings made and the tracks that ended
    before this frame (handed over here, so :meth:`Tracker.finish` no longer returns them).

    A box scored None (a whole frame taken as one crop) is confident.  ``embeddings``:
    (N, D) float32 unit rows of the crops, for a tracker that links by appearance too
    (:meth:`Tracker.update`); ``thumbnails``: keep each track's largest crop."""
    frame = item.frame
    scores = [1.0 if s is None else s for s in item.scores]
    observations = [Observation(frame.index, frame.time, box, s) for box, s in zip(item.boxes, scores, strict=True)]
    tracks = tracker.update(step, observations, item.crops if thumbnails else None, embeddings)
    ended = tracker.pop_ended()
    sightings = [
        Sighting(frame, item.boxes[n], scores[n], item.crops[n], at + n, track, len(track.observations) - 1)
        for n, track in enumerate(tracks)
        if track is not None
    ]
    return sightings, ended


def choose_to_embed(frames: Sequence[Sequence[Sighting]], every: int) -> list[Sighting]:
    """The sightings, in frame order, whose crops are to be embedded: of each track, box
    0, ``every``, 2 ``every``, ...; and the first sighting here of a track without any
    embedding yet whose earlier chosen crops all failed."""
    chosen: list[Sighting] = []
    scheduled: set[int] = set()
    for sightings in frames:
        for s in sightings:
            unembedded = s.track.embedding_sum is None and id(s.track) not in scheduled
            if s.nth % every == 0 or unembedded:
                chosen.append(s)
                scheduled.add(id(s.track))
    return chosen


def attach(sightings: Sequence[Sighting], embeddings: np.ndarray) -> None:
    """Give each sighting its embedding (row i of the (N, D) unit ``embeddings`` for
    sighting i) and count it into the sighting's track's mean."""
    for sighting, embedding in zip(sightings, embeddings, strict=True):
        sighting.embedding = embedding
        sighting.track.add_embedding(embedding)
