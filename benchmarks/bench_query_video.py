"""Frames per second of ``reid query`` on a video, broken down by stage.

Runs the library behind ``reid query`` (decode, detect, embed, track, search; optionally annotate
and write the output video) on the real pedestrian video (``../shared/data/video/vtest.avi``,
768x576) when it is there, else on a synthetic street video, and prints seconds, ms per
frame and share of the wall time for each stage, with decoding alone measured beside it.

The encoder is a real network of ``--arch`` at ``--input`` (untrained unless ``--model``
names a model folder: the speed is the same), and the gallery is a real one holding
``--gallery-items`` clustered embeddings, so the search costs what it would in use.

Run: ``python benchmarks/bench_query_video.py`` (about a minute on 2 cores);
``--max-frames 0`` for the whole video, ``--detect-scale 0.5`` for a faster detector.
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

from reid.detect import PersonDetector, PersonDetectorConfig
from reid.gallery import Gallery, ItemMeta
from reid.models import BACKBONES, ModelCard, build_network, load_encoder, save_model
from reid.pipeline import QueryConfig, QueryOutputs, QueryRun, TrackSummary, open_source
from reid.pipeline.synthetic import write_street_video

REAL_VIDEO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "video" / "vtest.avi"


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--video", type=Path, default=None)
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: untrained --arch)")
    parser.add_argument("--arch", default="resnet50", choices=sorted(BACKBONES))
    parser.add_argument("--input", default="256x128", help="encoder input HxW")
    parser.add_argument("--max-frames", type=int, default=40, help="0: the whole video")
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--detect-scale", type=float, default=1.0)
    parser.add_argument("--gallery-items", type=int, default=10_000)
    parser.add_argument("--save-video", action="store_true", help="also annotate and write an output video")
    parser.add_argument("--no-track", action="store_true", help="decide every detection alone")
    parser.add_argument(
        "--embed-threads", type=int, default=1, help="PyTorch threads while embedding (0: PyTorch's default)"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-query-"))
    video = args.video or (REAL_VIDEO if REAL_VIDEO.is_file() else None)
    if video is None:
        video = work / "street.avi"
        write_street_video(video, count=max(args.max_frames, 1), fps=10, size=(768, 576))
        print(f"real video absent; wrote a synthetic one: {video}")
    if args.model:
        encoder = load_encoder(args.model, device="cpu")
    else:
        height, width = (int(v) for v in args.input.lower().split("x"))
        card = ModelCard(
            name="bench",
            architecture=args.arch,
            embedding_dim=BACKBONES[args.arch].out_dim,
            input_size=(height, width),
            num_classes=0,
            threshold=1.0,
        )
        save_model(build_network(card, pretrained=None), card, work / "model")
        encoder = load_encoder(work / "model", device="cpu")

    rng = np.random.default_rng(0)
    with Gallery.create(work / "gallery", encoder.card) as gallery:
        vectors = rng.standard_normal((args.gallery_items, encoder.dim), dtype=np.float32)
        gallery.add(vectors, [ItemMeta(f"id{i // 8:05d}") for i in range(args.gallery_items)])

    max_frames = args.max_frames or None
    source = open_source(video, every=args.every, max_frames=max_frames)
    print(
        f"machine: {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"OpenCV {cv2.__version__}"
    )
    print(
        f"video: {video.name} ({source.total_frames} frames at {source.fps} fps), every {args.every}, "
        f"max {max_frames or 'all'}; encoder {encoder.card.architecture} {encoder.card.input_size[0]}x"
        f"{encoder.card.input_size[1]} -> {encoder.dim}-d; gallery {args.gallery_items:,} items (flat)"
    )
    decode_fps = decode_only(video, max_frames)

    detector = PersonDetector(PersonDetectorConfig(scale=args.detect_scale))
    with Gallery.open(work / "gallery") as gallery:
        config = QueryConfig(
            batch_size=args.batch_size, track=not args.no_track, embed_threads=args.embed_threads or None
        )
        run = QueryRun(gallery, encoder, source, config, detector=detector)
        annotate_s = 0.0
        tracks: list[TrackSummary] = []
        with QueryOutputs(
            video=work / "out.mp4" if args.save_video else None, fps=(source.fps or 10) / args.every
        ) as outputs:
            for result in run:
                tracks += result.ended_tracks
                tick = time.perf_counter()
                outputs.write(result)
                annotate_s += time.perf_counter() - tick
    tracks += run.finish_tracks()
    stats = run.stats
    frames = max(stats.frames, 1)
    stages = dict(stats.stage_seconds)
    if args.save_video:
        stages["annotate+write"] = annotate_s
    print(
        f"\n{stats.frames} frames, {stats.detections} detections ({stats.detections / frames:.2f} a frame), "
        f"{stats.wall_seconds:.2f} s wall"
    )
    print(f"{'stage':<15} {'seconds':>8} {'ms/frame':>9} {'share':>7} {'alone fps':>10}")
    for name, seconds in stages.items():
        alone = frames / seconds if seconds > 0 else float("inf")
        share = seconds / stats.wall_seconds
        print(f"{name:<15} {seconds:>8.2f} {1000 * seconds / frames:>9.1f} {share:>6.1%} {alone:>10.1f}")
    per_frame = 1000 * stats.wall_seconds / frames
    print(f"{'total':<15} {stats.wall_seconds:>8.2f} {per_frame:>9.1f} {'':>7} {stats.fps:>10.2f}")
    print(
        f"\nreid query: {stats.fps:.2f} frames/s end to end; decoding alone: {decode_fps:.0f} frames/s; "
        f"embedding: {stats.detections / max(stages['embed'], 1e-9):.1f} crops/s"
    )
    if run.tracker is not None:
        lengths = [t.frames for t in tracks]
        print(
            f"tracks of at least 2 boxes: {len(tracks)}, {np.mean(lengths) if lengths else 0:.1f} frames a track "
            f"(median {np.median(lengths) if lengths else 0:.0f}, longest {max(lengths, default=0)})"
        )


if __name__ == "__main__":
    main()
