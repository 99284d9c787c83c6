"""Embedding many image files with any Encoder, in batches, skipping unreadable files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from reid.data.io import read_image
from reid.errors import DataError
from reid.models.encoder import Encoder

ProgressFn = Callable[[int, int], None]


@dataclass
class Embedded:
    """Embeddings of the readable files; ``kept`` indexes the input list."""

    features: np.ndarray
    kept: list[int]
    failed: list[tuple[Path, str]] = field(default_factory=list)


def _try_read(path: Path) -> np.ndarray | str:
    try:
        return read_image(path)
    except DataError as exc:
        return str(exc)


def embed_files(
    encoder: Encoder,
    paths: Sequence[Path],
    batch_size: int = 64,
    on_progress: ProgressFn | None = None,
) -> Embedded:
    """Embed image files; unreadable ones are skipped and listed with their reason."""
    features, kept, failed = [], [], []
    # Decoding releases the GIL, so a few threads keep the encoder fed.
    with ThreadPoolExecutor(max_workers=4) as pool:
        for start in range(0, len(paths), batch_size):
            chunk = list(paths[start : start + batch_size])
            images = []
            for offset, result in enumerate(pool.map(_try_read, chunk)):
                if isinstance(result, str):
                    failed.append((Path(chunk[offset]), result))
                else:
                    images.append(result)
                    kept.append(start + offset)
            if images:
                features.append(encoder.embed(images))
            if on_progress:
                on_progress(min(start + batch_size, len(paths)), len(paths))
    matrix = np.concatenate(features) if features else np.zeros((0, encoder.dim), np.float32)
    return Embedded(matrix, kept, failed)
