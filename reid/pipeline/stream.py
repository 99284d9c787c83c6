"""The tracked-detection stream that ``reid query`` and the camera-search app consume.

Each detection of a kept frame becomes a :class:`Sighting` (its frame and time, box,
score, crop, track and embedding) and passes, a batch of frames at a time:

    link (:func:`link_frame`) -> choose which to embed (:func:`choose_to_embed`,
    ``--embed-every``) -> embed in batches -> attach to its track

With ``embed_every`` 1 every crop is embedded first and linked with its embedding, so the
tracker orders boxes that overlap a track alike and re-finds lost tracks by appearance
(:class:`reid.track.Tracker`); the order is then embed -> link -> attach.  With
``embed_every`` N > 1 (and no appearance gate) tracks are linked on boxes alone and only
the crops they need are embedded: of each track's boxes the first, then one in N, and the
next box of a track whose embedded crops all failed, since successive frames of one person
add little to its mean.  The default is 2: on PETS09-S2L1 with ByteTrack-Nano's boxes and
a published Re-ID model, 1 and 2 give the same tracks to the digit while 2 halves the
embedding, the live path's slowest stage (docs/tracking.md, "End to end").

The detector's weak boxes (below its ``confident_score``) reach the tracker, which
continues tracks with them but starts none; a weak box no track took is noise and makes no
sighting.  Without a tracker (``track`` off, image files) only confident boxes are cut
(:func:`reid.detect.confident_detections`) and each is searched with its own embedding.

>>> stream = DetectionStream(open_source("street.avi"), build_detector(None, "person"), encoder)
>>> for tracked in stream:
...     [(s.track.id, s.query.shape) for s in tracked.sightings]
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace

import numpy as np
from reid.detect import Box, Detector
from reid.errors import ConfigError, DataError
from reid.models.encoder import Encoder, embed_images
from reid.pipeline.configs import EmbedEvery as EmbedEvery, StreamConfig as StreamConfig
from reid.pipeline.frames import FrameCrops, frame_crops, margin_for
from reid.pipeline.live import FramePipeline
from reid.pipeline.sources import Frame, MediaSource
from reid.pipeline.stages import stage_timer
from reid.track import Observation, Track, Tracker, TrackerConfig

# Frames waiting for their crops to fill a batch are held in memory; stretches of video
# with nobody in them must not pile up.
MAX_PENDING_FRAMES = 16


@dataclass
class Sighting:
    """One detection on its way through the stream.

    ``frame``: the frame it is in; ``box`` (x, y, w, h) in its pixels; ``score``: the
    detector's (None: the whole frame taken as one crop); ``crop``: RGB uint8 (H, W, 3);
    ``name``: how the crop is named when the encoder refuses it; ``track`` and ``nth``
    (which of the track's boxes it is, 0 the first) once linked; ``embedding``: its own
    (D,) float32 unit embedding, when it was embedded; ``query``: the (D,) unit vector it
    is searched with, its track's mean up to its frame or, untracked, its own embedding.
    """

    frame: Frame
    box: Box
    score: float | None
    crop: np.ndarray = field(repr=False)
    name: str
    track: Track | None = None
    nth: int = 0
    embedding: np.ndarray | None = field(default=None, repr=False)
    query: np.ndarray | None = field(default=None, repr=False)

    @property
    def time(self) -> float | None:
        """Seconds into the source (None for an image file)."""
        return self.frame.time


@dataclass
class TrackedFrame:
    """One kept frame out of the stream: ``sightings``, in the detector's order, are those
    with something to search with (a tracked box whose track has no embedding yet, a crop
    the encoder refused or a weak box no track took are left out); ``ended`` are the tracks
    known to have ended before it (at least ``min_boxes`` boxes each)."""

    frame: Frame
    sightings: list[Sighting] = field(default_factory=list)
    ended: list[Track] = field(default_factory=list)


def tracker_for(
    detector: Detector, config: TrackerConfig, fps: float | None = None, camera: int = 0
) -> Tracker:
    """A tracker of ``config`` for ``detector``'s boxes: when ``config`` sets no
    ``high_score``, the detector's ``confident_score`` is it (None, or 0 for a detector set
    to keep every box as sure: every box confident).  ``fps``: kept frames a second (None:
    unknown).  Raises ConfigError for a bad fps."""
    if config.high_score is None:
        # Scores are probabilities: from 0 every box is confident, which None says.
        config = replace(config, high_score=detector.confident_score or None)
    return Tracker(camera, config, fps)


def crop_name(frame: Frame, number: int) -> str:
    """How a crop is named in reports: the image file, or the frame and crop of a video."""
    if frame.time is None and number == 0:
        return frame.source
    return f"{frame.source} frame {frame.index} crop {number}"


def sightings_of(item: FrameCrops) -> list[Sighting]:
    """One unlinked, unembedded sighting per crop of ``item``, in its order."""
    return [
        Sighting(item.frame, box, score, piece, crop_name(item.frame, n))
        for n, (piece, box, score) in enumerate(zip(item.crops, item.boxes, item.scores, strict=True))
    ]


def link_frame(
    tracker: Tracker,
    step: int,
    sightings: Sequence[Sighting],
    embeddings: np.ndarray | None = None,
    thumbnails: bool = False,
) -> tuple[list[Sighting], list[Track]]:
    """Link the sightings of one frame (tracker step ``step``) and return those a track
    took, each with its track and ``nth`` set, and the tracks that ended before this frame
    (handed over here, so :meth:`Tracker.finish` no longer returns them).

    A score of None (a whole frame taken as one crop) is confident.  ``embeddings``: (N,
    D) float32 unit rows of the sightings' crops, for a tracker that links by appearance
    too (:meth:`Tracker.update` counts them into the tracks); ``thumbnails``: keep each
    track's largest crop."""
    observations = [
        Observation(s.frame.index, s.frame.time, s.box, 1.0 if s.score is None else s.score) for s in sightings
    ]
    crops = [s.crop for s in sightings] if thumbnails else None
    tracks = tracker.update(step, observations, crops, embeddings)
    ended = tracker.pop_ended()
    linked = [
        replace(s, track=track, nth=len(track.observations) - 1)
        for s, track in zip(sightings, tracks, strict=True)
        if track is not None
    ]
    return linked, ended


def choose_to_embed(frames: Sequence[Sequence[Sighting]], every: int) -> list[Sighting]:
    """The linked sightings, in frame order, whose crops are to be embedded: of each
    track, box 0, ``every``, 2 ``every``, ...; and the first sighting here of a track
    without any embedding yet whose earlier chosen crops all failed."""
    chosen: list[Sighting] = []
    scheduled: set[int] = set()
    for sightings in frames:
        for s in sightings:
            if s.track is None:
                raise ConfigError(f"{s.name}: only linked sightings are chosen to embed")
            unembedded = s.track.embedding_sum is None and id(s.track) not in scheduled
            if s.nth % every == 0 or unembedded:
                chosen.append(s)
                scheduled.add(id(s.track))
    return chosen


class DetectionStream:
    """Iterate to get one :class:`TrackedFrame` per kept frame of ``source``, in order
    (or :meth:`batches`: the frames answered together); :meth:`finish` ends the tracks
    still open.

    ``detector`` None takes every frame as one crop.  Tracks are kept for videos, cameras
    and streams when ``config.track`` is set (:attr:`tracker`; None otherwise).  Crops of
    several frames are embedded together (up to ``batch_size``, or
    :data:`MAX_PENDING_FRAMES` frames), except for live sources, where each frame is
    processed as soon as it arrives, with the frames that arrived while the previous batch
    was.  ``margin``: crops grown by it (default: the detector kind's).  ``threaded``:
    decode and detect on their own threads (:class:`reid.pipeline.FramePipeline`).
    ``camera``: the tracks' camera number.  :attr:`timing` holds the seconds of each stage
    (:data:`reid.pipeline.STAGES`; "search" is its consumer's), :attr:`embedded` the crops
    given to the encoder, :attr:`no_face` the (crop name, reason) of those it refused,
    :attr:`dropped` the frames of a live source skipped because the pipeline was behind.
    Raises what the source, detector and encoder raise; ConfigError for a bad frame rate.
    """

    def __init__(
        self,
        source: MediaSource,
        detector: Detector | None,
        encoder: Encoder,
        config: StreamConfig | None = None,
        margin: float | None = None,
        threaded: bool = True,
        camera: int = 0,
    ) -> None:
        self.config = config or StreamConfig()
        self.source, self.detector, self.encoder = source, detector, encoder
        self.margin = margin_for(detector, margin)
        self.threaded = threaded
        self.tracker: Tracker | None = None
        if detector is not None and self.config.track and source.kind != "images":
            fps = source.fps / source.every if source.fps else None
            self.tracker = tracker_for(detector, self.config.tracker, fps, camera)
        self.timing = stage_timer()
        self.embedded = 0
        self.no_face: list[tuple[str, str]] = []
        self.dropped = 0
        self._step = 0

    @property
    def sampled(self) -> bool:
        """True when tracks are linked on boxes alone and one in ``embed_every`` of their
        crops is embedded."""
        tracker = self.tracker
        return tracker is not None and self.config.embed_every > 1 and tracker.config.appearance is None

    def __iter__(self) -> Iterator[TrackedFrame]:
        batches = self.batches()
        with closing(batches):
            for batch in batches:
                yield from batch

    def batches(self) -> Iterator[list[TrackedFrame]]:
        """The tracked frames, a batch at a time, in order.  Leaving the iteration early
        (or Ctrl-C) stops the decoding and detection threads and releases the source."""
        align = self.encoder.aligned_face_size
        weak = self.tracker is not None
        whole = self.source.kind == "images" and self.config.no_face == "whole"
        pipeline: FramePipeline | None = None
        if self.threaded:
            pipeline = FramePipeline(
                self.source, self.detector, self.margin, self.timing, whole_if_none=whole, align_to=align, weak=weak
            )
            items: Iterator[FrameCrops] = iter(pipeline)
        else:
            items = frame_crops(
                self.source, self.detector, self.margin, self.timing, whole_if_none=whole, align_to=align, weak=weak
            )
        try:
            with closing(items):
                pending: list[FrameCrops] = []
                pending_crops = 0
                for item in items:
                    self._check_photo(item)
                    pending.append(item)
                    pending_crops += len(item.crops)
                    if self.source.live and pipeline is not None:
                        pending += pipeline.ready(MAX_PENDING_FRAMES - len(pending))
                        self.dropped = pipeline.dropped
                    full = pending_crops >= self.config.batch_size or len(pending) >= MAX_PENDING_FRAMES
                    if self.source.live or full:
                        yield self._process(pending)
                        pending, pending_crops = [], 0
                if pending:
                    yield self._process(pending)
        finally:
            if pipeline is not None:
                pipeline.close()
                self.dropped = pipeline.dropped

    def finish(self) -> list[Track]:
        """End every track still open; those not yet handed over (at least ``min_boxes``
        boxes), in order of first sighting.  Empty without a tracker."""
        return self.tracker.finish() if self.tracker is not None else []

    def _check_photo(self, item: FrameCrops) -> None:
        """An image file in which the detector found nobody is named in :attr:`no_face`,
        or stops the run under ``no_face`` "error" ("whole" gave it whole already); a frame
        of a video without anyone in it is no problem.  Raises DataError naming the file."""
        if self.source.kind != "images" or self.detector is None or item.crops:
            return
        reason = f"no {self.detector.kind} found"
        if self.config.no_face == "error":
            raise DataError(f"{item.frame.source}: {reason}")
        self.no_face.append((item.frame.source, reason))

    def _process(self, pending: list[FrameCrops]) -> list[TrackedFrame]:
        frames = [sightings_of(item) for item in pending]
        if self.sampled:
            return self._link_then_embed(pending, frames)
        self._embed([s for sightings in frames for s in sightings])
        tick = time.perf_counter()
        out = []
        for item, sightings in zip(pending, frames, strict=True):
            # A crop the encoder refused has nothing to be linked or searched with.
            kept = [s for s in sightings if s.embedding is not None]
            ended: list[Track] = []
            if self.tracker is not None:
                embeddings = np.stack([s.embedding for s in kept]) if kept else None
                kept, ended = self._link(kept, embeddings)
                for s in kept:
                    s.query = s.track.embedding  # type: ignore[union-attr]
            else:
                for s in kept:
                    s.query = s.embedding
            out.append(TrackedFrame(item.frame, kept, ended))
        self.timing["track"] += time.perf_counter() - tick
        return out

    def _link_then_embed(self, pending: list[FrameCrops], frames: list[list[Sighting]]) -> list[TrackedFrame]:
        tick = time.perf_counter()
        linked = [self._link(sightings, None) for sightings in frames]
        self.timing["track"] += time.perf_counter() - tick
        self._embed(choose_to_embed([sightings for sightings, _ in linked], self.config.embed_every))
        tick = time.perf_counter()
        out = []
        # In frame order, so that each sighting is searched with its track's mean so far.
        for item, (sightings, ended) in zip(pending, linked, strict=True):
            for s in sightings:
                if s.embedding is not None:
                    s.track.add_embedding(s.embedding)  # type: ignore[union-attr]
            # A track whose embedded crops all failed has nothing to be searched with.
            searched = [s for s in sightings if s.track.embedding_sum is not None]  # type: ignore[union-attr]
            for s in searched:
                s.query = s.track.embedding  # type: ignore[union-attr]
            out.append(TrackedFrame(item.frame, searched, ended))
        self.timing["track"] += time.perf_counter() - tick
        return out

    def _link(self, sightings: list[Sighting], embeddings: np.ndarray | None) -> tuple[list[Sighting], list[Track]]:
        assert self.tracker is not None  # only called with a tracker
        linked = link_frame(self.tracker, self._step, sightings, embeddings, self.config.thumbnails)
        self._step += 1
        return linked

    def _embed(self, sightings: list[Sighting]) -> None:
        """Embed the crops of ``sightings`` in one batch and give each its embedding (the
        encoder's refusals stay without one and are counted in :attr:`no_face`)."""
        if not sightings:
            return
        tick = time.perf_counter()
        names = [s.name for s in sightings]
        embedded = embed_images(self.encoder, [s.crop for s in sightings], names, self.config.no_face)
        self.timing["embed"] += time.perf_counter() - tick
        self.embedded += len(sightings)
        self.no_face += [(names[position], reason) for position, reason in embedded.failures]
        for row, position in enumerate(embedded.kept):
            sightings[position].embedding = embedded.features[row]
