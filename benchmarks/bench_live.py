"""The live path end to end: ``reid query --mot`` on PETS09-S2L1, scored, with frames/s against 10.

Runs the library behind ``reid query`` (decoding, detection and embedding on their own
threads, :class:`reid.pipeline.frames.FramePipeline`) on ``../shared/data/video/vtest.avi``
(PETS09-S2L1, 768x576, 795 frames) with the query's defaults: the best person detector
present (``reid.detect``'s default) unless ``--detector`` names one, and a published Re-ID
model by name (``--model``, default person-reidentification-retail-0277; it must be in the
model cache: ``reid models add``).  The gallery holds five Market-1501 people (none of them
in the video).  The tracked boxes are written as ``reid query --mot`` writes them and scored
against the sequence's ground truth (MOTChallenge's rules, ``reid.evaluation.mot``).

``--fps`` is the rate handed to the tracker (default: the container's 10; MOT15 lists the
sequence at 7).  PETS09-S2L1 is the sequence the live defaults were tuned on: its figures
are not held-out figures.

Prints MOTA, IDF1, HOTA, ID switches, frames/s end to end and its ratio to the 10 frames/s
a live camera asks, each stage's busy seconds (stages overlap on threads), and the load
average before and after (the figures of a shared machine move with it).

Run: ``python benchmarks/bench_live.py`` (about two minutes on 2 cores);
``--max-frames 200`` for a quicker look.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from reid.detect import default_detector
from reid.evaluation.mot import score_tracks, scored_truth
from reid.gallery import Gallery
from reid.models import load_encoder
from reid.pipeline import QueryConfig, QueryOutputs, QueryRun, open_source
from reid.track import TrackerConfig
from reid.track.mot import read_mot

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mot import market_gallery  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
VIDEO = SHARED / "video" / "vtest.avi"
TRUTH = SHARED / "video" / "pets09-s2l1" / "gt.txt"
# The rate a live camera asks of the path.
LIVE_FPS = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="person-reidentification-retail-0277")
    parser.add_argument("--detector", default=None, help="default: the best person detector present")
    parser.add_argument("--fps", type=float, default=None, help="the tracker's frame rate (default: the video's)")
    parser.add_argument("--embed-every", type=int, default=None)
    parser.add_argument("--max-frames", type=int, default=None)
    args = parser.parse_args()

    encoder = load_encoder(args.model, device="cpu")
    detector = args.detector or default_detector("person")
    # Naming does not move the tracks; a zoo card carries no threshold, so one is given.
    options = {"detector": args.detector, "embed_every": args.embed_every, "threshold": 1.0}
    config = QueryConfig(**{k: v for k, v in options.items() if v is not None}, tracker=TrackerConfig())
    media = open_source(VIDEO, max_frames=args.max_frames)
    if args.fps is not None:
        media = replace(media, fps=args.fps)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        market_gallery(work / "gallery", encoder)
        out = work / "query.txt"
        with Gallery.open(work / "gallery") as store:
            run = QueryRun(store, encoder, media, config)
            fps = media.fps or 10.0
            gap = run.tracker.max_lost if run.tracker is not None else 0
            with QueryOutputs(fps=fps, mot=out, min_boxes=config.tracker.min_boxes, max_gap=gap) as outputs:
                for result in run:
                    outputs.write(result)
                outputs.write_tracks(run.finish_tracks())
        rows = read_mot(out)
    truth = scored_truth(read_mot(TRUTH))
    if args.max_frames:
        truth = [r for r in truth if r.frame <= args.max_frames]
    score = score_tracks(truth, rows)
    stats = run.stats
    print(f"detector {detector}  model {args.model}  tracker fps {fps:g}  embed_every {config.embed_every}")
    print(
        f"MOTA {score.mota:.1f}  IDF1 {score.idf1:.1f}  HOTA {score.hota:.1f}  switches {score.switches}  "
        f"precision {100 * score.precision:.1f}%  recall {100 * score.recall:.1f}%  tracks {score.tracks}"
    )
    print(
        f"{stats.frames} frames in {stats.wall_seconds:.1f} s: {stats.fps:.2f} frames/s, "
        f"{stats.fps / LIVE_FPS:.2f} x the {LIVE_FPS:g} frames/s of a live camera"
    )
    print("stage busy seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in stats.stage_seconds.items()))
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
