"""What the query stages share: their names, and how many threads the encoder may use.

Embedding runs with one intra-op thread by default.  PyTorch's OpenMP workers meet at a
barrier after every operator, so when another stage (the detector, the decoder) or another
process holds one of the cores, every layer waits for the descheduled worker and a
ResNet-18 at 64x32 embeds several times slower than on one thread (docs/query.md has the
figures).  Throughput comes from batching crops across frames instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from reid.pipeline.configs import EMBED_THREADS as EMBED_THREADS

STAGES = ("decode", "detect", "embed", "track", "search")


def stage_timer() -> dict[str, float]:
    """Seconds spent in each stage, all at zero."""
    return dict.fromkeys(STAGES, 0.0)


@contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """PyTorch's intra-op thread count inside the block (None: leave it), restored after."""
    if threads is None or threads == torch.get_num_threads():
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
