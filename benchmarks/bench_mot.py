"""Tracks scored against ground truth on PETS09-S2L1 (MOTChallenge 2015), per detector and tracker.

Rows, all scored under MOTChallenge's rules (ground-truth rows with flag 0 dropped, a match
at IoU >= 0.5; :mod:`reid.evaluation.mot`: py-motmetrics for CLEAR MOT and IDF1, HOTA from
its paper's definition):

- ``frcnn, reid track``: the public Faster R-CNN detections of the sequence
  (``../shared/data/video/pets09-s2l1/det-frcnn.txt``) through ``reid track``'s library
  function (:func:`reid.track.mot.track_detection_file`: tracked, joined, gaps filled,
  smoothed), no images, with every box confident (``all confident``, ``reid track``'s
  default) and with ByteTrack's score thresholds for probabilities (``0.6/0.7``:
  ``--track-high-score 0.6 --track-start-score 0.7``); frames/s is the tracker's alone.
  ``--fps`` is the frame rate MOT15 lists for the sequence (7), from which the tracker's
  time-based settings become frames.
- ``frcnn, ...`` without ``reid track``: the same tracker output finished step by step
  (:func:`stepwise_row`): ``before`` with its bridged gaps filled only, then joined, and
  the published settings measured and left out (docs/tracking.md says why).
- ``looks``: the same detections with ByteTrack's scores and each box cut from
  ``vtest.avi`` and embedded by ``--model`` (``reid track --video --model``): before,
  joined, and through ``reid track`` with and without joining; the boxes are embedded
  once for all four rows, and frames/s counts decoding, cutting and embedding as well
  as tracking.
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
architecture stands in; ``--model imagenet`` builds EfficientNet-Lite0 with its ImageNet
weights, a ready-made encoder never trained for Re-ID); ``--detectors ''`` scores the
Faster R-CNN rows alone (a few minutes on 2 cores, most of it embedding 4,359 crops).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from reid.data import load_dataset, read_image
from reid.evaluation.mot import MotScore, score_tracks, scored_truth
from reid.gallery import Gallery, ItemMeta
from reid.models import BACKBONES, Encoder, ModelCard, embed_images, load_encoder, stand_in_model
from reid.models.folder import save_model
from reid.models.stand_in import untrained_network
from reid.pipeline import QueryConfig, QueryOutputs, QueryRun, open_source
from reid.track import Tracker, TrackerConfig, iou
from reid.track.appearance import VideoAppearance
from reid.track.mot import (
    MotRow, by_frame, gaussian_smooth, interpolate, link_tracklets, read_mot, track_detection_file, track_looks,
    track_rows,
)  # fmt: skip

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SEQUENCE = SHARED / "video" / "pets09-s2l1"
VIDEO = SHARED / "video" / "vtest.avi"
MARKET = SHARED / "market1501-mini"
# MOT15's seqinfo frame rate of PETS09-S2L1 (the video's container says 10).
SEQUENCE_FPS = 7.0
GALLERY_PEOPLE = 5
# Boxes of one person this many frames apart are no longer near copies of each other.
APART = 10
# ByteTrack's paper (Zhang et al. 2022, §4.2) for detectors whose scores are probabilities:
# confident from 0.6, new tracks from 0.7 (the Faster R-CNN scores are probabilities).
BYTETRACK_SCORES = TrackerConfig(high_score=0.6, start_score=0.7)


def market_gallery(folder: Path, encoder: Encoder) -> None:
    """A gallery of the first :data:`GALLERY_PEOPLE` identities of Market-1501's gallery split."""
    records = [r for r in load_dataset(f"market1501:{MARKET}").gallery if r.pid > 0]
    people = sorted({r.pid for r in records})[:GALLERY_PEOPLE]
    chosen = [r for r in records if r.pid in people]
    images = [read_image(r.path) for r in chosen]
    features = embed_images(encoder, images, [str(r.path) for r in chosen], "whole").features
    with Gallery.create(folder, encoder.card) as gallery:
        gallery.add(features, [ItemMeta(f"market-{r.pid:04d}") for r in chosen])


@dataclass
class Embedded:
    """Embeddings computed once, handed to several runs (the ``Appearance`` protocol)."""

    features: np.ndarray
    embedded: int

    def embed(self, rows: list[MotRow]) -> np.ndarray:
        return self.features


def frcnn_row(
    work: Path, fps: float, config: TrackerConfig, appearance: Embedded | None = None, link: bool = True
) -> tuple[MotScore, float]:
    out = work / "frcnn.txt"
    tick = time.perf_counter()
    result = track_detection_file(SEQUENCE / "det-frcnn.txt", out, config, fps=fps, appearance=appearance, link=link)
    seconds = time.perf_counter() - tick
    return score_tracks(truth(), read_mot(out)), result.frames / seconds


def stepwise_row(
    fps: float,
    config: TrackerConfig,
    appearance: Embedded | None = None,
    window: int | None = None,
    fill: int | None = None,
    smooth_fps: float | None = None,
    smooth: bool = False,
) -> tuple[MotScore, float]:
    """The tracker's rows finished step by step, to show what each step does and to score
    the settings left out: joined within ``window`` frames (None: not joined), gaps of up to
    ``fill`` frames filled (None: the tracker's lost time), smoothed at ``smooth_fps`` when
    ``smooth``.  ``reid track`` is joined within the lost time, filled, smoothed at ``fps``."""
    rows = read_mot(SEQUENCE / "det-frcnn.txt")
    tick = time.perf_counter()
    tracker, ended = Tracker(0, config, fps), []
    tracked = track_rows(rows, tracker, None if appearance is None else appearance.features, ended)
    if window is not None:
        tracked = link_tracklets(tracked, track_looks(ended), window)
    tracked = interpolate(tracked, tracker.max_lost if fill is None else fill)
    if smooth:
        tracked = gaussian_smooth(tracked, fps=smooth_fps)
    seconds = time.perf_counter() - tick
    return score_tracks(truth(), tracked), max(r.frame for r in rows) / seconds


def embed_detections(model: Path) -> tuple[Embedded, float]:
    """Every Faster R-CNN box cut from vtest.avi and embedded by ``model``; and the seconds it took."""
    appearance = VideoAppearance(VIDEO, load_encoder(model, device="cpu"))
    features = appearance.embed(read_mot(SEQUENCE / "det-frcnn.txt"))
    return Embedded(features, appearance.embedded), appearance.seconds


def separation(features: np.ndarray) -> tuple[float, float]:
    """Median cosine distance between the embeddings of two boxes of the same person at
    least :data:`APART` frames apart, and of two different people; boxes are given the
    person of the ground-truth box they overlap at IoU >= 0.5 (others left out).  A
    measure of the encoder on this video, used for nothing but this line."""
    rows, people = read_mot(SEQUENCE / "det-frcnn.txt"), by_frame(truth())
    person = []
    for row in rows:
        best = max(people.get(row.frame, []), key=lambda g: iou(g.box, row.box), default=None)
        person.append(best.id if best is not None and iou(best.box, row.box) >= 0.5 else -1)
    who, when = np.array(person), np.array([r.frame for r in rows])
    keep = who >= 0
    cosine = 1.0 - features[keep] @ features[keep].T
    same = (who[keep][:, None] == who[keep][None, :]) & (np.abs(when[keep][:, None] - when[keep][None, :]) >= APART)
    other = who[keep][:, None] != who[keep][None, :]
    return float(np.median(cosine[same])), float(np.median(cosine[other]))


def imagenet_model(folder: Path) -> Path:
    """EfficientNet-Lite0 with its ImageNet weights (``efficientnet_lite0.imagenet``) at the
    demo model's input size, no Re-ID training: the encoder available without training."""
    card = ModelCard(
        name="efficientnet-lite0-imagenet", architecture="efficientnet_lite0",
        embedding_dim=BACKBONES["efficientnet_lite0"].out_dim, input_size=(128, 64), num_classes=0, kind="person",
        mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), pretrained="efficientnet_lite0.imagenet, no Re-ID training",
    )  # fmt: skip
    save_model(untrained_network(card, pretrained="efficientnet_lite0.imagenet"), card, folder)
    return folder


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
            outputs.write_tracks(run.finish_tracks())
    return score_tracks(truth(), read_mot(out)), run.stats.fps


def truth() -> list[MotRow]:
    return scored_truth(read_mot(SEQUENCE / "gt.txt"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model",
        type=str,
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
    lost = BYTETRACK_SCORES.lost_frames(args.fps)
    steps: list[tuple[str, TrackerConfig, dict[str, Any]]] = [
        ("all confident, before: gaps filled", TrackerConfig(), {}),
        ("0.6/0.7, before: gaps filled", BYTETRACK_SCORES, {}),
        ("0.6/0.7, joined, gaps filled", BYTETRACK_SCORES, {"window": lost}),
        ("0.6/0.7, joined in 30 frames, <= 7 filled", BYTETRACK_SCORES, {"window": 30}),
        ("0.6/0.7, joined in 30 frames, <= 30 filled", BYTETRACK_SCORES, {"window": 30, "fill": 30}),
        ("0.6/0.7, joined, <= 0.67 s filled, smoothed", BYTETRACK_SCORES,
         {"window": lost, "fill": round(20 / 30 * args.fps), "smooth": True, "smooth_fps": args.fps}),
        ("0.6/0.7, joined, smoothed tau 10 frames here", BYTETRACK_SCORES, {"window": lost, "smooth": True}),
    ]  # fmt: skip
    for name, config, step in steps:
        score, fps = stepwise_row(args.fps, config, **step)
        rows.append((f"frcnn, {name}", score, fps))
    # Every score of det-frcnn.txt is from 0.5: confident from 0.5 is every box confident
    # (TrackerConfig() would take ByteTrack's thresholds for a file of probabilities).
    settings = [("all confident", TrackerConfig(high_score=0.5)), ("0.6/0.7", BYTETRACK_SCORES)]
    for name, config in settings:
        score, fps = frcnn_row(work, args.fps, config)
        rows.append((f"frcnn, reid track, {name}", score, fps))
    detectors = [d.strip() for d in args.detectors.split(",") if d.strip()]
    model = Path(args.model) if args.model else None
    if args.model == "imagenet":
        model = imagenet_model(work / "imagenet")
    if model is None:
        model = stand_in_model(
            work / "model", "person", name="untrained", architecture="efficientnet_lite0",
            embedding_dim=BACKBONES["efficientnet_lite0"].out_dim, input_size=(128, 64), threshold=1.0,
        )  # fmt: skip
    print(f"appearance and query rows: model {model}")
    embedded, seconds = embed_detections(model)
    frames = max(r.frame for r in read_mot(SEQUENCE / "det-frcnn.txt"))
    for name, window in (("before: gaps filled", None), ("joined, gaps filled", lost)):
        score, fps = stepwise_row(args.fps, BYTETRACK_SCORES, embedded, window=window)
        rows.append((f"frcnn, 0.6/0.7, looks, {name}", score, 1 / (1 / fps + seconds / frames)))
    for name, link in (("joined", True), ("not joined", False)):
        score, fps = frcnn_row(work, args.fps, BYTETRACK_SCORES, embedded, link)
        rows.append((f"frcnn, reid track, 0.6/0.7, looks, {name}", score, 1 / (1 / fps + seconds / frames)))
    print(f"embedding {embedded.embedded} boxes: {seconds:.1f} s ({frames / seconds:.1f} frames/s)")
    same, other = separation(embedded.features)
    print(
        f"median cosine distance of two boxes of one person {APART}+ frames apart {same:.3f}, of two people "
        f"{other:.3f} (the tracker re-finds at <= 0.2)"
    )
    if detectors:
        market_gallery(work / "gallery", load_encoder(model, device="cpu"))
    for detector in detectors:
        name = None if detector == "default" else detector
        score, fps = query_row(work, model, work / "gallery", name, args.embed_every)
        every = f" --embed-every {args.embed_every}" if args.embed_every != 1 else ""
        rows.append((f"reid query --detector {detector}{every}", score, fps))
    print(
        f"{'run':<50} {'prec':>6} {'recall':>6} {'MOTA':>6} {'IDF1':>6} {'HOTA':>6} {'IDsw':>5} {'frag':>5} "
        f"{'tracks':>6} {'fps':>7}"
    )
    for name, s, fps in rows:
        print(
            f"{name:<50} {100 * s.precision:>5.1f}% {100 * s.recall:>5.1f}% {s.mota:>6.1f} {s.idf1:>6.1f} "
            f"{s.hota:>6.1f} {s.switches:>5d} {s.fragmentations:>5d} {s.tracks:>6d} {fps:>7.1f}"
        )
    print(
        f"ground truth: {rows[0][1].people} people, {rows[0][1].truth_boxes} scored boxes; DetA/AssA of each row: "
        + ", ".join(f"{s.deta:.1f}/{s.assa:.1f}" for _, s, _ in rows)
    )


if __name__ == "__main__":
    main()
