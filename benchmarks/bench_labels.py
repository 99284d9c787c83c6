"""Labels on a crowded frame: reid.draw against supervision's LabelAnnotator, in one run.

The scene: 30 people overlapping in the middle of the frame and one at each corner and
the middle of each edge (39 labels ``#<track> <identity or unknown> <distance>``), at
160x120, 768x576 and 1920x1080.  For each drawer: labels kept (at full length), pairs of
label rectangles that overlap, labels reaching outside the frame, and milliseconds a frame
(median of ``--repeat``).  supervision is measured when it is importable (``pip install
supervision``), with ``smart_position`` off and on and its own text scale for the frame;
its label rectangles are read from its annotator, as it computes them to draw.

Run: ``python benchmarks/bench_labels.py [--repeat 20] [--pictures DIR]``.
"""

from __future__ import annotations

import argparse
import time
from itertools import combinations
from pathlib import Path

import cv2
import numpy as np

from reid.draw import Label, draw_labels, make_label

SIZES = ((160, 120), (768, 576), (1920, 1080))  # (width, height)


def crowd(width: int, height: int, seed: int = 0) -> list[Label]:
    rng = np.random.default_rng(seed)
    boxes = []
    for _ in range(30):
        w, h = int(width * rng.uniform(0.05, 0.12)), int(height * rng.uniform(0.2, 0.4))
        boxes.append((int(rng.uniform(0.3, 0.6) * width), int(rng.uniform(0.3, 0.5) * height), w, h))
    w, h = width // 10, height // 4
    boxes += [(x, y, w, h) for x in (0, (width - w) // 2, width - w) for y in (0, (height - h) // 2, height - h)]
    return [make_label(box, n, None if n % 3 else f"person{n}", n / 20) for n, box in enumerate(boxes)]


def counts(rects: list[tuple[float, float, float, float]], width: int, height: int) -> tuple[int, int]:
    """(overlapping pairs, rectangles reaching outside the frame) of x0, y0, x1, y1 rectangles."""
    pairs = sum(a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3] for a, b in combinations(rects, 2))
    outside = sum(r[0] < 0 or r[1] < 0 or r[2] > width or r[3] > height for r in rects)
    return pairs, outside


def timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds)) * 1000


def ours(labels: list[Label], width: int, height: int, repeat: int, pictures: Path | None) -> str:
    canvas = np.zeros((height, width, 3), np.uint8)
    placed = draw_labels(canvas, labels)
    if pictures:
        cv2.imwrite(str(pictures / f"reid_{width}x{height}.png"), canvas)
    rects = [(p.rect[0], p.rect[1], p.rect[0] + p.rect[2], p.rect[1] + p.rect[3]) for p in placed if p is not None]
    full = sum(p is not None and p.text == label.texts[0] for p, label in zip(placed, labels))
    pairs, outside = counts(rects, width, height)
    ms = timed(lambda: draw_labels(np.zeros((height, width, 3), np.uint8), labels), repeat)
    return f"kept {len(rects)}/{len(labels)} ({full} full), overlapping pairs {pairs}, outside {outside}, {ms:.1f} ms"


def theirs(sv, labels: list[Label], width: int, height: int, smart: bool, repeat: int, pictures: Path | None) -> str:  # type: ignore[no-untyped-def]
    xyxy = np.array([(x, y, x + w, y + h) for x, y, w, h in (label.box for label in labels)], np.float32)
    detections = sv.Detections(xyxy=xyxy, class_id=np.zeros(len(labels), int), tracker_id=np.arange(len(labels)))
    texts = [label.texts[0] for label in labels]
    annotator = sv.LabelAnnotator(smart_position=smart, text_scale=sv.calculate_optimal_text_scale((width, height)))
    boxes = sv.BoxAnnotator()

    def run() -> np.ndarray:
        canvas = np.zeros((height, width, 3), np.uint8)
        return annotator.annotate(boxes.annotate(canvas, detections), detections, texts)

    if pictures:
        cv2.imwrite(str(pictures / f"supervision_{'smart' if smart else 'plain'}_{width}x{height}.png"), run())
    # The rectangles it draws: its own layout step, then its spreading when smart.
    props = annotator._get_label_properties(detections, texts)
    if smart:
        props = annotator._adjust_labels_in_frame((width, height), texts, props)
    rects = [tuple(float(v) for v in row[:4]) for row in props]
    pairs, outside = counts(rects, width, height)  # type: ignore[arg-type]
    ms = timed(run, repeat)
    return f"kept {len(rects)}/{len(labels)} ({len(rects)} full), overlapping pairs {pairs}, outside {outside}, {ms:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--pictures", type=Path, help="write each drawn frame here as PNG")
    args = parser.parse_args()
    if args.pictures:
        args.pictures.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        import supervision as sv

        print(f"supervision {sv.__version__}: import {time.perf_counter() - start:.2f} s")
    except ImportError:
        sv = None
        print("supervision is not installed: reid.draw alone")
    for width, height in SIZES:
        labels = crowd(width, height)
        print(f"{width}x{height}, {len(labels)} labels")
        print(f"  reid.draw                : {ours(labels, width, height, args.repeat, args.pictures)}")
        if sv is not None:
            for smart in (False, True):
                name = f"supervision smart={smart!s:5}"
                print(f"  {name}: {theirs(sv, labels, width, height, smart, args.repeat, args.pictures)}")


if __name__ == "__main__":
    main()
