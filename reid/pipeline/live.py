"""The frame loop on threads: decoding and detection each run on their own thread, joined
by bounded queues, while the caller's thread embeds, tracks and searches.

On two cores decoding (OpenCV, which releases the GIL), detection (OpenCV again) and
embedding (PyTorch, also GIL-free in its kernels) then overlap instead of taking turns.
A file never loses a frame: a full queue makes the thread before it wait.  A live source
(camera, stream) cannot wait, since its frames keep arriving, so a frame that finds the
detector's queue full is dropped and counted (:attr:`FramePipeline.dropped`); what is
answered is then always recent.

Frames come out in the order they were decoded, so results are the same as those of
:func:`reid.pipeline.frame_crops` for a file.  Closing the pipeline (or leaving the
iteration, on Ctrl-C too) stops both threads and releases the source.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from reid.detect import Detector
from reid.errors import ConfigError
from reid.pipeline.frames import FrameCrops, cut_frame
from reid.pipeline.sources import Frame, MediaSource

# Frames held between stages.  Small: a live answer must not lag far behind the camera,
# and every queued frame is a full picture in memory.
QUEUE_DEPTH = 4
# How often a thread waiting on a full or empty queue looks whether it should stop.
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class _End:
    """Put after the last item; ``error`` is what ended the thread before it, if anything."""

    error: BaseException | None = None


class FramePipeline:
    """Iterate to get one :class:`FrameCrops` per kept frame, in decoding order.

    ``timing`` (see :func:`reid.pipeline.stage_timer`) gains the busy seconds of "decode"
    and "detect"; the stages overlap, so their sum may exceed the wall time.  ``align_to``
    and ``weak`` (the detector's weak boxes too) as in :func:`cut_frame`.  ``depth``
    bounds each queue.  Raises, in the iterating thread, what the source or the detector
    raised (DataError for a video with no decodable frame), and ConfigError for a depth
    below 1.
    """

    def __init__(
        self,
        source: MediaSource,
        detector: Detector | None,
        margin: float | None = None,
        timing: dict[str, float] | None = None,
        whole_if_none: bool = False,
        depth: int = QUEUE_DEPTH,
        align_to: tuple[int, int] | None = None,
        weak: bool = False,
    ) -> None:
        if depth < 1:
            raise ConfigError(f"queue depth must be at least 1, got {depth}")
        self.source, self.detector, self.margin = source, detector, margin
        self.whole_if_none, self.align_to, self.weak = whole_if_none, align_to, weak
        self.timing = timing if timing is not None else {"decode": 0.0, "detect": 0.0}
        self.dropped = 0
        self._frames: queue.Queue[Frame | _End] = queue.Queue(depth)
        self._cut: queue.Queue[FrameCrops | _End] = queue.Queue(depth)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._decode, name="reid-decode", daemon=True),
            threading.Thread(target=self._detect, name="reid-detect", daemon=True),
        ]
        self._started = False
        self._ended = False

    def __iter__(self) -> Iterator[FrameCrops]:
        self._start()
        try:
            while True:
                item = self._cut.get()
                if isinstance(item, _End):
                    self._ended = True
                    if item.error is not None:
                        raise item.error
                    return
                yield item
        finally:
            self.close()

    def ready(self, limit: int) -> list[FrameCrops]:
        """Up to ``limit`` frames already cut and waiting, without waiting for more; the
        end of the source stays queued for the iteration to see."""
        taken: list[FrameCrops] = []
        while len(taken) < limit and not self._ended:
            try:
                item = self._cut.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _End):
                # Only this thread reads the queue and the end is the last item, so
                # there is room to put it back for the iteration.
                self._cut.put(item)
                break
            taken.append(item)
        return taken

    @property
    def running(self) -> bool:
        """True while the decoding or the detection thread still runs."""
        return any(thread.is_alive() for thread in self._threads)

    def close(self) -> None:
        """Stop both threads and wait for them; the source is released.  Idempotent."""
        self._stop.set()
        for waiting in (self._frames, self._cut):
            while True:
                try:
                    waiting.get_nowait()
                except queue.Empty:
                    break
        for thread in self._threads:
            if thread.is_alive():
                thread.join()

    def _start(self) -> None:
        if self._started:
            raise ConfigError("a frame pipeline can be iterated once")
        self._started = True
        for thread in self._threads:
            thread.start()

    def _put(self, target: queue.Queue, item: object) -> bool:
        """Put ``item``, waiting while the queue is full; False when told to stop first."""
        while not self._stop.is_set():
            try:
                target.put(item, timeout=POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def _decode(self) -> None:
        end = _End()
        frames = self.source.frames()
        try:
            while not self._stop.is_set():
                tick = time.perf_counter()
                frame = next(frames, None)
                self.timing["decode"] += time.perf_counter() - tick
                if frame is None:
                    break
                if not self.source.live:
                    if not self._put(self._frames, frame):
                        break
                    continue
                try:
                    self._frames.put_nowait(frame)
                except queue.Full:
                    # The detector is behind; a camera's frames will not wait for it.
                    self.dropped += 1
        except BaseException as exc:  # noqa: BLE001 - handed to the iterating thread
            end = _End(exc)
        finally:
            frames.close()
        self._put(self._frames, end)

    def _detect(self) -> None:
        while not self._stop.is_set():
            try:
                item = self._frames.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            if isinstance(item, _End):
                self._put(self._cut, item)
                return
            try:
                tick = time.perf_counter()
                cut = cut_frame(item, self.detector, self.margin, self.whole_if_none, self.align_to, self.weak)
                self.timing["detect"] += time.perf_counter() - tick
            except BaseException as exc:  # noqa: BLE001 - handed to the iterating thread
                self._put(self._cut, _End(exc))
                return
            if not self._put(self._cut, cut):
                return
