"""Where frames come from: an image, a folder or glob of images, a video file, a camera, a stream.

Every source yields :class:`Frame` objects (RGB uint8), honours ``every`` (keep one frame
in N) and ``max_frames`` (stop after N kept frames), and releases its device or file when
the iteration ends, however it ends.
"""

from __future__ import annotations

import glob as globbing
import math
import socket
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from reid.data.io import MAX_PIXELS_ENV, ImageLimits, is_image_file, list_media, read_image, sniff_kind
from reid.errors import ConfigValueError, DataError
from reid.pipeline.configs import EVERY_FRAME, Every as Every, MaxFrames as MaxFrames
from reid.text import whole_number

GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Frame:
    """One picture to search: a video frame or an image file.

    ``index`` is the frame number in the video (or the image's position in the folder);
    ``time`` is seconds from the start of a video or stream, None for image files.
    """

    source: str
    index: int
    time: float | None
    image: np.ndarray


@dataclass
class MediaSource:
    """A resolved source; iterate :meth:`frames` once.

    ``kind`` is "images", "video", "camera" or "stream"; ``live`` sources (cameras,
    streams) have no end and want each frame answered at once rather than batched.
    """

    spec: str
    kind: str
    paths: list[Path] = field(default_factory=list)
    every: int = 1
    max_frames: int | None = None
    fps: float | None = None
    total_frames: int | None = None
    unreadable: list[tuple[str, str]] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.kind in ("camera", "stream")

    @property
    def expected_frames(self) -> int | None:
        """How many frames :meth:`frames` will yield, when known in advance."""
        if self.total_frames is None:
            return self.max_frames
        kept = (self.total_frames + self.every - 1) // self.every
        return kept if self.max_frames is None else min(kept, self.max_frames)

    def frames(self) -> Iterator[Frame]:
        if self.kind == "images":
            return self._image_frames()
        return self._capture_frames()

    def _image_frames(self) -> Iterator[Frame]:
        kept = 0
        limits = ImageLimits.from_env()
        for position, path in enumerate(self.paths):
            if position % self.every:
                continue
            if self.max_frames is not None and kept >= self.max_frames:
                return
            try:
                image = read_image(path, limits)
            except DataError as exc:
                # A batch job skips and counts bad images instead of dying on the first.
                self.unreadable.append((str(path), str(exc)))
                continue
            kept += 1
            yield Frame(str(path), position, None, image)

    @property
    def ends(self) -> bool:
        """True when the source has an end of its own (files, ``file://`` streams); a
        camera or a network stream that stops yielding frames was lost."""
        return self.kind in ("images", "video") or self.spec.lower().startswith("file://")

    def _capture_frames(self) -> Iterator[Frame]:
        """Frames of a video, camera or stream.

        A video frame's ``time`` is the container's timestamp of that frame
        (``CAP_PROP_POS_MSEC``: right for variable frame rates, where frame / fps drifts
        by seconds), else frame / fps; a live frame's is seconds since the source opened.

        Raises:
            DataError: nothing decodable came; or, after the frames it gave, a camera or
                network stream stopped (lost mid-run), naming it and how many came.
        """
        capture = _open_capture(self.spec, self.kind)
        limits = ImageLimits.from_env()
        start = time.monotonic()
        kept, index = 0, -1
        ended = False
        try:
            while self.max_frames is None or kept < self.max_frames:
                index += 1
                # grab() without retrieve() skips the colour conversion of dropped frames.
                if not capture.grab():
                    ended = True
                    break
                if index % self.every:
                    continue
                ok, bgr = capture.retrieve()
                if not ok or bgr is None or bgr.size == 0:
                    ended = True
                    break
                # A stream may change its frame size after the header said another.
                check_frame_size(self.spec, bgr.shape[1], bgr.shape[0], limits)
                if self.kind == "video":
                    stamp: float | None = container_time(capture, index, self.fps)
                else:
                    stamp = time.monotonic() - start
                kept += 1
                yield Frame(self.spec, index, stamp, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
        finally:
            capture.release()
        if kept == 0:
            raise DataError(f"{self.spec}: the {self.kind} yielded no decodable frame")
        if ended and not self.ends:
            raise DataError(
                f"{self.spec}: the {self.kind} was lost after {kept} frames (no frame came); what was answered is kept"
            )


def container_time(capture: cv2.VideoCapture, index: int, fps: float | None) -> float | None:
    """Seconds from the start of the video to the frame just grabbed: the container's
    timestamp (``CAP_PROP_POS_MSEC``) when the backend gives one, else ``index / fps``
    (None without a frame rate)."""
    msec = capture.get(cv2.CAP_PROP_POS_MSEC)
    if math.isfinite(msec) and (msec > 0 or index == 0):
        return msec / 1000.0
    return index / fps if fps else None


# Ports of the stream schemes when the address gives none.
DEFAULT_PORTS = {"rtsp": 554, "rtsps": 322, "rtmp": 1935, "http": 80, "https": 443}
PROBE_SECONDS = 5.0


def network_problem(url: str, timeout: float = PROBE_SECONDS) -> str | None:
    """What stops a TCP connection to a stream address, in words ("connection refused by
    cam.local:554", "the host name cam.local does not resolve", ...); None when it
    connects, or the address is not a network stream."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return "the address has an invalid port"
    if not parts.hostname or port is None:
        return None
    where = f"{parts.hostname}:{port}"
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return None
    except socket.gaierror:
        return f"the host name {parts.hostname} does not resolve"
    except ConnectionRefusedError:
        return f"connection refused by {where} (nothing listens there)"
    except TimeoutError:
        return f"no answer from {where} within {timeout:.0f} s"
    except OSError as exc:
        return f"cannot connect to {where} ({exc.strerror or exc.__class__.__name__})"


def _open_capture(spec: str, kind: str) -> cv2.VideoCapture:
    target: int | str = int(spec) if kind == "camera" else spec
    capture = cv2.VideoCapture(target)
    if not capture.isOpened():
        capture.release()
        if kind == "stream":
            problem = network_problem(spec)
            if problem is not None:
                raise DataError(f"{spec}: cannot open stream: {problem}")
            raise DataError(f"{spec}: cannot open stream (it connects, but OpenCV {cv2.__version__} could not read a video from it)")
        what = {"camera": "camera", "video": "video"}[kind]
        raise DataError(f"{spec}: cannot open {what} (OpenCV {cv2.__version__} found no decoder or device)")
    try:
        declared = [capture.get(cv2.CAP_PROP_FRAME_WIDTH), capture.get(cv2.CAP_PROP_FRAME_HEIGHT)]
        if all(math.isfinite(side) and side > 0 for side in declared):
            check_frame_size(spec, int(declared[0]), int(declared[1]), ImageLimits.from_env())
    except DataError:
        capture.release()
        raise
    return capture


def check_frame_size(spec: str, width: int, height: int, limits: ImageLimits) -> None:
    """DataError naming ``spec`` when its frames (as its container declares them, before the
    first is decoded, or as one came) are over the image pixel limit: a frame costs what an
    image of its size does."""
    if width * height > limits.max_pixels:
        raise DataError(
            f"{spec}: frames of {width} x {height} pixels, over the limit of {limits.max_pixels} ({MAX_PIXELS_ENV})"
        )


# The most frames a second and frames in all a container's header is believed for.
MAX_FPS, MAX_FRAME_COUNT = 10_000.0, 10**12


def open_source(spec: str | Path, every: int = EVERY_FRAME, max_frames: int | None = None) -> MediaSource:
    """Resolve ``spec``: a camera index ("0"), a URL ("rtsp://..."), a glob, a folder, an image or a video."""
    if every < 1:
        raise ConfigValueError("every", f"must be at least 1, got {every}", sep=" ")
    if max_frames is not None and max_frames < 1:
        raise ConfigValueError("max_frames", f"must be at least 1, got {max_frames}", sep=" ")
    text = str(spec)
    options = {"every": every, "max_frames": max_frames}
    if whole_number(text, 0) is not None:
        return MediaSource(text, "camera", **options)
    if "://" in text:
        return MediaSource(text, "stream", **options)
    path = Path(text)
    if GLOB_CHARS & set(text) and not path.exists():
        found = sorted(Path(p) for p in globbing.glob(text, recursive=True))
        paths = [p for p in found if is_image_file(p)]
        if not paths:
            raise DataError(f"{text}: no images match this pattern")
        skipped = [(str(p), "not an image file") for p in found if p not in paths and not p.is_dir()]
        return MediaSource(text, "images", paths, unreadable=skipped, **options)
    if path.is_dir():
        listing = list_media(path)
        if not listing.files:
            raise DataError(f"{path}: folder holds no images ({len(listing.skipped)} other entries)")
        skipped = [(str(p), reason) for p, reason in listing.skipped]
        return MediaSource(text, "images", listing.files, unreadable=skipped, **options)
    if not path.exists():
        raise DataError(f"{path}: no such file, folder or camera")
    if sniff_kind(path) == "image":
        return MediaSource(text, "images", [path], **options)
    return _video_source(path, **options)


def _video_source(path: Path, every: int, max_frames: int | None) -> MediaSource:
    capture = cv2.VideoCapture(str(path))
    try:
        if not capture.isOpened():
            raise DataError(f"{path}: not a readable image or video (OpenCV {cv2.__version__} cannot decode it)")
        fps = capture.get(cv2.CAP_PROP_FPS)
        count = capture.get(cv2.CAP_PROP_FRAME_COUNT)
    finally:
        capture.release()
    # A container's header may say anything: NaN, infinity, a count no video has.
    return MediaSource(
        str(path),
        "video",
        every=every,
        max_frames=max_frames,
        fps=fps if math.isfinite(fps) and 0 < fps <= MAX_FPS else None,
        total_frames=int(count) if math.isfinite(count) and 0 < count <= MAX_FRAME_COUNT else None,
    )
