"""Evaluate an encoder on a dataset's query/gallery split (Market-1501 protocol)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from reid.data.records import ImageRecord, ReidDataset
from reid.engine.inference import embed_files
from reid.errors import DataError
from reid.evaluation import RankingResult, evaluate_features
from reid.models.encoder import Encoder


def evaluate_model(
    encoder: Encoder,
    dataset: ReidDataset,
    batch_size: int = 128,
    on_progress: Callable[[int, int], None] | None = None,
    rerank: bool = False,
) -> RankingResult:
    """Embed query and gallery, then rank; unreadable images are left out of both."""
    if not dataset.query or not dataset.gallery:
        raise DataError(f"{dataset.root}: dataset has no query/gallery split to evaluate on")
    records: list[ImageRecord] = dataset.query + dataset.gallery
    embedded = embed_files(encoder, [r.path for r in records], batch_size=batch_size, on_progress=on_progress)
    kept = np.asarray(embedded.kept, dtype=np.int64)
    is_query = kept < len(dataset.query)
    pids = np.asarray([records[i].pid for i in kept])
    camids = np.asarray([records[i].camid for i in kept])
    return evaluate_features(
        embedded.features[is_query],
        embedded.features[~is_query],
        pids[is_query],
        pids[~is_query],
        camids[is_query],
        camids[~is_query],
        metric="euclidean",
        rerank=rerank,
    )
