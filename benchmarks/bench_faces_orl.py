"""Face detectors on the ORL faces: faces found of 400 and milliseconds per photo.

Every ORL photo (40 people x 10, 92x112 grey, one frontal-ish face each) goes through each
face detector behind ``--detector``: ``haar`` (OpenCV's cascade, photos under 160 px
enlarged 2x first) and ``yunet`` (libfacedetection through yuface).  A photo counts as
found when the detector returns at least one face; time is the wall time of ``detect``
alone, decoding excluded, after one warm-up call.

Run: ``python benchmarks/bench_faces_orl.py [--data ../shared/data/orl_faces] [--json FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import cv2

from reid.data.io import read_image
from reid.detect import build_detector

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "orl_faces"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="ORL root: s1..s40/1..10.pgm")
    parser.add_argument("--detectors", nargs="+", default=["haar", "yunet"])
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    photos = sorted(args.data.glob("s*/*.pgm"))
    if not photos:
        raise SystemExit(f"{args.data}: no ORL photos (s*/N.pgm)")
    images = [read_image(path) for path in photos]
    print(f"machine: {os.cpu_count()} cores, OpenCV {cv2.__version__}; {len(images)} photos from {args.data}")
    results = {}
    for name in args.detectors:
        detector = build_detector(name, "face")
        detector.detect(images[0])
        found, seconds = 0, 0.0
        for image in images:
            tick = time.perf_counter()
            faces = detector.detect(image)
            seconds += time.perf_counter() - tick
            found += bool(faces)
        results[name] = {"photos": len(images), "found": found, "ms_per_photo": round(1000 * seconds / len(images), 2)}
        print(f"{name:<6} faces found in {found} of {len(images)} photos, {1000 * seconds / len(images):.1f} ms a photo")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
