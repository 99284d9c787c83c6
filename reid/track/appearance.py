"""Appearance for a detection file: each box of a MOTChallenge detection file cut from its
video frame and embedded by a Re-ID encoder, so that published detections are tracked
with the appearance term (DeepSORT, Wojke et al. 2017; BoT-SORT, Aharon et al. 2022)
as well as their boxes.

MOTChallenge counts frames from 1: the boxes of frame f are cut from the f-th decoded
frame of the video (0-based frame f - 1).  Frames are decoded once, in order, with
:func:`reid.pipeline.sources.open_source`; boxes are cut as ``reid query`` cuts its
detections (:func:`reid.detect.crop_detections`, the person margin) and embedded in
batches by :func:`reid.models.embed_images`.

>>> appearance = VideoAppearance(Path("vtest.avi"), load_encoder("models/demo"))
>>> embeddings = appearance.embed(read_mot(Path("det.txt")))   # (N, D) float32
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reid.detect import Detection, crop_detections
from reid.errors import DataError
from reid.models import Encoder, embed_images
from reid.pipeline.sources import open_source
from reid.track.mot import MotRow, pixel_box

# Crops embedded together: large enough that a batch amortizes the network's overhead,
# small enough that a few frames' crops at the encoder's input size stay in memory.
EMBED_BATCH = 64


@dataclass
class VideoAppearance:
    """Embeds the boxes of detection rows cut from ``video`` with ``encoder``.

    ``embedded``, ``empty`` and ``seconds`` say, after :meth:`embed`, how many boxes got an
    embedding, how many lay outside the frame (no pixels to embed), and the seconds spent
    decoding, cutting and embedding.
    """

    video: Path
    encoder: Encoder
    batch: int = EMBED_BATCH
    embedded: int = 0
    empty: int = 0
    seconds: float = 0.0

    def embed(self, rows: list[MotRow]) -> np.ndarray:
        """(len(rows), D) float32: row i's unit embedding, or zeros where the box holds no
        pixel of its frame (such a row is tracked on its box alone).

        Raises:
            DataError: the video cannot be decoded, or the detections name a frame past
                its last (one line naming both files).
            ModelError: the encoder returned a wrong shape or non-finite values.
        """
        tick = time.perf_counter()
        features = np.zeros((len(rows), self.encoder.dim), dtype=np.float32)
        positions: dict[int, list[int]] = {}
        for position, row in enumerate(rows):
            positions.setdefault(row.frame, []).append(position)
        last = max(positions, default=0)
        pending_crops: list[np.ndarray] = []
        pending_rows: list[int] = []
        decoded = 0
        if last:
            decoding = open_source(self.video).frames()
            try:
                for frame in decoding:
                    decoded = frame.index + 1
                    here = positions.get(decoded, [])
                    detections = [Detection(pixel_box(rows[p].box), rows[p].score) for p in here]
                    for p, piece in zip(here, crop_detections(frame.image, detections), strict=True):
                        if piece.size:
                            pending_crops.append(piece)
                            pending_rows.append(p)
                        else:
                            self.empty += 1
                    if len(pending_crops) >= self.batch:
                        self._flush(pending_crops, pending_rows, features)
                    if decoded >= last:
                        break
            finally:
                decoding.close()
        if decoded < last:
            raise DataError(
                f"{self.video}: the detections reach frame {last}, the video has {decoded} frames "
                "(MOT frame f is decoded frame f - 1)"
            )
        self._flush(pending_crops, pending_rows, features)
        self.seconds += time.perf_counter() - tick
        return features

    def _flush(self, crops: list[np.ndarray], rows: list[int], features: np.ndarray) -> None:
        """Embed the pending crops into their rows of ``features`` and empty the lists."""
        if not crops:
            return
        names = [f"{self.video} box {r + 1}" for r in rows]
        result = embed_images(self.encoder, crops, names, "whole")
        for kept, feature in zip(result.kept, result.features, strict=True):
            features[rows[kept]] = feature
        self.embedded += len(result.kept)
        crops.clear()
        rows.clear()
