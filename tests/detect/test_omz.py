"""The Open Model Zoo's SSD person detectors: DetectionOutput rows read by hand, the
network's input, and the real IR files on a frame of the street video."""

from __future__ import annotations

import numpy as np
import pytest

from reid.detect import build_detector, confident_detections
from reid.detect.omz import AdasPedestrianConfig, OmzDetector, RetailPersonConfig, detection_output_boxes
from reid.errors import ConfigError, ModelError
from reid.evaluation.boxes import match_frame, read_mot_boxes
from tests.conftest import SHARED_DATA, WHERE
from tests.detect.conftest import published_file, video_frames


def test_detection_output_rows_by_hand() -> None:
    """Rows (image id, label, confidence, x0, y0, x1, y1), corners as shares of a 200x400
    (H x W) frame: label 1 kept down to the floor, best first, nothing after image id -1."""
    rows = np.array([
        [0, 1, 0.30, 0.10, 0.20, 0.20, 0.60],  # (40, 40, 40, 80)
        [0, 1, 0.90, 0.50, 0.00, 0.75, 0.50],  # (200, 0, 100, 100)
        [0, 2, 0.95, 0.00, 0.00, 1.00, 1.00],  # another class
        [0, 1, 0.05, 0.00, 0.00, 0.50, 0.50],  # under the floor
        [0, 0, 0.00, 0.00, 0.00, 0.00, 0.00],  # an unused row, as this runtime writes it
        [-1, 1, 0.99, 0.00, 0.00, 1.00, 1.00],  # the end of the list
        [0, 1, 0.99, 0.00, 0.00, 1.00, 1.00],  # after the end: not a detection
    ])
    boxes, scores = detection_output_boxes(rows[None, None], (200, 400), floor=0.1)
    np.testing.assert_allclose(scores, [0.9, 0.3])
    np.testing.assert_allclose(boxes, [[200, 0, 100, 100], [40, 40, 40, 80]])
    assert len(detection_output_boxes(rows, (200, 400), floor=0.5)[1]) == 1
    assert detection_output_boxes(np.zeros((0, 7)), (10, 10), 0.1)[0].shape == (0, 4)


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="min_score must be in"):
        RetailPersonConfig(min_score=1.5)
    with pytest.raises(ConfigError, match="threads must be at least 1"):
        AdasPedestrianConfig(threads=0)
    assert AdasPedestrianConfig(min_score=0.05, weak_score=0.1).floor == 0.05


def test_missing_parts_are_one_line(tmp_path) -> None:
    xml = tmp_path / "model.xml"
    with pytest.raises(ModelError, match="model.xml: OpenVINO IR file not found"):
        OmzDetector(xml)
    xml.write_text("<net/>")
    with pytest.raises(ModelError, match=r"model\.bin: OpenVINO IR file not found \(an IR is an .xml beside its .bin\)"):
        build_detector(f"person-detection-retail-0013:{xml}", "person")
    (tmp_path / "model.bin").write_bytes(b"\0" * 8)
    with pytest.raises(ModelError, match="model.xml: not a readable OpenVINO IR") as caught:
        OmzDetector(xml)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["person-detection-retail-0013", "pedestrian-detection-adas-0002"])
def test_real_detector_finds_the_people_of_a_street_frame(name: str, pedestrian_video) -> None:
    xml = published_file(name)
    truth_file = SHARED_DATA / "video" / "pets09-s2l1" / "gt.txt"
    if not truth_file.is_file():
        pytest.skip(f"real data data/video/pets09-s2l1/gt.txt not present {WHERE}")
    detector = build_detector(f"{name}:{xml}", "person")
    assert isinstance(detector, OmzDetector) and detector.size == ((320, 544) if "retail" in name else (384, 672))
    held = build_detector(f"{name}:{xml}", "person", [(RetailPersonConfig if "retail" in name else AdasPedestrianConfig)(threads=1)])
    assert held._request.get_compiled_model().get_property("INFERENCE_NUM_THREADS") == 1
    frame_index = 200
    (frame,) = video_frames(pedestrian_video, (frame_index,))
    truth = read_mot_boxes(truth_file, min_confidence=1)[frame_index]
    found = confident_detections(detector, frame)
    boxes = np.array([d.box for d in found], float).reshape(-1, 4)
    matched = match_frame(truth, boxes)
    # Frame 201 holds 5 people of the ground truth; both find at least 4 of them (IoU >= 0.5).
    # Two people far off at the top right are in no ground-truth box (its annotated area):
    # a box or two beyond the matched ones is allowed, no more.
    assert len(truth) == 5 and len(matched) >= 4 and len(boxes) - len(matched) <= 2
    assert all(d.score >= detector.confident_score for d in found)
    assert len(detector.detect(frame)) >= len(found), "weak boxes too, down to the floor"
    # The input: the frame resized whole (no letterbox), BGR 0..255.
    flat = detector.network_input(np.full((90, 40, 3), (10, 20, 30), np.uint8))
    assert flat.shape == (1, 3, *detector.size) and flat.dtype == np.float32
    assert (flat[0, 0] == 30).all() and (flat[0, 1] == 20).all() and (flat[0, 2] == 10).all()
