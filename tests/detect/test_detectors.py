"""The OpenCV detectors on real faces, a real street video and synthetic walkers."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from reid.data.io import read_image
from reid.detect import (
    Detection,
    FaceDetector,
    FaceDetectorConfig,
    PersonDetectorConfig,
    build_detector,
    cascade_path,
    crop,
    crop_detections,
    expand_box,
    non_max_suppression,
)
from reid.errors import ConfigError, ModelError
from reid.pipeline.synthetic import street_frames


def covers(found: tuple[int, int, int, int], truth: tuple[int, int, int, int]) -> bool:
    """HOG boxes carry the detector window's margin: ask that the box holds most of the
    figure and is not much larger than it."""
    iw = max(0, min(found[0] + found[2], truth[0] + truth[2]) - max(found[0], truth[0]))
    ih = max(0, min(found[1] + found[3], truth[1] + truth[3]) - max(found[1], truth[1]))
    return iw * ih >= 0.8 * truth[2] * truth[3] and found[2] * found[3] <= 4 * truth[2] * truth[3]


def test_bundled_face_cascade_loads() -> None:
    path = cascade_path("haarcascade_frontalface_default.xml")
    assert path.is_file() and Path(cv2.data.haarcascades) in path.parents
    detector = build_detector(None, "face")
    assert isinstance(detector, FaceDetector) and detector.cascade_file == path


def test_missing_cascade_names_the_opencv_version() -> None:
    with pytest.raises(ModelError) as caught:
        build_detector("haar", "face", [FaceDetectorConfig(cascade="haarcascade_nothing.xml")])
    assert cv2.__version__ in str(caught.value) and "haarcascade_nothing.xml" in str(caught.value)
    with pytest.raises(ModelError, match="not found"):
        cascade_path("/no/such/cascade.xml")


def test_broken_cascade_file_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_text("<opencv_storage><cascade>nonsense</cascade></opencv_storage>")
    with pytest.raises(ModelError, match="not a loadable Haar cascade"):
        build_detector("haar", "face", [FaceDetectorConfig(cascade=str(broken))])


def test_unknown_detector_and_bad_options() -> None:
    with pytest.raises(ConfigError, match="^detector .car.: not a detector; choose one of"):
        build_detector("car")
    with pytest.raises(ConfigError, match="scale"):
        build_detector("hog", "person", [PersonDetectorConfig(scale=0)])
    with pytest.raises(ConfigError, match="two PersonDetectorConfig"):
        build_detector("hog", "person", [PersonDetectorConfig(), PersonDetectorConfig()])


def test_faces_found_on_real_orl_photos(orl_faces: Path) -> None:
    detector = build_detector(None, "face")
    images = [read_image(orl_faces / f"s{subject}" / "1.pgm") for subject in range(1, 11)]
    found = [detector.detect(image) for image in images]
    assert sum(bool(f) for f in found) >= 8
    for image, detections in zip(images, found, strict=True):
        for detection in detections:
            x, y, w, h = detection.box
            assert detection.kind == "face" and w > 20 and h > 20
            assert x >= 0 and y >= 0 and x + w <= image.shape[1] and y + h <= image.shape[0]
        if detections:
            (face,) = crop_detections(image, detections[:1])
            assert face.shape[0] >= detections[0].box[3] and face.ndim == 3


def test_walkers_found_where_they_are_drawn() -> None:
    # A finer image pyramid than the default finds every walker in every frame.
    detector = build_detector("hog", "person", [PersonDetectorConfig(pyramid_scale=1.03)])
    for frame, truth in street_frames(6, seed=1):
        detections = detector.detect(frame)
        for name, box in truth.items():
            assert any(covers(d.box, box) for d in detections), name
        assert all(d.kind == "person" and d.score > 0 for d in detections)
        assert detections == sorted(detections, key=lambda d: -d.score)


def test_people_found_in_the_real_street_video(pedestrian_video: Path) -> None:
    capture = cv2.VideoCapture(str(pedestrian_video))
    detector = build_detector(None, "person")
    counts = []
    for _ in range(4):
        ok, bgr = capture.read()
        assert ok
        counts.append(len(detector.detect(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))))
    capture.release()
    assert sum(counts) >= 4


def test_downscaled_detection_returns_boxes_in_the_original_frame() -> None:
    frame, truth = next(street_frames(1, seed=2))
    # The same scene at twice the size, searched at half size, gives boxes at full size.
    large = cv2.resize(frame, None, fx=2, fy=2)
    found = build_detector("hog", "person", [PersonDetectorConfig(scale=0.5)]).detect(large)
    for box in truth.values():
        doubled = tuple(2 * v for v in box)
        assert any(covers(d.box, doubled) for d in found)


def test_small_images_are_enlarged_to_the_detector_window() -> None:
    tiny = np.full((40, 20, 3), 128, np.uint8)
    assert build_detector(None, "person").detect(tiny) == []
    assert build_detector(None, "face").detect(tiny) == []


def test_expand_and_crop_clip_to_the_image() -> None:
    image = np.arange(100 * 80 * 3, dtype=np.uint8).reshape(100, 80, 3)
    assert expand_box((10, 10, 20, 40), 0.5, image.shape) == (0, 0, 40, 70)
    assert expand_box((70, 90, 20, 20), 0.0, image.shape) == (70, 90, 10, 10)
    piece = crop(image, (10, 20, 30, 40))
    assert piece.shape == (40, 30, 3) and piece.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(piece, image[20:60, 10:40])
    assert crop(image, (200, 200, 10, 10)).size == 0


def test_non_max_suppression_keeps_the_best_of_overlaps() -> None:
    boxes = np.array([[0, 0, 50, 100], [5, 5, 50, 100], [200, 0, 50, 100], [210, 20, 20, 40]])
    scores = np.array([0.5, 0.9, 0.7, 0.8])
    # Box 0 overlaps the better box 1; box 2 lies around box 3 (a person around a torso
    # found on its own), so the one found first by score, box 3, keeps its place.
    assert non_max_suppression(boxes, scores, 0.45) == [1, 3]
    assert non_max_suppression(np.zeros((0, 4)), np.zeros(0), 0.5) == []
    assert Detection((0, 0, 3, 4), 1.0).area == 12


def test_nobody_on_an_empty_street() -> None:
    person, face = build_detector("hog", "person"), build_detector("haar", "face")
    for frame, truth in street_frames(3, walkers=(), seed=7):
        assert truth == {}
        assert person.detect(frame) == [] and face.detect(frame) == []
