"""Tracks scored against ground truth on PETS09-S2L1 (MOTChallenge 2015), per detector and tracker.

Rows, all scored under MOTChallenge's rules (ground-truth rows with flag 0 dropped, a match
at IoU >= 0.5; :mod:`reid.evaluation.mot`: py-motmetrics for CLEAR MOT and IDF1, HOTA from
its paper's definition):

- ``frcnn``: the public Faster R-CNN detections of the sequence
  (``../shared/data/video/pets09-s2l1/det-frcnn.txt``) through ``reid track``'s library
  function (:func:`reid.track.mot.track_detection_file`), no images, with every box
  confident (``reid track``'s default) and with ByteTrack's score thresholds for
  probabilities (``--track-high-score 0.6 --track-start-score 0.7``); frames/s is the
  tracker's alone.  ``--fps`` is the frame rate MOT15 lists for the sequence (7), from
  which the tracker's time-based settings become frames.
- ``query DETECTOR``: ``reid query`` end to end on ``../shared/data/video/vtest.avi`` (the
  same 795 frames) with ``--model`` (the demo model) and a gallery of 5 Market-1501 people
  (none of whom is in the video), once per detector of ``--detectors`` (``default``: the
  detector ``reid query`` picks by itself); the tracked boxes are written by the same
  code as ``reid query --mot`` and scored; frames/s is the whole query's.

Columns: detection precision and recall (of the boxes matched under CLEAR MOT), MOTA,
IDF1, HOTA, ID switches, fragmentations, tracks made (for the 19 people of the ground
truth), frames/s.

Run: ``python benchmarks/bench_mot.py --model models/demo`` (the query rows take a few
minutes each on 2 cores; without ``--model`` an untrained encoder of the demo model's
architecture stands in); ``--detectors ''`` scores the Faster R-CNN row alone (seconds).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from reid.data import load_dataset, read_image
from reid.evaluation.mot import MotScore, score_tracks, scored_truth
from reid.gallery import Gallery, ItemMeta
from reid.models import BACKBONES, embed_images, load_encoder, stand_in_model
from reid.pipeline import QueryConfig, QueryOutputs, QueryRun, open_source
from reid.track import TrackerConfig
from reid.track.mot import MotRow, read_mot, track_detection_file

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SEQUENCE = SHARED / "video" / "pets09-s2l1"
VIDEO = SHARED / "video" / "vtest.avi"
MARKET = SHARED / "market1501-mini"
# MOT15's seqinfo frame rate of PETS09-S2L1 (the video's container says 10).
SEQUENCE_FPS = 7.0
GALLERY_PEOPLE = 5
# ByteTrack's paper (Zhang et al. 2022, §4.2) for detectors whose scores are probabilities:
# confident from 0.6, new tracks from 0.7 (the Faster R-CNN scores are probabilities).
BYTETRACK_SCORES = TrackerConfig(high_score=0.6, start_score=0.7)


def market_gallery(folder: Path, model: Path) -> None:
    """A gallery of the first :data:`GALLERY_PEOPLE` identities of Market-1501's gallery split."""
    encoder = load_encoder(model, device="cpu")
    records = [r for r in load_dataset(f"market1501:{MARKET}").gallery if r.pid > 0]
    people = sorted({r.pid for r in records})[:GALLERY_PEOPLE]
    chosen = [r for r in records if r.pid in people]
    images = [read_image(r.path) for r in chosen]
    features = embed_images(encoder, images, [str(r.path) for r in chosen], "whole").features
    with Gallery.create(folder, encoder.card) as gallery:
        gallery.add(features, [ItemMeta(f"market-{r.pid:04d}") for r in chosen])


def frcnn_row(work: Path, fps: float, config: TrackerConfig) -> tuple[MotScore, float]:
    out = work / "frcnn.txt"
    tick = time.perf_counter()
    result = track_detection_file(SEQUENCE / "det-frcnn.txt", out, config, fps=fps)
    seconds = time.perf_counter() - tick
    return score_tracks(truth(), read_mot(out)), result.frames / seconds


def query_row(work: Path, model: Path, gallery: Path, detector: str | None, every: int) -> tuple[MotScore, float]:
    encoder = load_encoder(model, device="cpu")
    out = work / f"query-{detector or 'default'}.txt"
    config = QueryConfig(**({"detector": detector} if detector else {}), embed_every=every)
    with Gallery.open(gallery) as store:
        run = QueryRun(store, encoder, open_source(VIDEO), config)
        gap = run.tracker.max_lost if run.tracker is not None else 0
        with QueryOutputs(mot=out, min_boxes=config.tracker.min_boxes, max_gap=gap) as outputs:
            for result in run:
                outputs.write(result)
            run.finish_tracks()
    return score_tracks(truth(), read_mot(out)), run.stats.fps


def truth() -> list[MotRow]:
    return scored_truth(read_mot(SEQUENCE / "gt.txt"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="model folder for the query rows (default: an untrained EfficientNet-Lite0 at 128x64, the demo "
        "model's architecture: the same boxes and speed, tracks linked without a trained appearance)",
    )
    parser.add_argument("--detectors", default="ssdlite,default", help="comma-separated; '' for none")
    parser.add_argument("--fps", type=float, default=SEQUENCE_FPS, help="frame rate of the detection file")
    parser.add_argument("--embed-every", type=int, default=1)
    args = parser.parse_args()
    if not (SEQUENCE / "gt.txt").is_file():
        raise SystemExit(f"ground truth absent: {SEQUENCE / 'gt.txt'}")
    work = Path(tempfile.mkdtemp(prefix="bench-mot-"))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; outputs in {work}")
    rows: list[tuple[str, MotScore, float]] = []
    settings = [("every box confident", TrackerConfig()), ("ByteTrack's 0.6/0.7", BYTETRACK_SCORES)]
    for name, config in settings:
        score, fps = frcnn_row(work, args.fps, config)
        rows.append((f"frcnn, reid track, {name}", score, fps))
    detectors = [d.strip() for d in args.detectors.split(",") if d.strip()]
    model = args.model
    if detectors and model is None:
        model = stand_in_model(
            work / "model", "person", name="untrained", architecture="efficientnet_lite0",
            embedding_dim=BACKBONES["efficientnet_lite0"].out_dim, input_size=(128, 64), threshold=1.0,
        )  # fmt: skip
    print(f"query rows: model {model or '-'}")
    if detectors:
        market_gallery(work / "gallery", model)
    for detector in detectors:
        name = None if detector == "default" else detector
        score, fps = query_row(work, model, work / "gallery", name, args.embed_every)
        every = f" --embed-every {args.embed_every}" if args.embed_every != 1 else ""
        rows.append((f"reid query --detector {detector}{every}", score, fps))
    print(
        f"{'run':<44} {'prec':>6} {'recall':>6} {'MOTA':>6} {'IDF1':>6} {'HOTA':>6} {'IDsw':>5} {'frag':>5} "
        f"{'tracks':>6} {'fps':>7}"
    )
    for name, s, fps in rows:
        print(
            f"{name:<44} {100 * s.precision:>5.1f}% {100 * s.recall:>5.1f}% {s.mota:>6.1f} {s.idf1:>6.1f} "
            f"{s.hota:>6.1f} {s.switches:>5d} {s.fragmentations:>5d} {s.tracks:>6d} {fps:>7.1f}"
        )
    print(
        f"ground truth: {rows[0][1].people} people, {rows[0][1].truth_boxes} scored boxes; DetA/AssA of each row: "
        + ", ".join(f"{s.deta:.1f}/{s.assa:.1f}" for _, s, _ in rows)
    )


if __name__ == "__main__":
    main()
