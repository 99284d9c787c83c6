"""What every ready-made face encoder shares: find the largest face of a photo, cut its
aligned chip, embed chips; a photo without a face is a failure of :meth:`FaceEncoder.embed_each`
(or, when the caller asks, embedded whole: resized to a chip, unaligned).

A subclass says how it finds a face (:meth:`~FaceEncoder.find_face`), cuts its chip
(:meth:`~FaceEncoder.chip_of`), embeds chips (:meth:`~FaceEncoder.embed_chips`), its chip
size (:attr:`~FaceEncoder.chip_size`) and why a photo had no face
(:meth:`~FaceEncoder.no_face_reason`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from reid.errors import DataError
from reid.models.encoder import EmbedResult, Encoder


class FaceEncoder(Encoder):
    """A face detector, an alignment and a descriptor behind the Encoder contract."""

    #: (height, width) of the chips :meth:`chip_of` cuts and :meth:`embed_chips` takes.
    chip_size: tuple[int, int]

    @abstractmethod
    def find_face(self, image: np.ndarray) -> Any:
        """The largest face of an RGB uint8 image (the photo's subject), or None."""

    @abstractmethod
    def chip_of(self, image: np.ndarray, face: Any) -> np.ndarray:
        """The aligned (chip_size) RGB uint8 chip of ``face`` (from :meth:`find_face`) in ``image``."""

    @abstractmethod
    def embed_chips(self, chips: Sequence[np.ndarray]) -> np.ndarray:
        """Unit-norm (N, dim) float32 embeddings of chips from :meth:`chip_of`."""

    @abstractmethod
    def no_face_reason(self) -> str:
        """Why a photo has no embedding: which detector found nothing, with its settings."""

    def face_chip(self, image: np.ndarray, source: str | Path = "image") -> np.ndarray:
        """The aligned chip of the largest face; DataError naming ``source`` if none."""
        image = rgb_image(image, source)
        face = self.find_face(image)
        if face is None:
            raise DataError(f"{source}: {self.no_face_reason()}")
        return self.chip_of(image, face)

    def embed_each(self, images: Sequence[np.ndarray], whole_fallback: bool = False) -> EmbedResult:
        """Chips of the largest faces; a photo without one is a failure, or with
        ``whole_fallback`` is taken whole (resized to a chip, unaligned)."""
        chips, kept, failures = [], [], []
        height, width = self.chip_size
        for position, raw in enumerate(images):
            image = rgb_image(raw, f"image {position + 1} of {len(images)}")
            face = self.find_face(image)
            if face is not None:
                chips.append(self.chip_of(image, face))
            elif whole_fallback:
                chips.append(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA))
            else:
                failures.append((position, self.no_face_reason()))
                continue
            kept.append(position)
        return EmbedResult(self.embed_chips(chips), kept, failures)

    def embed(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Embeddings of the largest face of each image; DataError naming the first image
        (by its position in ``images``) without a face.  :func:`reid.models.encoder.embed_images`
        names files instead and can skip such images."""
        result = self.embed_each(images)
        if result.failures:
            position, reason = result.failures[0]
            raise DataError(f"image {position + 1} of {len(images)} in this batch: {reason}")
        return result.features


def rgb_image(image: np.ndarray, source: str | Path) -> np.ndarray:
    """A contiguous RGB uint8 array, grey images repeated over three channels; DataError
    naming ``source`` for any other shape."""
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] != 3:
        raise DataError(f"{source}: expected an RGB or grey image, got shape {list(image.shape)}")
    return np.ascontiguousarray(image, dtype=np.uint8)
