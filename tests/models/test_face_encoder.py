"""The shared half of the face encoders (reid.models.face_encoder.FaceEncoder): the largest
face's chip, a photo without a face failed or taken whole, grey photos, one-line errors;
through a small encoder whose "face" is the bright part of a photo."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from reid.errors import DataError
from reid.models.card import ModelCard
from reid.models.dlib_face import DlibFaceEncoder
from reid.models.face_encoder import FaceEncoder
from reid.models.sface import SFaceEncoder


class BrightFace(FaceEncoder):
    """The bounding box of pixels above 128 is the face; a chip's embedding is its mean colour."""

    chip_size = (8, 6)

    def __init__(self) -> None:
        self.card = ModelCard(name="bright", architecture="none", embedding_dim=3, input_size=self.chip_size, kind="face")

    def find_face(self, image: np.ndarray) -> Any:
        ys, xs = np.nonzero(image.max(axis=2) > 128)
        return None if len(ys) == 0 else (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1)

    def chip_of(self, image: np.ndarray, face: Any) -> np.ndarray:
        top, bottom, left, right = face
        return np.resize(image[top:bottom, left:right], (*self.chip_size, 3))

    def embed_chips(self, chips: Sequence[np.ndarray]) -> np.ndarray:
        means = np.array([chip.reshape(-1, 3).mean(axis=0) for chip in chips], np.float32).reshape(-1, 3) + 1.0
        return means / np.linalg.norm(means, axis=1, keepdims=True)

    def no_face_reason(self) -> str:
        return "nothing bright"


def photo(face: bool, grey: bool = False) -> np.ndarray:
    image = np.full((40, 30, 3), 20, np.uint8)
    if face:
        image[10:20, 5:15] = (250, 200, 150)
    return image[:, :, 0] if grey else image


def test_a_photo_without_a_face_fails_or_is_taken_whole() -> None:
    encoder = BrightFace()
    images = [photo(True), photo(False), photo(True, grey=True)]
    result = encoder.embed_each(images)
    assert result.kept == [0, 2] and result.failures == [(1, "nothing bright")]
    assert result.features.shape == (2, 3)
    whole = encoder.embed_each(images, whole_fallback=True)
    assert whole.kept == [0, 1, 2] and whole.failures == []
    with pytest.raises(DataError, match=r"^image 2 of 3 in this batch: nothing bright$"):
        encoder.embed(images)
    assert encoder.face_chip(photo(True)).shape == (8, 6, 3)
    with pytest.raises(DataError, match=r"^a\.png: nothing bright$"):
        encoder.face_chip(photo(False), "a.png")
    with pytest.raises(DataError, match=r"expected an RGB or grey image, got shape \[4, 4, 4\]"):
        encoder.embed_each([np.zeros((4, 4, 4), np.uint8)])


def test_the_face_encoders_share_the_base() -> None:
    for encoder in (SFaceEncoder, DlibFaceEncoder):
        assert issubclass(encoder, FaceEncoder)
        for shared in ("face_chip", "embed_each", "embed"):
            assert shared not in vars(encoder), (encoder.__name__, shared)
