"""Decoding the training images once into one uint8 tensor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Lock
from typing import TYPE_CHECKING

import torch

from reid.data import ImageRecord, read_image
from reid.data.transforms import resize_chw
from reid.errors import DataError

if TYPE_CHECKING:
    from reid.pipeline.subject import SubjectRule

# OpenCV decodes and resizes outside the GIL, so the threads run in parallel; four is a
# modest share of a machine's cores because under torchrun every process on the machine
# decodes its own copy of the set at the same time.
DECODE_THREADS = 4

# How many images between two progress calls.
PROGRESS_EVERY = 256


def load_images(
    records: Sequence[ImageRecord],
    size: tuple[int, int],
    on_progress: Callable[[int, int], None] | None = None,
    subject: SubjectRule | None = None,
) -> tuple[torch.Tensor, list[int], list[tuple[Path, str]], int]:
    """Decode and resize every training image once.

    Returns a uint8 tensor of shape (N, 3, H, W) with ``size`` = (H, W) for the N readable
    images, the indices into ``records`` of those images, (path, reason) for each image
    skipped, so one bad file does not stop a training run, and how many photos held no
    subject for ``subject`` (skipped or taken whole). ``on_progress(done, total)`` is
    called every :data:`PROGRESS_EVERY` images.  ``subject`` (the crop rule of
    :mod:`reid.pipeline.subject`) cuts each photo to its subject first, once, here: for
    faces the aligned chip; a photo in which it finds nothing is skipped with the reason
    "no face found", taken whole, or stops the run, as its ``none_found`` says.

    Raises:
        DataError: not one image could be read, or a photo holds no subject and the
            rule's ``none_found`` is "error".
    """
    # One detector serves every thread: OpenCV's detectors keep per-call state.
    detecting = Lock()

    unfound = 0

    def read(record: ImageRecord) -> torch.Tensor | str:
        nonlocal unfound
        try:
            image = read_image(record.path)
        except DataError as exc:
            return str(exc)
        if subject is not None:
            with detecting:
                found = subject.apply(image, record.path)
                unfound += not found.used
            if found.skipped:
                return f"{record.path}: {found.note()}"
            image = found.crops[0]
        return resize_chw(image, size)

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
    return torch.stack(images), kept, failed, unfound
