"""``--detector yunet``: faces and five landmarks from YuNet (libfacedetection, BSD-3-Clause),
through the ``yuface`` wheel (``reid-toolkit[faces]``; no dependencies, no model download).

YuNet runs on one OpenMP thread (see :meth:`YuNetDetector.detect`).  It takes BGR images
and is built for inputs up to 960 pixels a side; larger images are
shrunk to fit first and the boxes and landmarks scaled back.  Scores are its confidence
(0..1).  Landmarks come in :data:`reid.detect.align.FACE_TEMPLATE_112`'s order.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
from threadpoolctl import ThreadpoolController

from reid.detect.base import Detection, clipped_detection
# The settings live where the command line reads them without this detector; named here too.
from reid.detect.configs import YuNetConfig as YuNetConfig
from reid.errors import ModelError

FACES_EXTRA = 'pip install "reid-toolkit[faces]"'
# yuface warns about, and detects worse in, images larger than this on a side.
MAX_SIDE = 960


def import_yuface() -> Any:
    """The yuface module, or a one-line error naming the extra that brings it."""
    try:
        import yuface
    except ImportError:
        raise ModelError(f"the yunet detector needs the yuface package, which is not installed: {FACES_EXTRA}") from None
    return yuface


class YuNetDetector:
    """YuNet (Wu et al. 2023) face boxes with five landmarks each, best score first."""

    kind = "face"

    def __init__(self, config: YuNetConfig | None = None) -> None:
        self.config = config or YuNetConfig()
        self._yuface = import_yuface()
        self._threads = ThreadpoolController()

    @property
    def confident_score(self) -> float:
        """Every face returned scores at least ``min_score``, so all are confident."""
        return self.config.min_score

    def detect(self, image: np.ndarray) -> list[Detection]:
        """Faces in an RGB (H, W, 3) or grey (H, W) uint8 image, boxes and landmarks in its pixels."""
        bgr = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR) if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
        height, width = bgr.shape[:2]
        scale = min(1.0, MAX_SIDE / max(height, width))
        if scale < 1.0:
            bgr = cv2.resize(bgr, (max(1, round(width * scale)), max(1, round(height * scale))), interpolation=cv2.INTER_AREA)
        # yuface's parallel loops run on the OpenMP already in the process (PyTorch's),
        # whose workers spin at a barrier after every layer: on a busy machine a detection
        # then waits for whichever worker is descheduled (on ORL photos under load: 80-600
        # ms a photo, against 5 ms on one thread).  One thread, for this call only.
        with self._threads.limit(limits=1, user_api="openmp"):
            scores, boxes, points = self._yuface.detect(np.ascontiguousarray(bgr), self.config.min_score)
        found = []
        for score, box, marks in zip(scores, boxes, points, strict=True):
            rect = np.asarray(box, dtype=np.float64) / scale
            landmarks = tuple((float(marks[2 * i]) / scale, float(marks[2 * i + 1]) / scale) for i in range(5))
            found.append(clipped_detection(rect, float(score) / 100, image.shape, self.kind, landmarks))
        found = [d for d in found if d.box[2] > 0 and d.box[3] > 0]
        return sorted(found, key=lambda d: -d.score)
