"""Watches: a tracked query (:class:`reid.pipeline.QueryRun`) on a video source, run on its
own thread against a gallery, whose events clients follow as Server-Sent Events.

An event is made when a track ends (``ended``: its identity or unknown, distance, frames,
times and largest box) and when a track's decision changes while it lasts (``decided``);
a watch that ends (its source ends, it is stopped, or it fails) adds a last ``done`` event
with the run's totals.  Events are kept in memory (the last :data:`KEPT_EVENTS`) with
sequence numbers, so a client that reconnects with ``Last-Event-ID`` misses nothing kept.

Only sources the settings allow are opened: files under :attr:`ServeConfig.watch_files`,
camera indexes in :attr:`ServeConfig.watch_cameras`, stream URLs that one of
:attr:`ServeConfig.watch_urls` admits, parsed and compared by scheme, host, port and path
(:class:`reid.serve.config.StreamUrl`; never as strings).  A watch shows its source as a
client may read it: a file relative to its allowed folder, a URL without its password;
never the server's own path.  A watch lives in the process that started it.
"""

from __future__ import annotations

import itertools
import math
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reid.errors import ConfigError, ReidError
from reid.gallery import open_gallery
from reid.pipeline import QueryConfig, QueryRun, TrackSummary, open_source
from reid.serve.config import ServeConfig, StreamUrl
from reid.serve.redact import hide_paths

KEPT_EVENTS = 10_000
# How often a running watch catches up with what was enrolled or deleted since it started.
REFRESH_SECONDS = 2.0
# How long a paused watch sleeps between looks at whether it may go on or must stop.
PAUSE_POLL = 0.1


def check_source(config: ServeConfig, source: str) -> tuple[str, str]:
    """What to open for ``source`` when the settings allow watching it, and how a client is
    shown it (a file relative to its allowed folder, a URL without user and password);
    ConfigError naming the rule otherwise."""
    text = str(source).strip()
    if text.isascii() and text.isdigit() and len(text) <= 6:
        if int(text) in config.watch_cameras:
            return text, text
        raise ConfigError(f"camera {text[:20]} is not among the cameras the server may watch (watch_cameras)")
    if "://" in text:
        url = StreamUrl.parse(text)
        if any(StreamUrl.parse(entry).admits(url) for entry in config.watch_urls):
            return text, url.shown
        raise ConfigError("that stream URL is not one the server may watch (watch_urls: scheme, host, port and path)")
    path = Path(text)
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ConfigError("no such file among the videos the server may watch (watch_files)") from None
    for allowed in config.watch_files:
        root = Path(allowed).resolve()
        if real == root or (root.is_dir() and root in real.parents):
            if not real.is_file():
                raise ConfigError("a watch source must be a video file, a camera or a stream")
            shown = Path(Path(allowed).name or root.name) / real.relative_to(root) if real != root else Path(real.name)
            return str(real), shown.as_posix()
    raise ConfigError("no such file among the videos the server may watch (watch_files)")


@dataclass
class Watch:
    """One running (or ended) watch and its events: ``source`` as a client is shown it,
    ``opened`` what the server opens (never shown), ``gallery_uid`` the id of the gallery
    it runs against (:attr:`reid.gallery.GalleryBackend.uid`)."""

    id: str
    gallery: str
    source: str
    opened: str = ""
    gallery_uid: str | None = None
    state: str = "starting"
    error: str | None = None
    frames: int = 0
    fps: float = 0.0
    dropped: int = 0
    started: float = field(default_factory=time.time)
    events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=KEPT_EVENTS))
    changed: threading.Condition = field(default_factory=threading.Condition)
    _seq: Any = field(default_factory=lambda: itertools.count(1))
    _pause: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id, "gallery": self.gallery, "source": self.source, "state": self.state,
            "error": self.error, "frames": self.frames, "fps": round(self.fps, 3), "dropped": self.dropped,
            "events": self.events[-1]["seq"] if self.events else 0,
        }  # fmt: skip

    def add(self, kind: str, data: dict[str, Any]) -> None:
        with self.changed:
            self.events.append({"seq": next(self._seq), "event": kind, "data": data})
            self.changed.notify_all()

    def since(self, seq: int) -> list[dict[str, Any]]:
        with self.changed:
            return [e for e in self.events if e["seq"] > seq]

    @property
    def over(self) -> bool:
        return self.state in ("done", "stopped", "failed")


class Watches:
    """The watches of one process; each runs on its own thread with its own gallery handle."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self._watches: dict[str, Watch] = {}
        self._lock = threading.Lock()

    def start(
        self, gallery: str, location: str | Path, uid: str, encoder: Any, source: str, settings: Any, max_frames: int | None
    ) -> Watch:
        """Start watching ``source`` (checked against the settings) against the gallery at
        ``location`` (whose id is ``uid``); raises ConfigError for a source not allowed, or
        one past the watch limit."""
        opened, shown = check_source(self.config, source)
        with self._lock:
            running = [w for w in self._watches.values() if not w.over]
            if len(running) >= self.config.max_watches:
                raise ConfigError(f"{len(running)} watches are running; at most {self.config.max_watches}")
            watch = Watch(secrets.token_hex(6), gallery, shown, opened, uid)
            self._watches[watch.id] = watch
        config = QueryConfig(
            detect=settings.detect, detector=settings.detector, no_face=settings.no_face, threshold=settings.threshold,
            track=True,
        )
        thread = threading.Thread(
            target=self._run, args=(watch, location, encoder, config, max_frames), name=f"watch-{watch.id}", daemon=True
        )
        thread.start()
        return watch

    def get(self, watch_id: str) -> Watch | None:
        with self._lock:
            return self._watches.get(watch_id)

    def list(self, gallery: str | None = None) -> list[Watch]:
        with self._lock:
            return [w for w in self._watches.values() if gallery is None or w.gallery == gallery]

    def pause(self, watch: Watch, paused: bool) -> None:
        if paused:
            watch._pause.set()
        else:
            watch._pause.clear()
        if not watch.over:
            watch.state = "paused" if paused else "running"

    def stop(self, watch: Watch) -> None:
        watch._stop.set()
        watch._pause.clear()

    def stop_all(self) -> None:
        for watch in self.list():
            self.stop(watch)

    def _run(self, watch: Watch, location: str | Path, encoder: Any, config: QueryConfig, max_frames: int | None) -> None:
        decided: dict[int, str | None] = {}
        run: QueryRun | None = None
        try:
            with open_gallery(location, lock_timeout=self.config.lock_timeout) as gallery:
                run = QueryRun(gallery, encoder, open_source(watch.opened, max_frames=max_frames), config)
                watch.state = "paused" if watch._pause.is_set() else "running"
                refreshed = time.monotonic()
                for result in run:
                    if time.monotonic() - refreshed >= REFRESH_SECONDS:
                        # Between frames the run is not searching: its gallery may catch up.
                        gallery.refresh()
                        refreshed = time.monotonic()
                    for summary in result.ended_tracks:
                        watch.add("ended", _track(summary, watch))
                        decided.pop(summary.track, None)
                    for detection in result.detections:
                        track = detection.track
                        if track is not None and decided.get(track, "") != detection.identity:
                            if track in decided:
                                watch.add("decided", _decision(result, detection))
                            decided[track] = detection.identity
                    watch.frames, watch.fps, watch.dropped = run.stats.frames, run.stats.fps, run.stats.dropped
                    while watch._pause.is_set() and not watch._stop.is_set():
                        time.sleep(PAUSE_POLL)
                    if watch._stop.is_set():
                        break
                for summary in run.finish_tracks():
                    watch.add("ended", _track(summary, watch))
            watch.state = "stopped" if watch._stop.is_set() else "done"
        except ReidError as exc:
            watch.state, watch.error = "failed", _said(watch, str(exc))
        except Exception as exc:  # noqa: BLE001 - a watch's thread must end with its state said, whatever ended it
            watch.state, watch.error = "failed", _said(watch, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        finally:
            if run is not None:
                watch.frames, watch.fps, watch.dropped = run.stats.frames, run.stats.fps, run.stats.dropped
            watch.add("done", watch.summary())


def _said(watch: Watch, line: str) -> str:
    """A line about ``watch`` as its clients may read it: its source as shown, no server path."""
    return hide_paths(line, {watch.opened: watch.source} if watch.opened else {})


def _track(summary: TrackSummary, watch: Watch) -> dict[str, Any]:
    data = summary.to_dict()
    if "source" in data:
        data["source"] = watch.source
    data["decision"] = "unknown" if summary.identity is None else "known"
    return data


def _decision(result: Any, detection: Any) -> dict[str, Any]:
    return {
        "track": detection.track,
        "frame": result.frame,
        "time": None if result.time is None else round(result.time, 3),
        "identity": detection.identity,
        "decision": "unknown" if detection.identity is None else "known",
        "distance": round(float(detection.distance), 6) if math.isfinite(detection.distance) else None,
        "box": list(detection.box),
    }
