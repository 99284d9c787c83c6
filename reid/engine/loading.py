"""Decoding the training images once into one uint8 tensor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from reid.data import ImageRecord, read_image
from reid.data.transforms import resize_chw
from reid.errors import DataError

# OpenCV decodes and resizes outside the GIL, so the threads run in parallel; four is a
# modest share of a machine's cores because under torchrun every process on the machine
# decodes its own copy of the set at the same time.
DECODE_THREADS = 4

# How many images between two progress calls.
PROGRESS_EVERY = 256


def load_images(
    records: Sequence[ImageRecord], size: tuple[int, int], on_progress: Callable[[int, int], None] | None = None
) -> tuple[torch.Tensor, list[int], list[tuple[Path, str]]]:
    """Decode and resize every training image once.

    Returns a uint8 tensor of shape (N, 3, H, W) with ``size`` = (H, W) for the N readable
    images, the indices into ``records`` of those images, and (path, reason) for each image
    skipped, so one bad file does not stop a training run. ``on_progress(done, total)`` is
    called every :data:`PROGRESS_EVERY` images.

    Raises:
        DataError: not one image could be read.
    """
    def read(record: ImageRecord) -> torch.Tensor | str:
        try:
            return resize_chw(read_image(record.path), size)
        except DataError as exc:
            return str(exc)

    images, kept, failed = [], [], []
    with ThreadPoolExecutor(max_workers=DECODE_THREADS) as pool:
        for i, result in enumerate(pool.map(read, records)):
            if isinstance(result, str):
                failed.append((records[i].path, result))
            else:
                images.append(result)
                kept.append(i)
            if on_progress and (i + 1) % PROGRESS_EVERY == 0:
                on_progress(i + 1, len(records))
    if not images:
        raise DataError(f"no readable training image among {len(records)} files")
    return torch.stack(images), kept, failed
