"""What clients can hold of a server, bounded: memory (:func:`memory_budget`),
connections, the time to send a request, and the log lines their failures write.

uvicorn's HTTP protocol sets no deadline on a request's head or body (a keep-alive timer
that every byte received restarts), so a client sending a header line every few seconds
holds its connection, and its file descriptor, for ever; a thousand such clients take
every descriptor, and then each failed ``accept`` logs a traceback.  Here:

- :class:`DeadlineProtocol` closes a connection whose request head is not complete
  :attr:`~DeadlineProtocol.head_seconds` after the connection opened (or after the last
  answer on it), or whose body is not complete :attr:`~DeadlineProtocol.body_seconds`
  after its head; a connection beyond :attr:`~DeadlineProtocol.max_connections` makes
  room by closing the one that has waited longest for a request head (an idle keep-alive
  or a slow client: a thousand idle connections would otherwise keep every new client
  out), and is closed at once only when none waits for a head;
- :func:`raise_open_file_limit` raises the process's descriptor limit to what that many
  connections and the galleries' handles need (and the cap is lower where it cannot);
- :class:`OneLinePerKind` writes each kind of warning or error once per interval, as one
  line (a traceback becomes its last line), with a count of those it held back.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from reid.data.io import ImageLimits
from reid.pipeline.enrol import EMBED_BYTES
from reid.serve.config import ServeConfig

log = logging.getLogger("reid.serve")

# Descriptors kept for what is not a client connection: galleries' handles (a database
# file each, HANDLES_PER_THREAD per pool thread), models, logs, the keys file.
RESERVED_FILES = 512


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with deadlines on reading a request and a cap on connections
    (per process; subclass to change them)."""

    # A request head is a few hundred bytes: a client has this long to send it.
    head_seconds: float = 10.0
    # A body of max_body_bytes (64 MiB) at 1 MB/s.
    body_seconds: float = 120.0
    max_connections: int = 1000

    _deadline: asyncio.TimerHandle | None = None
    _waiting_for: tuple[str, int] | None = None
    _since: float = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        most = min(self.max_connections, connection_budget())
        open_ones = [c for c in self.connections if not c.transport.is_closing()]
        if len(open_ones) > most:
            waiting = [c for c in open_ones if c is not self and c.waits_for_head()]
            if not waiting:
                log.warning("connection refused: %d connections open, the most this server keeps", most)
                self.transport.close()
                return
            log.warning("connection closed: %d connections open, the most this server keeps; "
                        "the one waiting longest for a request head makes room", most)  # fmt: skip
            min(waiting, key=lambda c: c._since).transport.close()
        self._watch()

    def waits_for_head(self) -> bool:
        """True while this connection waits for a request head (none has come, or its last
        answer is sent) and is not closing."""
        return self._deadline is not None and self._waiting_for is not None and self._waiting_for[0] == "head"

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def _watch(self) -> None:
        """Set the deadline of what the connection waits for from its client: a head, the
        rest of a body, or nothing (the request is in, an answer is being sent)."""
        if self.transport.is_closing():
            self._cancel()
            return
        state = self.conn.their_state
        wanted = {h11.IDLE: ("head", self.head_seconds), h11.SEND_BODY: ("body", self.body_seconds)}.get(state)
        if wanted is None:
            self._cancel()
            return
        part, seconds = wanted
        if self._deadline is not None and self._waiting_for == (part, id(self.cycle)):
            return  # the same wait goes on: its deadline stands, whatever bytes came
        self._cancel()
        self._waiting_for = (part, id(self.cycle))
        self._since = self.loop.time()
        self._deadline = self.loop.call_later(seconds, self._expired, part, seconds)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, part: str, seconds: float) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            log.warning("connection closed: the request %s was not complete within %g s", part, seconds)
            self.transport.close()


def connection_budget() -> int:
    """The client connections this process's limit of open files leaves room for, beside
    :data:`RESERVED_FILES` (at least 16)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 30 if soft == resource.RLIM_INFINITY else max(16, soft - RESERVED_FILES)


def raise_open_file_limit(connections: int = DeadlineProtocol.max_connections) -> int:
    """Raise this process's soft limit of open files, up to its hard limit, to room for
    ``connections`` (:func:`connection_budget`); the connections it now allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + RESERVED_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
    return min(connections, connection_budget())


# What one request with a body holds at most, in bodies of max_body_bytes: the body as
# received, and for JSON its base64 text and the decoded bytes (multipart files past 1 MiB
# wait on disk, and are then read once).
BODY_COPIES = 3
# What a pool thread holds at most, beside the photo it decodes: the crops of a batch that
# wait to be embedded, and a model's working memory on a batch.
THREAD_WORKING = EMBED_BYTES + (256 << 20)
# Bytes a decode holds at its peak per pixel it may decode: the RGB image returned (3) and
# the image OpenCV decodes into first (3): a search of a 120 MP photo peaks 696 MiB over
# idle (benchmarks/bench_serve_memory.py); wider samples are counted as more pixels, see
# reid.data.io.Declared.
DECODE_BYTES_PER_PIXEL = 6


def memory_budget(config: ServeConfig, limits: ImageLimits) -> int:
    """The most memory (bytes) the requests of one server process hold above its idle
    memory (models loaded, no request), by design: ``threads`` photos decoded at once, each
    within ``limits.max_pixels``, with their threads' working memory, and ``threads +
    queue`` request bodies of at most ``max_body_bytes`` (a request beyond those is a 503,
    :class:`reid.serve.middleware.BodyLimit`).  A detector's working memory on a photo is not
    counted (OpenCV's detectors work on a resized copy)."""
    per_thread = DECODE_BYTES_PER_PIXEL * limits.max_pixels + THREAD_WORKING
    return config.threads * per_thread + (config.threads + config.queue) * BODY_COPIES * config.max_body_bytes


class OneLinePerKind(logging.Filter):
    """A log filter: each kind of warning or error (logger, level and message template, or
    the exception's type) is written at most once per ``interval`` seconds, as one line; the
    next one written says how many like it were held back.  A traceback becomes one line
    (the exception's type and message).  Lines below WARNING (one per request) all pass."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval, self.clock = interval, clock
        self._last: dict[tuple[str, int, str], float] = {}
        self._held: dict[tuple[str, int, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        error = record.exc_info[1] if record.exc_info else None
        kind = (record.name, record.levelno, type(error).__name__ if error is not None else str(record.msg))
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        if error is not None:
            record.msg = f"{record.getMessage()}: {type(error).__name__}: {' '.join(str(error).split())[:300]}"
            record.args = ()
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        if held:
            record.msg = f"{record.getMessage()} (and {held} more like it in the last {self.interval:g} s)"
            record.args = ()
        return True
