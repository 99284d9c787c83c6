"""``--detector yolo:FILE.onnx``: people (class 0) from a user's own YOLO export, run by onnxruntime.

Three output layouts are read, told apart by the output's shape (or named by
:attr:`YoloConfig.layout`):

* ``yolov5``: (1, N, 5 + C) rows of (cx, cy, w, h, objectness, C class scores), boxes in
  input pixels; a detection's score is objectness x class score;
* ``yolov8`` (also YOLO11): (1, 4 + C, N) columns of (cx, cy, w, h, C class scores), no
  objectness; recognised by having fewer rows than columns;
* ``yolox``: the YOLOv5 row layout with one row per cell of the stride 8, 16 and 32 grids.
  YOLOX exports without ``decode_in_inference`` give raw cell offsets and log sizes, which
  are decoded here (``(offset + cell) * stride``, ``exp(log size) * stride``); exports that
  decode in the graph give pixels like YOLOv5.  A raw output is recognised by its centres:
  decoded centres spread over the input, raw offsets stay within a few cells' units.

Frames are letterboxed into the model's input (aspect kept, grey 114 padding): centred,
RGB scaled to 0..1 for YOLOv5/v8 (Ultralytics); top-left, resized bilinearly, BGR 0..255
for YOLOX (its own preprocessing since 0.1.1) or RGB scaled to 0..1 then normalised by
ImageNet's mean and deviation (ByteTrack's, and YOLOX's before 0.1.1): :attr:`YoloConfig.pixels`.
Boxes are mapped back to the frame, and overlapping ones merged by
:func:`reid.detect.non_max_suppression`.

The published YOLOX files run by name (``--detector yolox-nano``, ``bytetrack-nano``, ...)
are this detector with their publisher's settings: :class:`YoloxConfig` (COCO, person =
class 0) and :class:`ByteTrackConfig` (ByteTrack's one-class person detector).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from reid.detect.base import Detection, clipped_detection, non_max_suppression
# The settings live where the command line reads them without this detector; named here too.
from reid.detect.configs import (
    LAYOUTS as LAYOUTS,
    PIXELS as PIXELS,
    ByteTrackConfig as ByteTrackConfig,
    YoloConfig as YoloConfig,
    YoloxConfig as YoloxConfig,
)
from reid.errors import ConfigError, ModelError
from reid.models.runtime import first_line, import_onnxruntime

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
YOLOX_STRIDES = (8, 16, 32)
# A letterbox's padding grey, as both Ultralytics and YOLOX use it.
PAD_VALUE = 114
# Input side for a file whose input size is dynamic.
DEFAULT_INPUT_SIDE = 640
PERSON = 0


@dataclass(frozen=True)
class Letterbox:
    """How a frame sits in the model input: input = frame * scale + (pad_x, pad_y)."""

    scale: float
    pad_x: float
    pad_y: float

    def to_frame(self, boxes: np.ndarray) -> np.ndarray:
        """(N, 4) centre boxes (cx, cy, w, h) in input pixels -> (x, y, w, h) in frame pixels."""
        out = np.empty_like(boxes, dtype=np.float64)
        out[:, 0] = (boxes[:, 0] - boxes[:, 2] / 2 - self.pad_x) / self.scale
        out[:, 1] = (boxes[:, 1] - boxes[:, 3] / 2 - self.pad_y) / self.scale
        out[:, 2] = boxes[:, 2] / self.scale
        out[:, 3] = boxes[:, 3] / self.scale
        return out


def letterbox(
    image: np.ndarray, size: tuple[int, int], centred: bool = True, interpolation: int | None = None
) -> tuple[np.ndarray, Letterbox]:
    """``image`` (H, W, 3) resized into ``size`` (height, width) with its aspect kept and the
    rest filled with grey 114: centred, or at the top-left corner.  ``interpolation``: an
    OpenCV flag (None: area when shrinking, bilinear when enlarging)."""
    height, width = image.shape[:2]
    target_h, target_w = size
    scale = min(target_h / height, target_w / width)
    new_w, new_h = max(1, round(width * scale)), max(1, round(height * scale))
    pad_x = (target_w - new_w) / 2 if centred else 0.0
    pad_y = (target_h - new_h) / 2 if centred else 0.0
    canvas = np.full((target_h, target_w, 3), PAD_VALUE, dtype=np.uint8)
    left, top = int(round(pad_x - 0.1)), int(round(pad_y - 0.1))
    if interpolation is None:
        interpolation = cv2.INTER_LINEAR if scale > 1 else cv2.INTER_AREA
    resized = cv2.resize(image, (new_w, new_h), interpolation=interpolation)
    canvas[top : top + new_h, left : left + new_w] = resized
    return canvas, Letterbox(scale, float(left), float(top))


def yolox_grid(size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The YOLOX cells of an input of ``size`` (height, width): (N, 2) cell (x, y) indices
    and (N,) strides, in the order the head emits them (stride 8 first, row by row)."""
    cells, strides = [], []
    for stride in YOLOX_STRIDES:
        rows, cols = size[0] // stride, size[1] // stride
        ys, xs = np.mgrid[0:rows, 0:cols]
        cells.append(np.stack([xs.ravel(), ys.ravel()], axis=1))
        strides.append(np.full(rows * cols, stride))
    return np.concatenate(cells).astype(np.float64), np.concatenate(strides).astype(np.float64)


def network_input(canvas: np.ndarray, pixels: str) -> np.ndarray:
    """The (1, 3, H, W) float32 network input of an RGB uint8 (H, W, 3) letterboxed
    ``canvas``, as ``pixels`` (bgr, rgb or rgb-imagenet: see :data:`PIXELS`) says."""
    chw = canvas.transpose(2, 0, 1).astype(np.float32)
    if pixels == "bgr":
        return np.ascontiguousarray(chw[None, ::-1])
    chw *= np.float32(1 / 255)
    if pixels == "rgb-imagenet":
        chw -= np.asarray(IMAGENET_MEAN, np.float32)[:, None, None]
        chw /= np.asarray(IMAGENET_STD, np.float32)[:, None, None]
    return np.ascontiguousarray(chw[None])


def decode_outputs(output: np.ndarray, layout: str, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Person boxes (N, 4) as (cx, cy, w, h) in input pixels and their scores (N,) from one
    image's raw output (``layout`` resolved: yolov5, yolov8, yolox or yolox-raw)."""
    if layout == "yolov8":
        rows = output.T.astype(np.float64)
        return rows[:, :4], rows[:, 4 + PERSON]
    rows = output.astype(np.float64)
    boxes = rows[:, :4].copy()
    if layout == "yolox-raw":
        cells, strides = yolox_grid(size)
        boxes[:, :2] = (boxes[:, :2] + cells) * strides[:, None]
        boxes[:, 2:] = np.exp(np.clip(boxes[:, 2:], -20, 20)) * strides[:, None]
    return boxes, rows[:, 4] * rows[:, 5 + PERSON]


class YoloDetector:
    """People from a YOLOv5 / YOLOv8 / YOLO11 / YOLOX ONNX export, best score first.

    ``path``: the ONNX file; ``config``: its settings (:class:`YoloConfig`, or a subclass
    naming a publisher's: :class:`YoloxConfig`, :class:`ByteTrackConfig`).  Raises
    ModelError naming the file when it is missing, unreadable or of no YOLO layout, and
    ConfigError when ``input_size`` contradicts the file's."""

    kind = "person"

    def __init__(self, path: str | Path, config: YoloConfig | None = None) -> None:
        self.path = Path(path)
        self.config = config or YoloConfig()
        if not self.path.is_file():
            raise ModelError(f"{self.path}: YOLO ONNX file not found")
        ort = import_onnxruntime(f"{self.path}: a YOLO detector")
        try:
            options = ort.SessionOptions()
            if self.config.threads is not None:
                options.intra_op_num_threads = self.config.threads
                options.inter_op_num_threads = 1
            self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelError(f"{self.path}: not a readable ONNX model ({first_line(exc)})") from exc
        inputs = self.session.get_inputs()
        if len(inputs) != 1 or len(inputs[0].shape) != 4:
            shapes = [list(i.shape) for i in inputs]
            raise ModelError(f"{self.path}: a YOLO model takes one (1, 3, H, W) image; inputs found: {shapes}")
        self.input_name = inputs[0].name
        self.size = self._input_size(inputs[0].shape)
        # One run on a grey frame tells the layout and checks the output's shape.
        grey = np.full((*self.size, 3), PAD_VALUE, np.uint8)
        self.layout = self._layout(self._forward(network_input(grey, self._pixels(self.config.layout))))
        self.pixels = self._pixels(self.layout)

    def _input_size(self, shape: list[Any]) -> tuple[int, int]:
        fixed = [d if isinstance(d, int) and d > 0 else None for d in shape[2:]]
        if all(fixed):
            if self.config.input_size is not None and tuple(self.config.input_size) != tuple(fixed):
                raise ConfigError(f"{self.path}: the model takes {fixed[0]}x{fixed[1]} inputs, not {self.config.input_size}")
            return int(fixed[0]), int(fixed[1])  # type: ignore[arg-type]
        return tuple(self.config.input_size or (DEFAULT_INPUT_SIDE, DEFAULT_INPUT_SIDE))  # type: ignore[return-value]

    def _pixels(self, layout: str) -> str:
        if self.config.pixels != "auto":
            return self.config.pixels
        return "bgr" if layout.startswith("yolox") else "rgb"

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        try:
            output = self.session.run(None, {self.input_name: batch})[0]
        except Exception as exc:
            raise ModelError(f"{self.path}: the model failed on a {self.size[0]}x{self.size[1]} input ({first_line(exc)})") from exc
        return np.asarray(output)

    def _layout(self, output: np.ndarray) -> str:
        shape = list(output.shape)
        if output.ndim != 3 or shape[0] != 1 or min(shape[1:]) < 5:
            raise ModelError(
                f"{self.path}: output shape {shape} is no YOLO layout: expected (1, N, 5+C) (YOLOv5, YOLOX) "
                "or (1, 4+C, N) (YOLOv8, YOLO11)"
            )
        transposed = shape[1] < shape[2]
        layout = self.config.layout
        if layout == "auto":
            layout = "yolov8" if transposed else "yolov5"
            cells = len(yolox_grid(self.size)[1])
            if not transposed and shape[1] == cells:
                layout = "yolox"
        if layout == "yolov8" and not transposed or layout in ("yolov5", "yolox", "yolox-raw") and transposed:
            raise ModelError(f"{self.path}: output shape {shape} does not fit the {layout} layout")
        if layout.startswith("yolox"):
            rows = output[0]
            if rows.shape[0] != len(yolox_grid(self.size)[1]):
                raise ModelError(
                    f"{self.path}: output shape {shape} has not one row per stride 8/16/32 cell of a "
                    f"{self.size[0]}x{self.size[1]} input, as YOLOX has"
                )
            if layout == "yolox":
                # Raw offsets stay near their cell; decoded centres reach across the input.
                layout = "yolox" if np.abs(rows[:, :2]).max() > max(YOLOX_STRIDES) else "yolox-raw"
        return layout

    @property
    def confident_score(self) -> float:
        return self.config.min_score

    def detect(self, image: np.ndarray) -> list[Detection]:
        """People in an RGB uint8 (H, W, 3) image down to the config's ``floor``, boxes in
        its pixels, best score first; those under ``confident_score`` are weak."""
        return self._detect(image, self.config.floor)

    def _detect(self, image: np.ndarray, floor: float) -> list[Detection]:
        if image.shape[0] == 0 or image.shape[1] == 0:
            return []
        rgb = image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        yolox = self.layout.startswith("yolox")
        # YOLOX and ByteTrack letterbox at the top-left with a bilinear resize.
        canvas, placement = letterbox(rgb, self.size, centred=not yolox, interpolation=cv2.INTER_LINEAR if yolox else None)
        output = self._forward(network_input(canvas, self.pixels))
        if output.ndim != 3 or output.shape[0] != 1:
            raise ModelError(f"{self.path}: output shape {list(output.shape)} changed between runs")
        boxes, scores = decode_outputs(output[0], self.layout, self.size)
        good = scores >= max(floor, 1e-6)
        rects, scores = placement.to_frame(boxes[good]), scores[good]
        keep = non_max_suppression(rects, scores, self.config.nms_iou)
        found = [clipped_detection(rects[i], float(scores[i]), image.shape, self.kind) for i in keep]
        return [d for d in found if d.box[2] > 0 and d.box[3] > 0]
