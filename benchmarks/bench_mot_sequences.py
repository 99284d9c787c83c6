"""``reid track`` against SORT and OC-SORT on several MOTChallenge sequences, each and summed.

The sequences are read from ``--mot-root``, one folder each in MOTChallenge's layout:
``SEQ/det/det.txt`` (the detections tracked), ``SEQ/gt/gt.txt`` (ground truth) and
``SEQ/seqinfo.ini`` (its ``frameRate``). Sequences without ground truth are skipped. The
data are public and are not part of the project: docs/tracking.md says where they come
from (MOT15's training set with the Faster R-CNN detections SORT's repository ships).

Rows per sequence, all on the same detections and scored alike (:mod:`reid.evaluation.mot`:
MOTChallenge's rules, py-motmetrics for CLEAR MOT and IDF1, HOTA from its paper):

- ``reid track``: :func:`reid.track.mot.track_detection_file` with the default
  :class:`reid.track.TrackerConfig` (or ``--config`` overrides) at the frame rate
  :func:`reid.track.mot.detections_fps` finds for the file (its seqinfo.ini), as the
  command runs it;
- ``SORT``: on the boxes scored from ``--sort-min-score`` (default: every box), Bewley et
  al., "Simple Online and Realtime Tracking", ICIP 2016, as the paper
  states it (:class:`Sort`): a constant-velocity Kalman filter over box centre, area and
  aspect ratio, one Hungarian assignment on IoU a frame (at least 0.3), a track ended at
  its first missed frame, a track reported once it has 3 hits in a row; the filter's
  noise values are those its authors published with the paper's code;
- ``OC-SORT``: the authors' code as the ``ocsort`` package (0.0.2, a packaging of
  noahcao/OC_SORT's tracker) with its published settings: ``det_thresh`` 0.6 (the
  ``track_thresh`` of its MOT17 runs), ``max_age`` 30, ``min_hits`` 3, IoU 0.3,
  ``delta_t`` 3, inertia 0.2. Skipped when the package is not importable
  (``pip install --no-deps --target DIR ocsort==0.0.2 filterpy==1.4.5``, then put DIR on
  PYTHONPATH: its own requirements pin an old SciPy).

The sum row scores every sequence at once (frames and ids made distinct per sequence),
which is how MOTChallenge combines them: MOTA and IDF1 over all boxes, not a mean.

Run: ``python benchmarks/bench_mot_sequences.py --mot-root DIR``.
"""

from __future__ import annotations

import argparse
import configparser
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

from reid.evaluation.mot import MotScore, score_tracks, scored_truth
from reid.track import Tracker, TrackerConfig
from reid.track.mot import (
    MotRow, by_frame, detections_fps, file_config, finish_tracks, read_mot, track_detection_file, track_looks,
    track_rows,
)  # fmt: skip


@dataclass(frozen=True)
class Sequence:
    name: str
    detections: Path
    truth: list[MotRow]
    fps: float


def sequences(root: Path, names: list[str] | None, detections: str) -> list[Sequence]:
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if names and folder.name not in names:
            continue
        det, gt = folder / detections, folder / "gt" / "gt.txt"
        if not det.is_file() or not gt.is_file():
            continue
        info = configparser.ConfigParser()
        info.read(folder / "seqinfo.ini")
        found.append(Sequence(folder.name, det, scored_truth(read_mot(gt)), float(info["Sequence"]["frameRate"])))
    return found


# SORT's Kalman filter (the values published with the paper's code): state (u, v, s, r,
# u', v', s') with s the area and r the aspect ratio, measurement (u, v, s, r).
SORT_R = np.diag([1.0, 1.0, 10.0, 10.0])
SORT_P0 = np.diag([10.0, 10.0, 10.0, 10.0, 1e4, 1e4, 1e4])
SORT_Q = np.diag([1.0, 1.0, 1.0, 1.0, 1e-2, 1e-2, 1e-4])
SORT_F = np.eye(7) + np.eye(7, k=4)
SORT_H = np.eye(4, 7)


class SortTrack:
    def __init__(self, box: np.ndarray, number: int) -> None:
        self.x = np.concatenate([_to_z(box), np.zeros(3)])
        self.p = SORT_P0.copy()
        self.id = number
        self.since_update = 0
        self.streak = 0

    def predict(self) -> np.ndarray:
        if self.x[2] + self.x[6] <= 0:
            self.x[6] = 0.0
        self.x = SORT_F @ self.x
        self.p = SORT_F @ self.p @ SORT_F.T + SORT_Q
        if self.since_update > 0:
            self.streak = 0
        self.since_update += 1
        return _to_box(self.x)

    def update(self, box: np.ndarray) -> None:
        self.since_update = 0
        self.streak += 1
        s = SORT_H @ self.p @ SORT_H.T + SORT_R
        gain = self.p @ SORT_H.T @ np.linalg.inv(s)
        self.x = self.x + gain @ (_to_z(box) - SORT_H @ self.x)
        self.p = (np.eye(7) - gain @ SORT_H) @ self.p


def _to_z(box: np.ndarray) -> np.ndarray:
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    return np.array([x1 + w / 2, y1 + h / 2, w * h, w / h])


def _to_box(x: np.ndarray) -> np.ndarray:
    w = np.sqrt(max(x[2] * x[3], 0.0))
    h = x[2] / w if w > 0 else 0.0
    return np.array([x[0] - w / 2, x[1] - h / 2, x[0] + w / 2, x[1] + h / 2])


def _iou_xyxy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-12)


class Sort:
    """SORT (Bewley et al. 2016): ``max_age`` 1, ``min_hits`` 3, IoU at least 0.3."""

    def __init__(self, max_age: int = 1, min_hits: int = 3, iou: float = 0.3) -> None:
        self.max_age, self.min_hits, self.iou = max_age, min_hits, iou
        self.tracks: list[SortTrack] = []
        self.frame = 0
        self.created = 0

    def update(self, boxes: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """``boxes``: (N, 4) x1, y1, x2, y2; returns (id, box) of the tracks reported."""
        self.frame += 1
        predicted = np.array([t.predict() for t in self.tracks]).reshape(-1, 4)
        keep = ~np.any(np.isnan(predicted), axis=1)
        self.tracks = [t for t, k in zip(self.tracks, keep, strict=True) if k]
        predicted = predicted[keep]
        matched: set[int] = set()
        if len(boxes) and len(self.tracks):
            overlap = _iou_xyxy(boxes, predicted)
            rows, columns = linear_sum_assignment(-overlap)
            for d, t in zip(rows, columns, strict=True):
                if overlap[d, t] >= self.iou:
                    self.tracks[t].update(boxes[d])
                    matched.add(int(d))
        for d in range(len(boxes)):
            if d not in matched:
                self.created += 1
                self.tracks.append(SortTrack(boxes[d], self.created))
        reported = []
        for t in self.tracks:
            if t.since_update < 1 and (t.streak >= self.min_hits or self.frame <= self.min_hits):
                reported.append((t.id, _to_box(t.x)))
        self.tracks = [t for t in self.tracks if t.since_update <= self.max_age]
        return reported


def run_online(rows: list[MotRow], step: Callable[[np.ndarray], Iterable[tuple[int, np.ndarray]]]) -> list[MotRow]:
    """Feed every frame's (N, 5) x1, y1, x2, y2, score to ``step``, collect its boxes."""
    frames = by_frame(rows)
    out = []
    for frame in range(1, max(frames, default=0) + 1):
        here = frames.get(frame, [])
        dets = np.array([[r.box[0], r.box[1], r.box[0] + r.box[2], r.box[1] + r.box[3], r.score] for r in here])
        for number, (x1, y1, x2, y2) in step(dets.reshape(-1, 5)):
            out.append(MotRow(frame, int(number), (float(x1), float(y1), float(x2 - x1), float(y2 - y1)), 1.0))
    return out


def sort_rows(rows: list[MotRow], min_score: float = 0.0) -> list[MotRow]:
    """SORT on the boxes scored at least ``min_score`` (it has no score threshold of its own)."""
    tracker = Sort()
    return run_online(rows, lambda dets: tracker.update(dets[dets[:, 4] >= min_score, :4]))


def ocsort_rows(rows: list[MotRow]) -> list[MotRow] | None:
    try:
        import ocsort.kalmanfilter
        import torch
        from ocsort import OCSort
    except ImportError:
        return None
    # Its filter calls float() on one-element arrays, which NumPy 2 refuses; this float
    # takes the element as NumPy 1 did, for that module only, and changes no value.
    ocsort.kalmanfilter.float = lambda value: np.asarray(value, dtype=np.float64).item()  # type: ignore[attr-defined]
    tracker = OCSort(det_thresh=0.6, max_age=30, min_hits=3, iou_threshold=0.3, delta_t=3, inertia=0.2)

    def step(dets: np.ndarray) -> list[tuple[int, np.ndarray]]:
        with_class = np.concatenate([dets, np.zeros((len(dets), 1))], axis=1)
        out = tracker.update(torch.tensor(with_class, dtype=torch.float32), None)
        return [(int(r[4]), r[:4]) for r in np.asarray(out).reshape(-1, 7)]

    return run_online(rows, step)


def reid_rows(
    sequence: Sequence, config: TrackerConfig, work: Path, fps: float | None, finish: dict[str, object]
) -> list[MotRow]:
    """``reid track``'s library function at ``fps`` (None: the rate the command finds); with
    ``finish`` (:func:`reid.track.mot.finish_tracks`' settings), the same steps with those."""
    rate = detections_fps(sequence.detections, fps)
    if not finish:
        out = work / f"{sequence.name}.txt"
        track_detection_file(sequence.detections, out, config, fps=rate.fps)
        return read_mot(out)
    rows = read_mot(sequence.detections)
    tracker, ended = Tracker(0, file_config(config, rows), rate.fps), []
    tracked = track_rows(rows, tracker, None, ended)
    return finish_tracks(tracked, track_looks(ended), tracker.max_lost, rate.fps, **finish)  # type: ignore[arg-type]


def combined(parts: list[tuple[list[MotRow], list[MotRow]]]) -> tuple[list[MotRow], list[MotRow]]:
    """Truth and tracks of several sequences as one: frames and ids shifted per sequence."""
    truth, tracks, frame0, id0 = [], [], 0, 0
    for gt, pr in parts:
        truth += [MotRow(r.frame + frame0, r.id + id0, r.box, r.score) for r in gt]
        tracks += [MotRow(r.frame + frame0, r.id + id0, r.box, r.score) for r in pr]
        frame0 += max([r.frame for r in gt + pr], default=0)
        id0 += max([abs(r.id) for r in gt + pr], default=0) + 1
    return truth, tracks


FINISH_SETTINGS = ("link", "fill_seconds", "consistency", "tau", "longest")


def parse_settings(text: str, known: Iterable[str], flag: str) -> dict[str, object]:
    """``key=value,key=value`` over ``known`` names: numbers, or ``none``."""
    names = set(known)
    values: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = item.partition("=")
        if key not in names:
            raise SystemExit(f"{flag}: no setting {key!r}")
        values[key] = None if value.lower() == "none" else (int(value) if value.isdigit() else float(value))
    return values


def parse_config(text: str) -> TrackerConfig:
    """``key=value,...`` over TrackerConfig's fields."""
    values = parse_settings(text, (f.name for f in fields(TrackerConfig)), "--config")
    return TrackerConfig(**values)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mot-root", type=Path, required=True, help="folder of MOTChallenge sequence folders")
    parser.add_argument("--sequences", default="", help="comma-separated names (default: every one with gt)")
    parser.add_argument("--detections", default="det/det.txt", help="detection file inside each sequence folder")
    parser.add_argument("--config", default="", help="tracker settings for the reid rows, key=value,...")
    parser.add_argument(
        "--finish",
        default="",
        help=f"finish_tracks settings for the reid rows, key=value,... ({', '.join(FINISH_SETTINGS)})",
    )
    parser.add_argument("--fps", type=float, default=None, help="frame rate for the reid rows (default: seqinfo.ini's)")
    parser.add_argument("--sort-min-score", type=float, default=0.0, help="boxes SORT is given (default: all)")
    parser.add_argument("--trackers", default="reid,sort,ocsort", help="comma-separated rows to run")
    args = parser.parse_args()
    names = [n for n in args.sequences.split(",") if n]
    chosen = sequences(args.mot_root, names or None, args.detections)
    if not chosen:
        raise SystemExit(f"no sequence with {args.detections} and gt/gt.txt under {args.mot_root}")
    config = parse_config(args.config)
    finish = parse_settings(args.finish, FINISH_SETTINGS, "--finish")
    work = Path(tempfile.mkdtemp(prefix="bench-mot-seq-"))
    wanted = [t.strip() for t in args.trackers.split(",") if t.strip()]
    results: dict[str, list[tuple[list[MotRow], list[MotRow]]]] = {t: [] for t in wanted}
    table: list[tuple[str, str, MotScore, float]] = []
    for sequence in chosen:
        rows = read_mot(sequence.detections)
        for tracker in wanted:
            tick = time.perf_counter()
            if tracker == "reid":
                tracks: list[MotRow] | None = reid_rows(sequence, config, work, args.fps, finish)
            elif tracker == "sort":
                tracks = sort_rows(rows, args.sort_min_score)
            elif tracker == "ocsort":
                tracks = ocsort_rows(rows)
            else:
                raise SystemExit(f"--trackers: unknown {tracker!r}")
            seconds = time.perf_counter() - tick
            if tracks is None:
                print(f"{tracker}: not importable, row left out")
                wanted.remove(tracker)
                continue
            results[tracker].append((sequence.truth, tracks))
            frames = max(r.frame for r in rows)
            table.append((sequence.name, tracker, score_tracks(sequence.truth, tracks), frames / seconds))
    for tracker in wanted:
        truth, tracks = combined(results[tracker])
        table.append(("sum", tracker, score_tracks(truth, tracks), float("nan")))
    print(f"config: {config}" + (f"; finish: {finish}" if finish else ""))
    print(f"sequences: {', '.join(f'{s.name} ({s.fps:g} fps)' for s in chosen)}")
    print(
        f"{'sequence':<16} {'tracker':<8} {'prec':>6} {'recall':>6} {'MOTA':>6} {'IDF1':>6} {'HOTA':>6} "
        f"{'IDsw':>5} {'frag':>5} {'FP':>6} {'FN':>6} {'tracks':>6} {'gt':>4} {'fps':>7}"
    )
    for name, tracker, s, fps in table:
        fp = round(s.boxes - s.precision * s.boxes)
        fn = round(s.truth_boxes - s.recall * s.truth_boxes)
        print(
            f"{name:<16} {tracker:<8} {100 * s.precision:>5.1f}% {100 * s.recall:>5.1f}% {s.mota:>6.1f} "
            f"{s.idf1:>6.1f} {s.hota:>6.1f} {s.switches:>5d} {s.fragmentations:>5d} {fp:>6d} {fn:>6d} "
            f"{s.tracks:>6d} {s.people:>4d} {fps:>7.0f}"
        )


if __name__ == "__main__":
    main()
