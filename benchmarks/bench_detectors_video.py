"""Person detectors on the PETS2009 street (vtest.avi) scored against its ground truth.

Each person detector behind ``--detector`` runs on the same decoded frames of the video at
full resolution (768x576), and its confident boxes are scored against MOTChallenge 2015's
ground truth of the sequence (PETS09-S2L1, ``gt.txt``; ground-truth frame f is decoded
frame f-1; flag-0 rows dropped; a match at IoU >= 0.5, one to one, by py-motmetrics):
precision, recall, recall per person-height band (under 80 px, 80-120, over 120), and box
tightness, the median width and height of a matched detection over its ground-truth box
(1.00: as large).  The public Faster R-CNN detections shipped beside the ground truth
(``det-frcnn.txt``) are scored as a reference row, without a time.  Time is the wall time
of ``detect`` alone (decoding excluded), on however many cores the machine has.

Run: ``python benchmarks/bench_detectors_video.py [--every 1] [--detectors hog,ssdlite,...]
[--json FILE]`` (every run but ``hog`` needs ``reid models fetch
ssdlite_mobilenet_v2.voc-person`` once).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import cv2
import numpy as np

from reid.detect import PedestrianConfig, SSDLiteConfig, build_detector, confident_detections
from reid.evaluation.boxes import BoxScore, band_labels, read_mot_boxes, score_boxes

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "video"
RUNS = ("hog", "ssdlite", "ssdlite-min-height", "pedestrian", "pedestrian-min-height")


def read_frames(path: Path, every: int) -> dict[int, np.ndarray]:
    """RGB frames of the video by 0-based index, one in ``every``."""
    capture = cv2.VideoCapture(str(path))
    frames, index = {}, 0
    while True:
        ok, bgr = capture.read()
        if not ok:
            break
        if index % every == 0:
            frames[index] = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        index += 1
    capture.release()
    return frames


def build(run: str, min_height: int):
    if run == "ssdlite-min-height":
        return build_detector("ssdlite", "person", [SSDLiteConfig(min_height=min_height)])
    if run == "pedestrian-min-height":
        return build_detector("pedestrian", "person", [PedestrianConfig(min_height=min_height)])
    return build_detector(run, "person")


def detect_all(detector, frames: dict[int, np.ndarray]) -> tuple[dict[int, np.ndarray], float]:
    """Confident boxes by frame (those a photo keeps) and the mean milliseconds of one ``detect``."""
    detector.detect(next(iter(frames.values())))
    found, seconds = {}, 0.0
    for index, frame in frames.items():
        tick = time.perf_counter()
        detections = confident_detections(detector, frame)
        seconds += time.perf_counter() - tick
        found[index] = np.array([d.box for d in detections], dtype=np.float64).reshape(-1, 4)
    return found, 1000 * seconds / len(frames)


def row(name: str, score: BoxScore, ms: float | None) -> dict:
    return {
        "detector": name, "precision": round(score.precision, 4), "recall": round(score.recall, 4),
        **{f"recall {band}": round(score.band_recall(band), 4) for band in band_labels()},
        "width ratio": round(score.width_ratio, 3), "height ratio": round(score.height_ratio, 3),
        "detections": score.detections, "ms a frame": None if ms is None else round(ms, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", type=Path, default=DATA / "vtest.avi")
    parser.add_argument("--truth", type=Path, default=DATA / "pets09-s2l1", help="Folder of gt.txt and det-frcnn.txt.")
    parser.add_argument("--every", type=int, default=1, help="Score one frame in N.")
    parser.add_argument("--min-height", type=int, default=60, help="The *-min-height runs' smallest person, pixels.")
    parser.add_argument("--detectors", default=",".join(RUNS), help=f"Comma-separated runs among {', '.join(RUNS)}.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    truth = read_mot_boxes(args.truth / "gt.txt", min_confidence=1)
    frames = read_frames(args.video, args.every)
    if not frames:
        raise SystemExit(f"{args.video}: no frames decoded")
    indices = sorted(frames)
    height, width = frames[indices[0]].shape[:2]
    print(
        f"machine: {os.cpu_count()} cores, OpenCV {cv2.__version__} ({cv2.getNumThreads()} threads); "
        f"{len(frames)} frames ({width}x{height}, one in {args.every}) of {args.video.name}; "
        f"{sum(len(truth.get(i, ())) for i in indices)} ground-truth boxes; match at IoU >= 0.5"
    )
    bands = band_labels()
    print(f"{'detector':<36} {'prec':>6} {'recall':>6} " + " ".join(f"{'r ' + b:>9}" for b in bands)
          + f" {'w ratio':>7} {'h ratio':>7} {'ms/frame':>8}")
    rows = []

    def report(name: str, score: BoxScore, ms: float | None) -> None:
        r = row(name, score, ms)
        rows.append(r)
        shown = "-" if ms is None else f"{ms:.1f}"
        print(f"{name:<36} {score.precision:>6.1%} {score.recall:>6.1%} "
              + " ".join(f"{score.band_recall(b):>9.1%}" for b in bands)
              + f" {score.width_ratio:>7.2f} {score.height_ratio:>7.2f} {shown:>8}", flush=True)

    report("public Faster R-CNN (det-frcnn.txt)", score_boxes(truth, read_mot_boxes(args.truth / "det-frcnn.txt"), indices), None)
    for run in args.detectors.split(","):
        found, ms = detect_all(build(run, args.min_height), frames)
        report(run.replace("-min-height", f" min_height={args.min_height}"), score_boxes(truth, found, indices), ms)
    if args.json:
        args.json.write_text(json.dumps({"frames": len(frames), "every": args.every, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
