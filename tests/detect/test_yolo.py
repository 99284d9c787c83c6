"""The YOLO ONNX decoder on small graphs built here, one per output layout, whose outputs
are fixed rows: the decoded boxes must land where the rows put them in the original image."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from reid.detect import YoloConfig, YoloDetector, build_detector, confident_detections
from reid.detect.yolo import (
    PAD_VALUE,
    ByteTrackConfig,
    Letterbox,
    YoloxConfig,
    decode_outputs,
    letterbox,
    network_input,
    yolox_grid,
)
from reid.errors import ConfigError, ModelError

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


def test_network_input_by_hand() -> None:
    """One pixel RGB (255, 0, 51) as each publisher's network takes it."""
    canvas = np.array([[[255, 0, 51]]], np.uint8)
    np.testing.assert_allclose(network_input(canvas, "bgr")[0, :, 0, 0], [51, 0, 255])
    np.testing.assert_allclose(network_input(canvas, "rgb")[0, :, 0, 0], [1.0, 0.0, 0.2], atol=1e-6)
    # ByteTrack: (x / 255 - mean) / std, channel by channel, in RGB order.
    expected = [(1.0 - 0.485) / 0.229, (0.0 - 0.456) / 0.224, (0.2 - 0.406) / 0.225]
    np.testing.assert_allclose(network_input(canvas, "rgb-imagenet")[0, :, 0, 0], expected, atol=1e-5)
    assert network_input(np.zeros((2, 3, 3), np.uint8), "bgr").shape == (1, 3, 2, 3)


def test_yolox_grid_and_stride_decode_by_hand() -> None:
    """A 32x32 input has 4x4 stride-8 cells, 2x2 stride-16 cells and one stride-32 cell, in
    that order, row by row; a raw row decodes to ((offset + cell) x stride, exp(log size) x
    stride) and scores objectness x class 0."""
    cells, strides = yolox_grid((32, 32))
    assert len(cells) == 21 and list(strides[[0, 15, 16, 19, 20]]) == [8, 8, 16, 16, 32]
    assert tuple(cells[17]) == (1, 0) and tuple(cells[18]) == (0, 1) and tuple(cells[5]) == (1, 1)
    rows = np.zeros((21, 7))
    rows[17] = [0.5, 0.25, math.log(2), 0.0, 0.8, 0.5, 0.9]  # stride 16, cell (1, 0)
    rows[20] = [-0.25, 0.5, 0.0, math.log(0.5), 0.5, 0.2, 0.0]  # stride 32, cell (0, 0)
    boxes, scores = decode_outputs(rows, "yolox-raw", (32, 32))
    np.testing.assert_allclose(boxes[17], [24, 4, 32, 16])
    np.testing.assert_allclose(boxes[20], [-8, 16, 32, 16])
    np.testing.assert_allclose(scores[[17, 20]], [0.4, 0.1])
    # A one-class head (ByteTrack's) has one class column.
    _, one_class = decode_outputs(rows[:, :6], "yolox-raw", (32, 32))
    assert one_class[17] == 0.4


def test_top_left_letterbox_maps_boxes_back_by_hand() -> None:
    """A 100x200 frame in a 64x64 input: scale 0.32, 32 rows of frame then grey below."""
    frame = np.full((100, 200, 3), 10, np.uint8)
    canvas, placement = letterbox(frame, (64, 64), centred=False, interpolation=cv2.INTER_LINEAR)
    assert placement == Letterbox(0.32, 0.0, 0.0)
    assert (canvas[:32] == 10).all() and (canvas[32:] == PAD_VALUE).all()
    # (cx, cy, w, h) = (16, 8, 6.4, 9.6) in the input is (x, y, w, h) = (40, 10, 20, 30) in the frame.
    np.testing.assert_allclose(placement.to_frame(np.array([[16.0, 8.0, 6.4, 9.6]])), [[40, 10, 20, 30]])


def bytetrack_rows(second_box_shift: float) -> np.ndarray:
    """Raw one-class YOLOX rows for a 320x320 input: the person of :data:`PERSON`, and a
    second box as large, ``second_box_shift`` cells of 16 px to its right, scoring less."""
    rows = yolox_rows(decoded=False)[:, :, :6].copy()
    index = int(np.flatnonzero(rows[0, :, 4])[0])
    rows[0, index, 5] = 1.0
    rows[0, index + 1] = rows[0, index]
    rows[0, index + 1, 0] += second_box_shift - 1
    rows[0, index + 1, 4] = 0.7
    return rows


def test_bytetrack_settings_keep_what_its_own_nms_keeps(tmp_path: Path) -> None:
    """Two boxes 30x60 input pixels, 8 px apart: IoU (22 x 60) / (2 x 1800 - 22 x 60) = 0.579,
    kept by ByteTrack's NMS (0.7), merged by YOLOX's (0.45)."""
    path = constant_model(tmp_path / "bt.onnx", bytetrack_rows(0.5))
    detector = YoloDetector(path, ByteTrackConfig())
    assert detector.layout == "yolox-raw" and detector.pixels == "rgb-imagenet"
    found = detector.detect(FRAME)
    assert [round(d.score, 2) for d in found] == [0.9, 0.7]
    assert np.allclose(found[0].box, PERSON, atol=1) and np.allclose(found[1].box, (116, 50, 60, 120), atol=1)
    merged = YoloDetector(path, ByteTrackConfig(nms_iou=YoloxConfig.nms_iou)).detect(FRAME)
    assert [round(d.score, 2) for d in merged] == [0.9]


def test_a_yolox_file_named_raw_is_not_second_guessed(tmp_path: Path) -> None:
    """A raw head's weak rows may reach beyond the centres' check (ByteTrack's file on a grey
    frame: 34.8 cells); a publisher's settings name the layout raw."""
    rows = yolox_rows(decoded=False)
    rows[0, -1, :2] = [40.0, 40.0]
    path = constant_model(tmp_path / "x.onnx", rows)
    assert YoloDetector(path).layout == "yolox"
    assert YoloDetector(path, YoloxConfig(min_score=0.25)).layout == "yolox-raw"
    assert_person_found(YoloDetector(path, YoloxConfig(min_score=0.25)))


def test_pixels_and_threads_are_checked() -> None:
    with pytest.raises(ConfigError, match="unknown YOLO pixels 'rgb255'; choose one of auto, bgr, rgb, rgb-imagenet"):
        YoloConfig(pixels="rgb255")
    with pytest.raises(ConfigError, match="YOLO threads must be at least 1"):
        ByteTrackConfig(threads=0)
    assert ByteTrackConfig().nms_iou == 0.7 and YoloxConfig().nms_iou == YoloConfig().nms_iou == 0.45
