"""Where query results go: JSON lines, an annotated video, crop images, ended tracks,
tracked boxes in MOTChallenge format.

Each writer flushes as it goes and :class:`QueryOutputs` closes all of them however the
run ends, so a run stopped by Ctrl-C leaves complete JSON lines, a playable video of the
frames seen so far, and every crop saved so far.  :func:`check_outputs` refuses outputs
that cannot be written before any work starts.

Crop folders are named after identity labels through :func:`safe_name`, and the folder of
each label is recorded in ``identities.json`` beside them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from contextlib import suppress
from pathlib import Path
from types import TracebackType

import cv2
import numpy as np

from reid.draw import Trails, draw_labels, make_label
from reid.errors import ConfigError, DataError
from reid.paths import (
    TEMP_MARK,
    check_output_file,
    check_output_folder,
    make_own_folder,
    open_new,
    remove_stale_temporaries,
    write_bytes_atomic,
)
from reid.pipeline.query import FrameResult, TrackSummary
from reid.track.mot import MotRow, finish_tracks, write_mot

FOURCC = {".mp4": "mp4v", ".m4v": "mp4v", ".mov": "mp4v", ".avi": "MJPG", ".mkv": "XVID"}
SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# A text used as a name as it is: safe characters, not starting with "." (".", "..",
# hidden) or "-" (read as an option), and not ending like a hashed name.
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
NAME_HASH_DIGITS = 12
HASHED_NAME = re.compile(rf"-[0-9a-f]{{{NAME_HASH_DIGITS}}}$")
# Characters of a text kept in a name: far under the 255 bytes file systems allow, with
# room for the hash and a file's own suffix.
MAX_NAME = 64
UNKNOWN_FOLDER = "unknown"
CROP_MAP_FILE = "identities.json"


def safe_name(text: str, reserved: frozenset[str] = frozenset()) -> str:
    """A file or folder name for ``text``, unique for unique texts and never a path.

    ``text`` itself when it is at most :data:`MAX_NAME` safe characters (letters, digits,
    ``.``, ``_``, ``-``), does not start with ``.`` or ``-`` and is not in ``reserved``;
    otherwise its first safe characters followed by ``-`` and a hash of the whole text.
    """
    if len(text) <= MAX_NAME and PLAIN_NAME.fullmatch(text) and not HASHED_NAME.search(text) and text not in reserved:
        return text
    stem = SAFE_NAME.sub("_", text)[:MAX_NAME].lstrip(".-") or "_"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:NAME_HASH_DIGITS]
    return f"{stem}-{digest}"


def check_outputs(
    jsonl: Path | None = None,
    video: Path | None = None,
    crops: Path | None = None,
    tracks: Path | None = None,
    mot: Path | None = None,
) -> None:
    """Raise ConfigError, before any work, for an output that cannot be written: a file
    where a folder must go or the reverse, a folder that cannot be made, a video suffix
    OpenCV has no codec for."""
    if video is not None and Path(video).suffix.lower() not in FOURCC:
        raise ConfigError(f"{video}: video output must end in {', '.join(FOURCC)}")
    for path, what in ((jsonl, "--jsonl"), (video, "--save-video"), (tracks, "--tracks"), (mot, "--mot")):
        if path is not None:
            check_output_file(Path(path), what)
    if crops is not None:
        check_output_folder(Path(crops), "--save-crops")


def annotate(result: FrameResult, trails: Trails | None = None) -> np.ndarray:
    """The frame as BGR with each detection's box and label drawn by :func:`reid.draw.draw_labels`
    (``#<track> <identity or unknown> <distance>``, shortened or left out where labels
    would collide); with ``trails``, each track's recent centres are added to them and
    drawn behind the boxes."""
    canvas = cv2.cvtColor(result.image, cv2.COLOR_RGB2BGR)
    labels = [
        make_label(d.box, d.track, d.identity, d.distance if np.isfinite(d.distance) else None) for d in result.detections
    ]
    if trails is not None:
        trails.update((d.track, d.box) for d in result.detections if d.track is not None)
        trails.draw(canvas)
    draw_labels(canvas, labels)
    return canvas


class VideoWriter:
    """BGR frames into a video file whose suffix picks the codec (:data:`FOURCC`); frames
    of other sizes are letterboxed into the first one's.  Each written frame is in the file
    once :meth:`close` runs, so a stopped run leaves a playable video.  OpenCV opens files
    by name, so frames go to a fresh hidden file beside ``path`` (created no-follow, the
    suffix kept for the codec) that :meth:`close` renames into place: a link planted at
    ``path`` is replaced, never written through.  Raises ConfigError for an unknown suffix
    and DataError when OpenCV cannot write the codec there."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path = Path(path)
        check_outputs(video=self.path)
        self.codec = FOURCC[self.path.suffix.lower()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fps = fps if fps > 0 else 10.0
        self._writer: cv2.VideoWriter | None = None
        self._partial = self.path.with_name(f".{self.path.stem}{TEMP_MARK}{os.getpid()}{self.path.suffix}")
        # The hidden file of a run that was killed before it renamed its own.
        remove_stale_temporaries(self.path.parent)
        self._size: tuple[int, int] | None = None
        self.frames = 0

    def write(self, canvas: np.ndarray) -> None:
        if self._writer is None:
            self._size = (canvas.shape[1], canvas.shape[0])
            open_new(self._partial).close()
            self._writer = cv2.VideoWriter(str(self._partial), cv2.VideoWriter_fourcc(*self.codec), self.fps, self._size)
            if not self._writer.isOpened():
                self._writer = None
                self._partial.unlink(missing_ok=True)
                raise DataError(f"{self.path}: OpenCV {cv2.__version__} cannot write {self.codec} video here")
        if (canvas.shape[1], canvas.shape[0]) != self._size:
            canvas = _fit(canvas, self._size)
        self._writer.write(canvas)
        self.frames += 1

    def close(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None
            os.replace(self._partial, self.path)


class JsonLines:
    """A new file of JSON lines that only ever holds whole lines: each :meth:`write` lands
    whole, or, when the write fails (a full disk), the file is cut back to the end of its
    last whole line and DataError says so in one line.  Written unbuffered, so that what
    :meth:`write` returned from is in the file, and a stopped run leaves whole lines."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A new file, never written through a link planted at its name.
        self._file = open_new(self.path).detach()
        self._end = 0
        self.lines = 0

    def write(self, values: list[object]) -> None:
        if not values:
            return
        block = "".join(json.dumps(value) + "\n" for value in values).encode("utf-8")
        view = memoryview(block)
        try:
            while view:
                view = view[self._file.write(view) :]
        except OSError as exc:
            with suppress(OSError):
                os.ftruncate(self._file.fileno(), self._end)
                self._file.seek(self._end)
            reason = exc.strerror or type(exc).__name__
            raise DataError(f"{self.path}: cannot write ({reason}); it holds the first {self.lines} lines, each whole") from None
        self._end += len(block)
        self.lines += len(values)

    def close(self) -> None:
        self._file.close()


class JsonlWriter(JsonLines):
    """One JSON object per detection, each frame's written whole (:class:`JsonLines`)."""

    def __init__(self, path: Path) -> None:
        check_outputs(jsonl=Path(path))
        super().__init__(path)

    def write(self, result: FrameResult) -> None:  # type: ignore[override]
        super().write(list(result.events()))


class TracksWriter(JsonLines):
    """One JSON object per ended track (:meth:`TrackSummary.to_dict`), written whole (:class:`JsonLines`)."""

    def __init__(self, path: Path) -> None:
        check_outputs(tracks=Path(path))
        super().__init__(path)

    def write(self, result: FrameResult) -> None:  # type: ignore[override]
        self.write_tracks(result.ended_tracks)

    def write_tracks(self, tracks: list[TrackSummary]) -> None:
        super().write([track.to_dict() for track in tracks])


class MotWriter:
    """Every tracked detection as a MOTChallenge row (:mod:`reid.track.mot`), written at
    close, atomically: the file's frames count from 1 (decoded frame index + 1), ids are
    track numbers (-1 for untracked detections), tracks of fewer than ``min_boxes`` boxes
    are left out, as the tracker leaves them out of its ended tracks, and the rest are
    finished as ``reid track`` finishes them (:func:`reid.track.mot.finish_tracks`):
    tracklets that continue one another within ``max_gap`` frames joined by motion and
    their ended tracks' mean embeddings, gaps of up to ``max_gap`` frames interpolated, and
    each track's boxes smoothed at ``fps`` frames a second."""

    def __init__(self, path: Path, min_boxes: int = 1, max_gap: int = 0, fps: float | None = None) -> None:
        self.path = Path(path)
        check_outputs(mot=self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.min_boxes, self.max_gap, self.fps = min_boxes, max_gap, fps
        self.rows: list[MotRow] = []
        self.looks: dict[int, np.ndarray] = {}
        self.lines = 0

    def write(self, result: FrameResult) -> None:
        for d in result.detections:
            track = -1 if d.track is None else d.track
            score = 1.0 if d.detection_score is None else d.detection_score
            self.rows.append(MotRow(result.frame + 1, track, tuple(float(v) for v in d.box), score))  # type: ignore[arg-type]
        self.write_tracks(result.ended_tracks)

    def write_tracks(self, tracks: list[TrackSummary]) -> None:
        """Keep the mean embedding of each ended track, for joining tracklets at close."""
        self.looks.update((t.track, t.embedding) for t in tracks if t.embedding is not None)

    def close(self) -> None:
        boxes = Counter(r.id for r in self.rows)
        kept = [r for r in self.rows if r.id == -1 or boxes[r.id] >= self.min_boxes]
        self.lines = write_mot(self.path, finish_tracks(kept, self.looks, self.max_gap, self.fps))


class VideoOutput:
    """Annotated frames (:func:`annotate`) into a video file (:class:`VideoWriter`);
    ``trail`` > 0 draws each track's last ``trail`` centres."""

    def __init__(self, path: Path, fps: float, trail: int = 0) -> None:
        self._video = VideoWriter(path, fps)
        self.path = self._video.path
        self._trails = Trails(trail) if trail > 0 else None

    @property
    def frames(self) -> int:
        return self._video.frames

    def write(self, result: FrameResult) -> None:
        self._video.write(annotate(result, self._trails))

    def close(self) -> None:
        self._video.close()


class CropWriter:
    """Each detection's crop as ``DIR/<folder>/<source>_f<frame>_<n>.jpg``.

    ``<folder>`` is ``unknown`` for unnamed detections and :func:`safe_name` of the
    identity otherwise; ``DIR/identities.json`` maps every folder to its identity.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        check_outputs(crops=self.folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.saved = 0
        self.folders: dict[str, str | None] = {}

    def folder_of(self, identity: str | None) -> Path:
        """The folder of ``identity``'s crops (None: unknown), made and recorded when new."""
        name = UNKNOWN_FOLDER if identity is None else safe_name(identity, frozenset({UNKNOWN_FOLDER, CROP_MAP_FILE}))
        folder = self.folder / name
        if name not in self.folders:
            make_own_folder(folder)
            self.folders[name] = identity
            payload = json.dumps({"folders": dict(sorted(self.folders.items()))}, indent=2) + "\n"
            write_bytes_atomic(self.folder / CROP_MAP_FILE, payload.encode())
        return folder

    def write(self, result: FrameResult) -> None:
        stem = safe_name(Path(result.source).stem or "source")
        for n, detection in enumerate(result.detections):
            folder = self.folder_of(detection.identity)
            ok, payload = cv2.imencode(".jpg", cv2.cvtColor(detection.crop, cv2.COLOR_RGB2BGR))
            if not ok:
                raise DataError(f"{folder}: cannot encode crop {n} of frame {result.frame}")
            with open_new(folder / f"{stem}_f{result.frame:06d}_{n}.jpg") as handle:
                handle.write(payload.tobytes())
            self.saved += 1

    def close(self) -> None:
        """Nothing is held open: every crop is a complete file once written."""


class QueryOutputs:
    """The outputs a query asked for; use as a context manager so they are always closed.

    ``fps``: kept frames a second (the annotated video's rate); ``max_gap``: the frames a
    track may bridge, in kept frames (the tracker's steps); ``frame_step``: decoded frames
    a kept frame stands for (a source read with ``every``).  The MOT file counts decoded
    frames, so its tracks are joined, filled and smoothed in decoded frames: a bridge of
    ``max_gap`` kept frames spans ``(max_gap + 1) * frame_step - 1`` decoded ones.
    ``trail``: in the video, each track's last this many centres drawn as a line (0: none).
    """

    def __init__(
        self,
        jsonl: Path | None = None,
        video: Path | None = None,
        crops: Path | None = None,
        fps: float = 10.0,
        tracks: Path | None = None,
        mot: Path | None = None,
        min_boxes: int = 1,
        max_gap: int = 0,
        frame_step: int = 1,
        trail: int = 0,
    ) -> None:
        self.jsonl: JsonlWriter | None = None
        self.video: VideoOutput | None = None
        self.crops: CropWriter | None = None
        self.tracks: TracksWriter | None = None
        self.mot: MotWriter | None = None
        try:
            self.video = VideoOutput(video, fps, trail) if video else None
            self.crops = CropWriter(crops) if crops else None
            self.jsonl = JsonlWriter(jsonl) if jsonl else None
            self.tracks = TracksWriter(tracks) if tracks else None
            decoded_gap = (max_gap + 1) * frame_step - 1
            self.mot = MotWriter(mot, min_boxes, decoded_gap, fps * frame_step) if mot else None
        except BaseException:
            self.close()
            raise

    def _writers(self) -> list[JsonlWriter | VideoOutput | CropWriter | TracksWriter | MotWriter]:
        return [w for w in (self.jsonl, self.video, self.crops, self.tracks, self.mot) if w is not None]

    def write(self, result: FrameResult) -> None:
        for writer in self._writers():
            writer.write(result)

    def write_tracks(self, tracks: list[TrackSummary]) -> None:
        """Tracks that ended with the run (end of source, or Ctrl-C)."""
        if self.tracks is not None:
            self.tracks.write_tracks(tracks)
        if self.mot is not None:
            self.mot.write_tracks(tracks)

    def close(self) -> None:
        for writer in self._writers():
            writer.close()

    def __enter__(self) -> QueryOutputs:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _fit(canvas: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Letterbox ``canvas`` into ``size`` (width, height), keeping its aspect ratio."""
    width, height = size
    scale = min(width / canvas.shape[1], height / canvas.shape[0])
    resized = cv2.resize(canvas, (max(1, int(canvas.shape[1] * scale)), max(1, int(canvas.shape[0] * scale))))
    out = np.zeros((height, width, 3), np.uint8)
    y, x = (height - resized.shape[0]) // 2, (width - resized.shape[1]) // 2
    out[y : y + resized.shape[0], x : x + resized.shape[1]] = resized
    return out
