"""Frames per second of ``reid query`` on a video, end to end and by stage, per person detector.

Runs the library behind ``reid query`` (decode and detect on their own threads, then embed,
track and search; ``--sequential`` runs every stage in turn) on the real pedestrian video
(``../shared/data/video/vtest.avi``, 768x576, 795 frames) at full resolution, the whole
video unless ``--max-frames`` says otherwise, once per detector of ``--detectors``.  For
each it prints frames/s end to end, each stage's busy seconds (stages overlap on threads,
so their sum can exceed the wall time), detections per frame against the 5.85 people a
frame of the video's ground truth (MOTChallenge 2015 PETS09-S2L1: 4,650 boxes in 795
frames), the share of the reported boxes that lie on moving people (no box-level ground
truth is at hand, so OpenCV's MOG2 background subtraction stands in: a check that
understates precision, as people standing still count against it), and the tracks found
with their length in frames.

The encoder is ``--model`` when given (e.g. ``models/demo``), else an untrained stand-in
of ``--arch`` at ``--input`` (the demo recipe's ResNet-18 at 64x32 by default: same
speed); the gallery holds ``--gallery-items`` clustered embeddings, so the search costs
what it would in use.

Run: ``python benchmarks/bench_query_video.py --max-frames 100`` (about a minute on 2
cores); no ``--max-frames`` for the whole video.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from reid.detect import Detector, SSDLiteConfig, build_detector
from reid.gallery import Gallery, ItemMeta
from reid.models import BACKBONES, Encoder, load_encoder, stand_in_model
from reid.pipeline import QueryConfig, QueryRun, TrackSummary, open_source
from reid.pipeline.synthetic import write_street_video

REAL_VIDEO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "video" / "vtest.avi"
TRUTH_PER_FRAME = 4650 / 795
# Frames the background model learns from before boxes are checked against it.
MOTION_WARMUP = 48
# A box is on a moving person when this share of its pixels moves.
MOVING_SHARE = 0.15


def person_detector(spec: str, min_height: int | None) -> Detector:
    """The person detector named ``spec`` (hog, ssdlite, yolo:FILE.onnx); ``min_height``
    applies to ssdlite."""
    options = [SSDLiteConfig(min_height=min_height)] if min_height and spec == "ssdlite" else []
    return build_detector(spec, "person", options)


def moving_pixels(path: Path, frames: int | None) -> list[np.ndarray]:
    """For each frame, the integral image of its moving pixels (OpenCV's MOG2 background
    subtractor; shadows are not moving): a check on the boxes that needs no ground truth."""
    capture = cv2.VideoCapture(str(path))
    subtractor = cv2.createBackgroundSubtractorMOG2(history=200, varThreshold=16, detectShadows=True)
    integrals = []
    while frames is None or len(integrals) < frames:
        ok, bgr = capture.read()
        if not ok:
            break
        integrals.append(cv2.integral((subtractor.apply(bgr) == 255).astype(np.float32)))
    capture.release()
    return integrals


def moving_share(integral: np.ndarray, box: tuple[int, int, int, int]) -> float:
    """The share of ``box``'s pixels that move."""
    x, y, w, h = box
    if w <= 0 or h <= 0:
        return 0.0
    total = integral[y + h, x + w] - integral[y, x + w] - integral[y + h, x] + integral[y, x]
    return float(total) / (w * h)


def decode_only(path: Path, frames: int | None) -> float:
    capture = cv2.VideoCapture(str(path))
    count, start = 0, time.perf_counter()
    while frames is None or count < frames:
        ok, bgr = capture.read()
        if not ok:
            break
        cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        count += 1
    capture.release()
    return count / (time.perf_counter() - start)


def run_one(
    args: argparse.Namespace, spec: str, video: Path, gallery_folder: Path, encoder: Encoder, moving: list[np.ndarray]
) -> None:
    max_frames = args.max_frames or None
    source = open_source(video, every=args.every, max_frames=max_frames)
    config = QueryConfig(
        batch_size=args.batch_size,
        track=not args.no_track,
        embed_threads=args.embed_threads or None,
        detect_scale=args.detect_scale,
        threaded=not args.sequential,
        embed_every=args.embed_every,
    )
    tracks: list[TrackSummary] = []
    with Gallery.open(gallery_folder) as gallery:
        run = QueryRun(gallery, encoder, source, config, detector=person_detector(spec, args.min_height))
        checked = on_moving = 0
        for result in run:
            tracks += result.ended_tracks
            if MOTION_WARMUP <= result.frame < len(moving):
                shares = [moving_share(moving[result.frame], d.box) for d in result.detections]
                checked += len(shares)
                on_moving += sum(share >= MOVING_SHARE for share in shares)
        tracks += run.finish_tracks()
    stats = run.stats
    frames = max(stats.frames, 1)
    mode = "sequential" if args.sequential else "threaded"
    height = f" --min-height {args.min_height}" if args.min_height and spec == "ssdlite" else ""
    height += f" --embed-every {args.embed_every}" if args.embed_every != 1 else ""
    print(
        f"\n== {spec}{height} (scale {args.detect_scale}, {mode}): {stats.frames} frames, "
        f"{stats.detections} detections "
        f"({stats.detections / frames:.2f} a frame against {TRUTH_PER_FRAME:.2f} in the ground truth), "
        f"{stats.wall_seconds:.1f} s wall, {stats.dropped} dropped"
    )
    print(f"{'stage':<8} {'busy s':>8} {'ms/frame':>9} {'of wall':>8} {'alone fps':>10}")
    for name, seconds in stats.stage_seconds.items():
        alone = frames / seconds if seconds > 0 else float("inf")
        share = seconds / stats.wall_seconds
        print(f"{name:<8} {seconds:>8.2f} {1000 * seconds / frames:>9.1f} {share:>7.0%} {alone:>10.1f}")
    crops_per_second = stats.embedded / max(stats.stage_seconds["embed"], 1e-9)
    print(
        f"end to end: {stats.fps:.2f} frames/s; {stats.embedded} crops embedded "
        f"({stats.embedded / max(stats.detections, 1):.2f} a reported detection), {crops_per_second:.0f} crops/s"
    )
    if checked:
        print(
            f"boxes on moving people: {on_moving / checked:.1%} of {checked} from frame {MOTION_WARMUP} "
            f"({on_moving / max(stats.frames - MOTION_WARMUP, 1):.2f} a frame; at least {MOVING_SHARE:.0%} of the box "
            "moving; people standing still count as misses, so this understates precision)"
        )
    if run.tracker is not None:
        lengths = [t.frames for t in tracks]
        print(
            f"tracks of at least {config.tracker.min_boxes} boxes: {len(tracks)}, "
            f"{np.mean(lengths) if lengths else 0:.1f} frames a track "
            f"(median {np.median(lengths) if lengths else 0:.0f}, longest {max(lengths, default=0)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--video", type=Path, default=None)
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: untrained --arch)")
    parser.add_argument("--arch", default="resnet18", choices=sorted(BACKBONES))
    parser.add_argument("--input", default="64x32", help="encoder input HxW")
    parser.add_argument("--detectors", default="hog", help="comma-separated person detectors")
    parser.add_argument("--max-frames", type=int, default=0, help="0: the whole video")
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--detect-scale", type=float, default=1.0)
    parser.add_argument("--min-height", type=int, default=0, help="ssdlite: smallest person sought (0: one pass)")
    parser.add_argument("--embed-every", type=int, default=1, help="embed a track's crop in one of N frames")
    parser.add_argument("--gallery-items", type=int, default=10_000)
    parser.add_argument("--no-track", action="store_true", help="decide every detection alone")
    parser.add_argument("--sequential", action="store_true", help="every stage in turn on one thread")
    parser.add_argument(
        "--embed-threads", type=int, default=1, help="PyTorch threads while embedding (0: PyTorch's default)"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-query-"))
    video = args.video or (REAL_VIDEO if REAL_VIDEO.is_file() else None)
    if video is None:
        video = work / "street.avi"
        write_street_video(video, count=max(args.max_frames, 100), fps=10, size=(768, 576))
        print(f"real video absent; wrote a synthetic one: {video}")
    if args.model:
        encoder = load_encoder(args.model, device="cpu")
    else:
        height, width = (int(v) for v in args.input.lower().split("x"))
        folder = stand_in_model(
            work / "model", "person", name="bench", architecture=args.arch,
            embedding_dim=BACKBONES[args.arch].out_dim, input_size=(height, width), threshold=1.0,
        )  # fmt: skip
        encoder = load_encoder(folder, device="cpu")

    rng = np.random.default_rng(0)
    with Gallery.create(work / "gallery", encoder.card) as gallery:
        vectors = rng.standard_normal((args.gallery_items, encoder.dim), dtype=np.float32)
        gallery.add(vectors, [ItemMeta(f"id{i // 8:05d}") for i in range(args.gallery_items)])

    max_frames = args.max_frames or None
    source = open_source(video, every=args.every, max_frames=max_frames)
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, torch {torch.__version__}, "
        f"OpenCV {cv2.__version__}"
    )
    print(
        f"video: {video.name} ({source.total_frames} frames at {source.fps} fps), every {args.every}, "
        f"max {max_frames or 'all'}; encoder {encoder.card.architecture} {encoder.card.input_size[0]}x"
        f"{encoder.card.input_size[1]} -> {encoder.dim}-d; gallery {args.gallery_items:,} items (flat); "
        f"decoding alone {decode_only(video, max_frames):.0f} frames/s"
    )
    moving = moving_pixels(video, max_frames * args.every if max_frames else None)
    for spec in args.detectors.split(","):
        run_one(args, spec.strip(), video, work / "gallery", encoder, moving)


if __name__ == "__main__":
    main()
