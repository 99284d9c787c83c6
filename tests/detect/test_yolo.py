"""The YOLO ONNX decoder on small graphs built here, one per output layout, whose outputs
are fixed rows: the decoded boxes must land where the rows put them in the original image."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from reid.detect import YoloConfig, YoloDetector, build_detector, confident_detections
from reid.detect.yolo import letterbox, yolox_grid
from reid.errors import ModelError

SIDE = 320
# The person in a 640x480 frame, as (x, y, w, h); letterboxed into 320x320 at scale 0.5.
PERSON = (100, 50, 60, 120)
FRAME = np.full((480, 640, 3), 90, np.uint8)


def constant_model(path: Path, rows: np.ndarray, input_shape: tuple = (1, 3, SIDE, SIDE)) -> Path:
    """An ONNX model whose output is ``rows`` (plus 0 x the input's mean, so it reads the image)."""
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
            helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
            helper.make_node("Add", ["rows", "nothing"], ["output0"]),
        ],
        "fixed",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(rows.shape))],
        initializer=[
            numpy_helper.from_array(rows.astype(np.float32), "rows"),
            numpy_helper.from_array(np.zeros((), np.float32), "zero"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def centred_row() -> list[float]:
    """The person's (cx, cy, w, h) in a centred 320x320 letterbox: scale 0.5, 40 px above."""
    x, y, w, h = PERSON
    return [(x + w / 2) * 0.5, (y + h / 2) * 0.5 + 40, w * 0.5, h * 0.5]


def assert_person_found(detector: YoloDetector) -> None:
    found = confident_detections(detector, FRAME)
    assert len(found) == 1, found
    assert np.allclose(found[0].box, PERSON, atol=1)
    assert found[0].kind == "person" and 0.25 <= found[0].score <= 1


def test_yolov5_rows_with_objectness(tmp_path: Path) -> None:
    person = centred_row()
    rows = np.zeros((1, 50, 7), np.float32)
    rows[0, 0] = [*person, 0.9, 0.8, 0.1]
    rows[0, 1] = [person[0] + 2, person[1] + 1, person[2], person[3], 0.8, 0.7, 0.1]  # a weaker duplicate
    rows[0, 2] = [200, 200, 40, 40, 0.9, 0.05, 0.9]  # another class: not a person
    rows[0, 3] = [250, 100, 20, 60, 0.2, 0.9, 0.0]  # a person under the score threshold
    detector = YoloDetector(constant_model(tmp_path / "v5.onnx", rows))
    assert detector.layout == "yolov5" and detector.size == (SIDE, SIDE)
    assert_person_found(detector)
    assert abs(detector.detect(FRAME)[0].score - 0.72) < 1e-3


def test_yolov8_columns_without_objectness(tmp_path: Path) -> None:
    columns = np.zeros((1, 6, 100), np.float32)  # 4 + 2 classes, 100 candidates
    columns[0, :, 7] = [*centred_row(), 0.85, 0.1]
    columns[0, :, 8] = [60, 60, 30, 30, 0.1, 0.95]
    detector = build_detector(f"yolo:{constant_model(tmp_path / 'v8.onnx', columns)}", "person")
    assert isinstance(detector, YoloDetector) and detector.layout == "yolov8"
    assert_person_found(detector)


def yolox_rows(decoded: bool) -> np.ndarray:
    """YOLOX rows for a 320x320 input (one per stride 8/16/32 cell), the person in one of the
    stride-16 cells; YOLOX letterboxes at the top-left, so there is no padding above."""
    cells, strides = yolox_grid((SIDE, SIDE))
    rows = np.zeros((1, len(cells), 7), np.float32)
    x, y, w, h = PERSON
    cx, cy, bw, bh = (x + w / 2) * 0.5, (y + h / 2) * 0.5, w * 0.5, h * 0.5
    index = 40 * 40 + int(cy // 16) * 20 + int(cx // 16)
    assert strides[index] == 16 and tuple(cells[index]) == (cx // 16, cy // 16)
    box = [cx, cy, bw, bh] if decoded else [cx / 16 - cx // 16, cy / 16 - cy // 16, math.log(bw / 16), math.log(bh / 16)]
    rows[0, index] = [*box, 0.9, 0.9, 0.0]
    return rows


@pytest.mark.parametrize("decoded", [False, True])
def test_yolox_rows_raw_or_decoded(tmp_path: Path, decoded: bool) -> None:
    detector = YoloDetector(constant_model(tmp_path / "x.onnx", yolox_rows(decoded)))
    assert detector.layout == ("yolox" if decoded else "yolox-raw")
    assert_person_found(detector)


def test_dynamic_input_size_comes_from_the_options(tmp_path: Path) -> None:
    rows = np.zeros((1, 50, 6), np.float32)
    rows[0, 0] = [*centred_row(), 0.9, 0.9]
    path = constant_model(tmp_path / "dyn.onnx", rows, input_shape=(1, 3, "height", "width"))
    detector = YoloDetector(path, YoloConfig(input_size=(SIDE, SIDE)))
    assert detector.size == (SIDE, SIDE)
    assert_person_found(detector)


def test_letterbox_keeps_the_aspect_and_pads_grey() -> None:
    canvas, placement = letterbox(np.zeros((100, 200, 3), np.uint8), (320, 320))
    assert canvas.shape == (320, 320, 3) and placement.scale == 1.6 and placement.pad_y == 80
    assert (canvas[:80] == 114).all() and (canvas[80:240] == 0).all() and (canvas[240:] == 114).all()
    _, top_left = letterbox(np.zeros((100, 200, 3), np.uint8), (320, 320), centred=False)
    assert top_left.pad_x == 0 and top_left.pad_y == 0


def test_wrong_layout_names_the_file_and_the_shape(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "flat.onnx", np.zeros((1, 3, 4), np.float32))
    with pytest.raises(ModelError) as caught:
        YoloDetector(path)
    message = str(caught.value)
    assert str(path) in message and "[1, 3, 4]" in message and "\n" not in message
    v8 = constant_model(tmp_path / "v8.onnx", np.zeros((1, 6, 100), np.float32))
    with pytest.raises(ModelError, match=r"does not fit the yolov5 layout"):
        YoloDetector(v8, YoloConfig(layout="yolov5"))


def test_bad_and_missing_files_are_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a protobuf at all" * 10)
    with pytest.raises(ModelError, match="junk.onnx: not a readable ONNX model") as caught:
        build_detector(f"yolo:{junk}", "person")
    assert "\n" not in str(caught.value)
    with pytest.raises(ModelError, match="missing.onnx: YOLO ONNX file not found"):
        build_detector(f"yolo:{tmp_path / 'missing.onnx'}")


def test_a_box_under_the_score_threshold_is_a_weak_detection(tmp_path: Path) -> None:
    rows = np.zeros((1, 50, 7), np.float32)
    rows[0, 0] = [*centred_row(), 0.9, 0.8, 0.1]
    rows[0, 3] = [250, 100, 20, 60, 0.2, 0.9, 0.0]  # a person scoring 0.18
    path = constant_model(tmp_path / "v5.onnx", rows)
    detector = YoloDetector(path)
    assert detector.confident_score == 0.25
    assert len(confident_detections(detector, FRAME)) == 1
    everything = detector.detect(FRAME)
    assert len(everything) == 2 and abs(everything[1].score - 0.18) < 1e-3
    assert len(YoloDetector(path, YoloConfig(weak_score=None)).detect(FRAME)) == 1
    assert len(YoloDetector(path, YoloConfig(weak_score=0.2)).detect(FRAME)) == 1
    assert detector.detect(np.zeros((0, 0, 3), np.uint8)) == detector.detect(np.zeros((4, 0, 3), np.uint8)) == []
