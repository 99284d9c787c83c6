"""Every person detector present, on the PETS2009 street (vtest.avi = PETS09-S2L1), against
its ground truth: each one's score threshold chosen on the first half of the frames and its
precision and recall reported on the second half, plus its time a frame on 1 and 2 threads.

Each detector runs once over every frame at its floor (every box of score >= 0.1 kept,
the boxes a tracker gets); a threshold then keeps the boxes at or above it.  A box
survives the detector's NMS or not whatever the threshold (a box is only ever dropped for
a better one), so scoring the kept boxes at a threshold is exactly running the detector
with that threshold.  Matching: MOTChallenge's, IoU >= 0.5, one to one in each frame
(``reid.evaluation.boxes``; ground-truth frame f is decoded frame f-1, flag-0 rows
dropped).  The threshold chosen is the one of highest F1 (the harmonic mean of precision
and recall) on the first half, among 0.10, 0.15, ..., 0.90; the second half, which never
took part in the choice, gives the figures reported, next to those at the detector's
configured ``min_score`` (its ``confident_score``).  ``static``: the frames holding the most
repeated false box, the number of frames in which an unmatched box overlaps (IoU >= 0.5)
one same unmatched box, the largest such count over all of them: a static object that
passes for a person gives a false track for as long as it is seen (YOLOX-COCO sees one at
the left edge of this street).

Time is the wall time of ``detect`` (preprocessing, network, decoding, NMS; decoding the
video excluded) with the runtime held to 1 thread over every frame, then to 2 threads over
one frame in ``--time-every``.  The machine's load average is printed with the table: on a
shared machine the times are noisy, compare them within one run.

Detectors are found where ``--detector`` finds them (the registry cache), else in
``--weights`` (a folder laid out as the published weights beside the project):

    nice -n 10 python benchmarks/bench_detectors.py [--detectors bytetrack-nano,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import cv2
import motmetrics
import numpy as np

from reid.detect import DETECTORS, build_detector
from reid.evaluation.boxes import match_frame, read_mot_boxes, score_boxes

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "video"
WEIGHTS = ROOT.parent / "shared" / "weights"
# Each detector's file inside --weights, when its model is not in the cache.
SHARED_FILES = {
    "bytetrack-nano": "bytetrack_nano_mot17.onnx",
    "yolox-nano": "yolox_nano_coco_reexport.onnx",
    "person-detection-retail-0013": "omz/person-detection-retail-0013/FP32/person-detection-retail-0013.xml",
    "pedestrian-detection-adas-0002": "omz/pedestrian-detection-adas-0002/FP16/pedestrian-detection-adas-0002.xml",
}
RUNS = ("bytetrack-nano", "yolox-nano", "yolox-tiny", "yolox-s", "pedestrian-detection-adas-0002",
        "person-detection-retail-0013", "pedestrian")
THRESHOLDS = tuple(round(0.1 + 0.05 * i, 2) for i in range(17))


def frames(path: Path, every: int = 1):
    """(0-based index, RGB frame) of the video, one in ``every``."""
    capture = cv2.VideoCapture(str(path))
    index = 0
    try:
        while True:
            ok, bgr = capture.read()
            if not ok:
                return
            if index % every == 0:
                yield index, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
            index += 1
    finally:
        capture.release()


def spec_of(name: str, weights: Path) -> str | None:
    """The ``--detector`` value that runs ``name`` here: its name when its model is in the
    cache, else ``NAME:FILE`` on its file in ``weights``; None when neither has it."""
    if DETECTORS[name].present():
        return name
    if name in SHARED_FILES and (weights / SHARED_FILES[name]).is_file():
        return f"{name}:{weights / SHARED_FILES[name]}"
    return None


def build(spec: str, name: str, threads: int):
    """The detector, held to ``threads`` (its runtime's setting, or OpenCV's)."""
    config = DETECTORS[name].config()
    if hasattr(config, "threads"):
        return build_detector(spec, "person", [replace(config, threads=threads)])
    cv2.setNumThreads(threads)
    return build_detector(spec, "person")


def run(detector, video: Path, every: int = 1) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray], float]:
    """Boxes and scores (every one down to the floor) by frame, and the mean ms of ``detect``."""
    boxes, scores, seconds, count = {}, {}, 0.0, 0
    for index, frame in frames(video, every):
        if count == 0:
            detector.detect(frame)  # warm-up, not timed
        tick = time.perf_counter()
        found = detector.detect(frame)
        seconds += time.perf_counter() - tick
        count += 1
        boxes[index] = np.array([d.box for d in found], np.float64).reshape(-1, 4)
        scores[index] = np.array([d.score for d in found], np.float64)
    return boxes, scores, 1000 * seconds / max(count, 1)


def kept(boxes: dict, scores: dict, threshold: float) -> dict[int, np.ndarray]:
    return {i: b[scores[i] >= threshold] for i, b in boxes.items()}


def f1(score) -> float:
    p, r = score.precision, score.recall
    return 2 * p * r / (p + r) if p + r else 0.0


def static_false_frames(truth: dict, found: dict, indices) -> int:
    """The most frames in which one false box recurs: for each unmatched box, the frames
    holding an unmatched box that overlaps it at IoU >= 0.5; the largest count."""
    false, frame_of = [], []
    for i in indices:
        f = found.get(i, np.empty((0, 4)))
        matched = {fi for _, fi in match_frame(np.asarray(truth.get(i, np.empty((0, 4)))).reshape(-1, 4), f)}
        for j in range(len(f)):
            if j not in matched:
                false.append(f[j])
                frame_of.append(i)
    if not false:
        return 0
    boxes, frame_of = np.asarray(false), np.asarray(frame_of)
    overlaps = motmetrics.distances.boxiou(boxes[:, None], boxes[None, :]) >= 0.5
    return max(len(np.unique(frame_of[row])) for row in overlaps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", type=Path, default=DATA / "vtest.avi")
    parser.add_argument("--truth", type=Path, default=DATA / "pets09-s2l1" / "gt.txt")
    parser.add_argument("--weights", type=Path, default=WEIGHTS, help="Published weights, for detectors not in the cache.")
    parser.add_argument("--detectors", default=",".join(RUNS), help="Comma-separated detector names.")
    parser.add_argument("--time-every", type=int, default=4, help="Time 2 threads on one frame in N.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    truth = read_mot_boxes(args.truth, min_confidence=1)
    count = sum(1 for _ in frames(args.video))
    if not count:
        raise SystemExit(f"{args.video}: no frames decoded")
    half = count // 2
    choose, report, every = range(half), range(half, count), range(count)
    print(f"{args.video.name}: {count} frames; threshold chosen on frames 1-{half}, reported on {half + 1}-{count} "
          f"({sum(len(truth.get(i, ())) for i in report)} ground-truth boxes); {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    print(f"{'detector':<32} {'chosen':>6} {'prec':>6} {'recall':>6} {'F1':>6} | {'default':>7} {'prec':>6} {'recall':>6} "
          f"| {'all prec':>8} {'recall':>6} {'static':>6} {'@0.5':>5} | {'ms 1 thr':>8} {'2 thr':>6} {'load':>5}")
    rows = []
    for name in args.detectors.split(","):
        spec = spec_of(name, args.weights)
        if spec is None:
            print(f"{name:<32} not present (neither in the cache nor in {args.weights})")
            continue
        detector = build(spec, name, 1)
        boxes, scores, ms1 = run(detector, args.video)
        _, _, ms2 = run(build(spec, name, 2), args.video, args.time_every)
        sweep = {t: f1(score_boxes(truth, kept(boxes, scores, t), choose)) for t in THRESHOLDS if t >= detector_floor(detector)}
        chosen = max(sweep, key=lambda t: (sweep[t], t))
        static_sweep = {t: static_false_frames(truth, kept(boxes, scores, t), choose) for t in sweep}
        default = detector.confident_score
        at_chosen = score_boxes(truth, kept(boxes, scores, chosen), report)
        at_default = score_boxes(truth, kept(boxes, scores, default), report)
        whole = score_boxes(truth, kept(boxes, scores, default), every)
        static = static_false_frames(truth, kept(boxes, scores, default), every)
        static_half = static_false_frames(truth, kept(boxes, scores, 0.5), every) if default != 0.5 else static
        load = os.getloadavg()[0]
        print(f"{name:<32} {chosen:>6.2f} {at_chosen.precision:>6.1%} {at_chosen.recall:>6.1%} {f1(at_chosen):>6.1%} | "
              f"{default:>7.2f} {at_default.precision:>6.1%} {at_default.recall:>6.1%} | {whole.precision:>8.1%} "
              f"{whole.recall:>6.1%} {static:>6} {static_half:>5} | {ms1:>8.1f} {ms2:>6.1f} {load:>5.1f}", flush=True)
        rows.append({
            "detector": name, "chosen": chosen, "f1 by threshold (first half)": sweep,
            "static false frames by threshold (first half)": static_sweep,
            "second half at chosen": {"precision": at_chosen.precision, "recall": at_chosen.recall},
            "default": default, "second half at default": {"precision": at_default.precision, "recall": at_default.recall},
            "all frames at default": {"precision": whole.precision, "recall": whole.recall},
            "static false frames at default": static, "static false frames at 0.5": static_half,
            "ms 1 thread": ms1, "ms 2 threads": ms2, "load after": load,
        })
    if args.json:
        args.json.write_text(json.dumps({"frames": count, "chosen on": [1, half], "rows": rows}, indent=2) + "\n")


def detector_floor(detector) -> float:
    """The lowest score the detector returns (its config's floor; 0 when it has none)."""
    config = getattr(detector, "config", None)
    return getattr(config, "floor", 0.0)


if __name__ == "__main__":
    main()
