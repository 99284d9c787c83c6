"""Cross-camera person search: detect and track people in each camera, embed each track,
then name the tracks from a reference camera's tracks or from an existing gallery.

Only names that reid's subpackages export are used here: :class:`reid.pipeline.DetectionStream`
reads each video, cuts out the people :func:`reid.detect.build_detector` finds, links them
into tracks and embeds their crops (the stream ``reid query`` runs on), and
:class:`reid.gallery.GalleryBackend` holds and searches the known people.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from reid import GalleryError, Threshold, nearest_identity, one_identity_each_together, resolve_threshold
from reid.detect import build_detector
from reid.gallery import DB_FILE, GalleryBackend, ItemMeta, open_gallery, resolve_gallery_path
from reid.models import Encoder
from reid.pipeline import DetectionStream, MediaSource, open_source, stage_timer
from reid.track import Track

from apps.camera_search.config import SearchConfig

# Called as (camera, frames done, frames expected or None) while a camera is processed.
ProgressFn = Callable[[int, int, int | None], None]


@dataclass
class CameraRun:
    """One camera's video after detection and tracking; ``detections`` counts the boxes
    tracks took, ``embedded`` the crops given to the encoder, ``dropped`` the frames of a
    live camera skipped because the pipeline was behind (never a video file's)."""

    camera: int
    source: str
    fps: float | None
    frames: int = 0
    detections: int = 0
    embedded: int = 0
    tracks: list[Track] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=stage_timer)
    wall_seconds: float = 0.0
    interrupted: bool = False
    dropped: int = 0

    @property
    def name(self) -> str:
        return f"cam{self.camera}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "camera": self.camera,
            "source": self.source,
            "fps": self.fps,
            "frames": self.frames,
            "detections": self.detections,
            "embedded": self.embedded,
            "tracks": len(self.tracks),
            "stage_seconds": {k: round(v, 4) for k, v in self.stage_seconds.items()},
            "wall_seconds": round(self.wall_seconds, 4),
            "frames_per_second": round(self.frames / self.wall_seconds, 3) if self.wall_seconds > 0 else None,
            "dropped": self.dropped,
        }


@dataclass
class TrackEvent:
    """One track and its answer: the event written to JSON lines and SQLite.

    ``role`` is "reference" for a track enrolled from the reference camera (its identity is
    its own label and its distance null) and "query" for a track searched in the gallery.
    ``nearest`` is the nearest identity even when it is farther than the threshold.
    """

    camera: int
    source: str
    track: int
    start: float | None
    end: float | None
    first_frame: int
    last_frame: int
    boxes: int
    identity: str | None
    distance: float | None
    nearest: str | None
    role: str
    thumbnail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "camera": self.camera,
            "source": self.source,
            "track": self.track,
            "start": None if self.start is None else round(self.start, 3),
            "end": None if self.end is None else round(self.end, 3),
            "first_frame": self.first_frame,
            "last_frame": self.last_frame,
            "boxes": self.boxes,
            "identity": self.identity,
            "distance": None if self.distance is None else round(self.distance, 6),
            "nearest": self.nearest,
            "role": self.role,
            "thumbnail": self.thumbnail,
        }


@dataclass
class SearchResult:
    cameras: list[CameraRun]
    events: list[TrackEvent]
    threshold: float
    threshold_source: str
    gallery: Path
    mode: str
    interrupted: bool = False


def track_label(camera: int, track: int) -> str:
    """The identity a reference-camera track is enrolled under."""
    return f"cam{camera}-{track:03d}"


def open_cameras(config: SearchConfig) -> list[MediaSource]:
    """Every camera's source, opened up front so that a bad path fails before any work."""
    return [open_source(video, every=config.every, max_frames=config.max_frames) for video in config.videos]


def process_camera(
    encoder: Encoder,
    camera: int,
    source: MediaSource,
    config: SearchConfig,
    on_progress: ProgressFn | None = None,
) -> CameraRun:
    """Detect people in every kept frame of ``source``, link them into tracks and embed
    them (:class:`reid.pipeline.DetectionStream`); the run lists the tracks with an
    embedding, in order of first sighting."""
    detector = build_detector(config.person_detector, "person", [config.detector])
    stream = DetectionStream(source, detector, encoder, config.stream(), camera=camera)
    run = CameraRun(camera, source.spec, source.fps, stage_seconds=stream.timing)
    ended: list[Track] = []
    started = time.perf_counter()
    batches = stream.batches()
    try:
        with closing(batches):
            for batch in batches:
                for tracked in batch:
                    ended += tracked.ended
                    run.frames += 1
                    run.detections += len(tracked.sightings)
                    if on_progress is not None:
                        on_progress(camera, run.frames, source.expected_frames)
    except KeyboardInterrupt:
        # Ctrl-C ends the reading; what was tracked so far is still matched and written.
        run.interrupted = True
    finally:
        run.dropped, run.embedded = stream.dropped, stream.embedded
    # A track linked in the batch Ctrl-C stopped may have no embedding yet.
    tracks = [t for t in ended + stream.finish() if t.embedding_sum is not None]
    run.tracks = sorted(tracks, key=lambda t: (t.first.frame, t.id))
    run.wall_seconds = time.perf_counter() - started
    return run


def fresh_reference_gallery(folder: Path, encoder: Encoder) -> GalleryBackend:
    """A new, empty gallery at ``folder``; one left there by an earlier run is replaced."""
    if folder.exists():
        if not (folder / DB_FILE).is_file() and any(folder.iterdir()):
            raise GalleryError(f"{folder}: exists and is not a gallery; choose another output folder")
        shutil.rmtree(folder)
    return open_gallery(folder, encoder.card, create=True)


def _event(track: Track, run: CameraRun, role: str) -> TrackEvent:
    return TrackEvent(
        camera=run.camera,
        source=run.source,
        track=track.id,
        start=track.first.time,
        end=track.last.time,
        first_frame=track.first.frame,
        last_frame=track.last.frame,
        boxes=len(track.observations),
        identity=None,
        distance=None,
        nearest=None,
        role=role,
    )


def enrol_tracks(gallery: GalleryBackend, run: CameraRun) -> list[TrackEvent]:
    """Add each track of ``run`` to the gallery as its own identity."""
    events = []
    if run.tracks:
        items = [
            ItemMeta(
                track_label(run.camera, t.id),
                source=run.source,
                camera=run.name,
                frame=t.first.frame,
                time=t.first.time,
                box=t.best_box,
            )
            for t in run.tracks
        ]
        gallery.add(np.stack([t.embedding for t in run.tracks]), items, skip_duplicates=False)
    for track in run.tracks:
        event = _event(track, run, "reference")
        event.identity = event.nearest = track_label(run.camera, track.id)
        events.append(event)
    return events


def seen_together(tracks: list[Track]) -> list[list[int]]:
    """For each frame with a box of ``tracks``, the positions in ``tracks`` of those in it."""
    frames: dict[int, list[int]] = {}
    for position, track in enumerate(tracks):
        for observation in track.observations:
            frames.setdefault(observation.frame, []).append(position)
    return list(frames.values())


def match_tracks(
    gallery: GalleryBackend, run: CameraRun, threshold: Threshold, top_k: int, one_per_frame: bool = True
) -> list[TrackEvent]:
    """Search each track of ``run`` in the gallery by its mean embedding; name it when the
    nearest is within ``threshold``, and with ``one_per_frame`` never name two tracks that
    share a frame the same identity (:func:`reid.decision.one_identity_each_together`)."""
    if not run.tracks:
        return []
    matches = gallery.search(np.stack([t.embedding for t in run.tracks]), top_k)
    if one_per_frame:
        names = one_identity_each_together(matches, seen_together(run.tracks), threshold)
    else:
        names = [nearest_identity(found, threshold) for found in matches]
    events = []
    for track, found, name in zip(run.tracks, matches, names, strict=True):
        event = _event(track, run, "query")
        if found:
            event.nearest, event.identity = found[0].identity, name
            event.distance = next((m.distance for m in found if m.identity == name), found[0].distance)
        events.append(event)
    return events


def run_search(
    encoder: Encoder,
    config: SearchConfig,
    on_progress: ProgressFn | None = None,
) -> SearchResult:
    """Process every camera, then enrol the reference camera's tracks (or use the given
    gallery) and match the others.  Sources, gallery and threshold are all checked before
    the first frame is read, so a bad option fails at once rather than after the videos."""
    sources = open_cameras(config)
    if config.gallery is None:
        folder = config.out / "gallery"
        gallery = fresh_reference_gallery(folder, encoder)
        mode = "reference"
    else:
        folder = resolve_gallery_path(config.gallery)
        gallery = open_gallery(folder)
        mode = "gallery"
    try:
        gallery.check_model(encoder.card)
        threshold = resolve_threshold(
            config.threshold, encoder.card, gallery, given_detail=config.threshold_source or "--threshold"
        )
        cameras: list[CameraRun] = []
        for camera, source in enumerate(sources):
            cameras.append(process_camera(encoder, camera, source, config, on_progress))
            if cameras[-1].interrupted:
                break
        events: list[TrackEvent] = []
        if mode == "reference":
            reference = next((c for c in cameras if c.camera == config.reference_camera), None)
            if reference is not None:
                events += enrol_tracks(gallery, reference)
        for run in cameras:
            if mode == "gallery" or run.camera != config.reference_camera:
                events += match_tracks(gallery, run, threshold, config.top_k, config.one_per_frame)
    finally:
        gallery.close()
    events.sort(key=lambda e: (e.camera, e.track))
    interrupted = any(c.interrupted for c in cameras)
    return SearchResult(cameras, events, threshold.value, threshold.describe(), folder, mode, interrupted)

