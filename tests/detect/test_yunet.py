"""YuNet faces with landmarks on real ORL photos, and alignment onto the 5-point template."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from reid.data.io import read_image
from reid.detect import FACE_TEMPLATE_112, YuNetConfig, align_face, build_detector, similarity_transform
from reid.errors import ConfigError, DataError, ModelError
from reid.pipeline.synthetic import street_frames


def test_faces_and_landmarks_on_real_orl_photos(orl_faces: Path) -> None:
    detector = build_detector("yunet", "face")
    images = [read_image(orl_faces / f"s{subject}" / f"{1 + subject % 10}.pgm") for subject in range(1, 41)]
    found = [detector.detect(image) for image in images]
    assert sum(bool(f) for f in found) >= 38
    for image, faces in zip(images, found, strict=True):
        for face in faces:
            x, y, w, h = face.box
            assert face.kind == "face" and 0 < face.score <= 1 and w > 20 and h > 20
            assert x >= 0 and y >= 0 and x + w <= image.shape[1] and y + h <= image.shape[0]
            assert len(face.landmarks) == 5
            (ex0, ey0), (ex1, ey1), (nx, ny), (mx0, my0), (mx1, my1) = face.landmarks
            # Template order: eyes left to right above the nose, mouth corners below it.
            assert ex0 < nx < ex1 and max(ey0, ey1) < ny < min(my0, my1) and mx0 < mx1


def test_large_images_are_shrunk_and_boxes_scaled_back(orl_faces: Path) -> None:
    image = read_image(orl_faces / "s1" / "1.pgm")
    (small,) = build_detector("yunet").detect(image)
    # The photo at 4x inside a 2400x1800 frame: YuNet sees the frame shrunk to 960x720.
    frame = np.full((1800, 2400, 3), 128, np.uint8)
    frame[700 : 700 + 4 * image.shape[0], 1000 : 1000 + 4 * image.shape[1]] = cv2.resize(image, None, fx=4, fy=4)
    large = build_detector("yunet").detect(frame)
    assert len(large) == 1
    expected = np.array(small.box) * 4 + [1000, 700, 0, 0]
    assert np.allclose(large[0].box, expected, atol=24), (large[0].box, expected)
    assert np.allclose(large[0].landmarks, np.array(small.landmarks) * 4 + [1000, 700], atol=24)


def test_no_face_on_an_empty_street() -> None:
    detector = build_detector("yunet", "face")
    for frame, _ in street_frames(2, walkers=(), seed=5):
        assert detector.detect(frame) == []
    with pytest.raises(ConfigError, match="min_score"):
        YuNetConfig(min_score=1.5)


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yuface", None)  # what Python records for a module it cannot import
    with pytest.raises(ModelError, match=r'needs the yuface package, which is not installed: pip install "reid-toolkit\[faces\]"'):
        build_detector("yunet", "face")


def rotation(angle_deg: float, scale: float, shift: tuple[float, float]) -> np.ndarray:
    angle = np.deg2rad(angle_deg)
    c, s = scale * np.cos(angle), scale * np.sin(angle)
    return np.array([[c, -s, shift[0]], [s, c, shift[1]]])


def test_alignment_puts_the_landmarks_where_the_template_says() -> None:
    template = np.array(FACE_TEMPLATE_112)
    # A face whose landmarks are the template moved by a known similarity.
    known = rotation(25, 2.5, (140.0, 60.0))
    landmarks = template @ known[:, :2].T + known[:, 2]
    matrix = similarity_transform([tuple(p) for p in landmarks], (112, 112))
    # Within float32 rounding and the template centre's published rounding (4e-5 pixels).
    np.testing.assert_allclose(landmarks @ matrix[:, :2].T + matrix[:, 2], template, atol=1e-4)
    # Drawn as dots in an image, the dots of the aligned chip sit on the template: the
    # brightness centroid around each template point is the point itself.
    image = np.zeros((600, 600, 3), np.uint8)
    for x, y in landmarks:
        cv2.circle(image, (int(round(x)), int(round(y))), 6, (255, 255, 255), -1, lineType=cv2.LINE_AA)
    chip = align_face(image, [tuple(p) for p in landmarks])
    assert chip.shape == (112, 112, 3) and chip.dtype == np.uint8
    for x, y in template:
        x0, y0 = int(round(x)) - 6, int(round(y)) - 6
        window = chip[y0 : y0 + 13, x0 : x0 + 13, 0].astype(np.float64)
        assert window.sum() > 255 * 5, (x, y)
        ys, xs = np.mgrid[y0 : y0 + 13, x0 : x0 + 13]
        cx, cy = (window * xs).sum() / window.sum(), (window * ys).sum() / window.sum()
        assert abs(cx - x) < 1.0 and abs(cy - y) < 1.0, (cx, cy, x, y)
    assert chip[:, :, 0].sum() < 255 * 5 * 40  # nothing else is bright


def test_alignment_to_another_chip_size_and_bad_landmarks() -> None:
    template = np.array(FACE_TEMPLATE_112)
    matrix = similarity_transform([tuple(p) for p in template], (224, 224))
    np.testing.assert_allclose(matrix, [[2, 0, 0], [0, 2, 0]], atol=1e-4)
    with pytest.raises(DataError, match="five distinct landmarks"):
        similarity_transform([(10.0, 10.0)] * 5, (112, 112))
    with pytest.raises(DataError, match="five distinct landmarks"):
        similarity_transform([(10.0, 10.0), (20.0, 10.0)], (112, 112))
