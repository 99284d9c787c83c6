"""The bounded worker pool inference runs in: ``threads`` at work and at most ``queue``
waiting; a request beyond that is refused at once (503 with ``Retry-After``) instead of
waiting without bound."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class PoolFull(Exception):
    """Every thread is busy and the queue is full."""


class WorkerPool:
    """Runs blocking calls on ``threads`` threads for the event loop; at most ``threads +
    queue`` calls are in flight.  :attr:`depth` is how many are (running or waiting)."""

    def __init__(self, threads: int, queue: int) -> None:
        self.threads, self.queue = threads, queue
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="reid-serve")
        self._in_flight = 0
        # One event loop counts calls in and out in a server; the lock keeps the count
        # right where several loops share a pool (test clients, embedding applications).
        self._count_lock = threading.Lock()

    @property
    def depth(self) -> int:
        return self._in_flight

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` on a pool thread; raises PoolFull when the pool is full."""
        with self._count_lock:
            if self._in_flight >= self.threads + self.queue:
                raise PoolFull()
            self._in_flight += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, functools.partial(function, *args, **kwargs))
        finally:
            with self._count_lock:
                self._in_flight -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
