"""Person detectors on the PETS2009 street (vtest.avi): detections a frame and time a frame.

Each person detector behind ``--detector`` runs on the same frames of the video at full
resolution (768x576): ``hog`` (OpenCV's default people detector), ``ssdlite`` (the whole
frame at the network's 300x300) and ``ssdlite`` with ``min_height`` (a second, upscaled
pass for people down to that height).  The MOTChallenge 2015 ground truth of this sequence
holds 4,650 person boxes in its 795 frames, 5.85 a frame; counts above that include false
or duplicate boxes, so they are reported with the share of boxes wider than tall, which
pedestrians of this street never are.  Time is the wall time of ``detect`` alone
(decoding excluded).

Run: ``python benchmarks/bench_detectors_video.py [--video ../shared/data/video/vtest.avi]
[--every 5] [--min-height 60] [--json FILE]`` (needs ``reid models fetch
ssdlite_mobilenet_v2.voc-person`` once).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import cv2

from reid.detect import SSDLiteConfig, build_detector

DEFAULT_VIDEO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "video" / "vtest.avi"
TRUTH_PER_FRAME = 4650 / 795


def read_frames(path: Path, every: int) -> list:
    capture = cv2.VideoCapture(str(path))
    frames, index = [], 0
    while True:
        ok, bgr = capture.read()
        if not ok:
            break
        if index % every == 0:
            frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
        index += 1
    capture.release()
    return frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", type=Path, default=DEFAULT_VIDEO)
    parser.add_argument("--every", type=int, default=5, help="Use one frame in N.")
    parser.add_argument("--min-height", type=int, default=60, help="ssdlite's smallest person, pixels.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    frames = read_frames(args.video, args.every)
    if not frames:
        raise SystemExit(f"{args.video}: no frames decoded")
    height, width = frames[0].shape[:2]
    print(
        f"machine: {os.cpu_count()} cores, OpenCV {cv2.__version__} ({cv2.getNumThreads()} threads); "
        f"{len(frames)} frames ({width}x{height}, one in {args.every}) of {args.video.name}; "
        f"ground truth {TRUTH_PER_FRAME:.2f} people a frame"
    )
    runs = {
        "hog": build_detector("hog", "person"),
        "ssdlite": build_detector("ssdlite", "person"),
        f"ssdlite min_height={args.min_height}": build_detector(
            "ssdlite", "person", [SSDLiteConfig(min_height=args.min_height)]
        ),
    }
    results = {}
    print(f"{'detector':<24} {'det/frame':>9} {'wide':>6} {'ms/frame':>9}")
    for name, detector in runs.items():
        detector.detect(frames[0])
        count, wide, seconds = 0, 0, 0.0
        for frame in frames:
            tick = time.perf_counter()
            found = detector.detect(frame)
            seconds += time.perf_counter() - tick
            count += len(found)
            wide += sum(d.box[2] > d.box[3] for d in found)
        per_frame, ms = count / len(frames), 1000 * seconds / len(frames)
        results[name] = {"frames": len(frames), "detections_per_frame": round(per_frame, 3),
                         "wide_share": round(wide / max(count, 1), 4), "ms_per_frame": round(ms, 1)}
        print(f"{name:<24} {per_frame:>9.2f} {wide / max(count, 1):>6.1%} {ms:>9.1f}")
    if args.json:
        args.json.write_text(json.dumps({"truth_per_frame": round(TRUTH_PER_FRAME, 3), **results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
