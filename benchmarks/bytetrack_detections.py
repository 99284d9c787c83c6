"""A MOTChallenge detection file from ByteTrack's YOLOX-Nano person detector (MOT17 + CrowdHuman).

Every frame of ``--video`` is letterboxed into 1088x608 (scaled by one factor, placed at the
top left, the rest filled with grey 114), turned RGB, divided by 255 and normalized by
ImageNet's mean and standard deviation, as ByteTrack's own preprocessing does for this
model; its raw YOLOX head, (1, 13566, 6) rows of (x offset, y offset, log w, log h,
objectness, person score) over the grids of strides 8, 16 and 32, is decoded (centre =
(offset + cell) * stride, size = exp(log size) * stride), scored objectness x person
score, kept from ``--min-score`` (0.1: everything ByteTrack's tracker can use) and
thinned by non-maximum suppression at IoU 0.7 (ByteTrack's for this model). Boxes are
written in pixels of the full frame, frame f = decoded frame f-1, with their scores.

Run: ``python benchmarks/bytetrack_detections.py --model ../shared/weights/bytetrack_nano_mot17.onnx
--video ../shared/data/video/vtest.avi --out DET.txt`` (about a minute on one core for
PETS09-S2L1's 795 frames). The file is data, kept outside the repository.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort

from reid.track.mot import MotRow, write_mot

INPUT_HEIGHT, INPUT_WIDTH = 608, 1088
PAD = 114
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
STRIDES = (8, 16, 32)
NMS_IOU = 0.7


def grids() -> tuple[np.ndarray, np.ndarray]:
    """(13566, 2) cell of each output row and (13566, 1) its stride."""
    cells, strides = [], []
    for stride in STRIDES:
        ys, xs = np.meshgrid(np.arange(INPUT_HEIGHT // stride), np.arange(INPUT_WIDTH // stride), indexing="ij")
        cells.append(np.stack([xs.ravel(), ys.ravel()], axis=1))
        strides.append(np.full((xs.size, 1), stride))
    return np.concatenate(cells).astype(np.float32), np.concatenate(strides).astype(np.float32)


def detect(session: ort.InferenceSession, frame: np.ndarray, min_score: float) -> list[tuple[float, ...]]:
    """(x, y, w, h, score) boxes of one BGR frame, in its pixels."""
    height, width = frame.shape[:2]
    ratio = min(INPUT_HEIGHT / height, INPUT_WIDTH / width)
    resized = cv2.resize(frame, (round(width * ratio), round(height * ratio)), interpolation=cv2.INTER_LINEAR)
    canvas = np.full((INPUT_HEIGHT, INPUT_WIDTH, 3), PAD, np.uint8)
    canvas[: resized.shape[0], : resized.shape[1]] = resized
    pixels = (canvas[:, :, ::-1].astype(np.float32) / 255.0 - MEAN) / STD
    batch = np.ascontiguousarray(pixels.transpose(2, 0, 1)[None])
    out = session.run(None, {session.get_inputs()[0].name: batch})[0][0]
    cells, strides = grids()
    centre = (out[:, :2] + cells) * strides
    size = np.exp(out[:, 2:4]) * strides
    score = out[:, 4] * out[:, 5]
    keep = score >= min_score
    centre, size, score = centre[keep] / ratio, size[keep] / ratio, score[keep]
    boxes = np.concatenate([centre - size / 2, size], axis=1)
    chosen = cv2.dnn.NMSBoxes(boxes.tolist(), score.tolist(), min_score, NMS_IOU)
    return [(*map(float, boxes[i]), float(score[i])) for i in np.asarray(chosen).reshape(-1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--video", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--min-score", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    session = ort.InferenceSession(str(args.model), options, providers=["CPUExecutionProvider"])
    capture = cv2.VideoCapture(str(args.video))
    rows, frame_number = [], 0
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frame_number += 1
        for x, y, w, h, score in detect(session, frame, args.min_score):
            rows.append(MotRow(frame_number, -1, (x, y, w, h), score))
    capture.release()
    count = write_mot(args.out, rows)
    print(f"{count} boxes over {frame_number} frames -> {args.out}")


if __name__ == "__main__":
    main()
