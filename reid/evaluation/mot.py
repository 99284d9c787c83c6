"""Tracks scored against MOTChallenge ground truth.

MOTChallenge's rules (Milan et al. 2016; Dendorfer et al., "MOTChallenge: A Benchmark for
Single-Camera Multiple Target Tracking", IJCV 2021): ground-truth rows whose flag (the
seventh column) is 0 are dropped, predictions are not filtered, and a predicted box
matches a ground-truth box at intersection over union of at least 0.5.

CLEAR MOT (Bernardin and Stiefelhagen 2008: MOTA, ID switches, fragmentations, precision
and recall of the matched boxes) and the identity measures (Ristani et al. 2016: IDF1)
come from py-motmetrics (the ``mot`` extra).  HOTA (Luiten et al., "HOTA: A Higher Order
Metric for Evaluating Multi-Object Tracking", IJCV 2021) is computed here from the paper's
definition, as py-motmetrics' released versions lack it: per localisation threshold alpha
in 0.05, 0.10, ..., 0.95, boxes are matched one to one per frame maximising IoU weighted
by how often the two ids are aligned over the whole sequence (the paper's §5), then
DetA = TP / (TP + FN + FP), AssA = mean over true positives of TPA / (TPA + FNA + FPA),
HOTA_alpha = sqrt(DetA · AssA), and HOTA is the mean over alpha.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

from reid.errors import ConfigError, DataError
from reid.track.motfile import MotRow, by_frame, read_mot

MATCH_IOU = 0.5
HOTA_ALPHAS = np.arange(0.05, 0.96, 0.05)


@dataclass(frozen=True)
class MotScore:
    """Figures of one tracker output against ground truth; shares in 0..1, MOTA and
    IDF1 and HOTA in percent as MOTChallenge prints them; ``last_frame`` and
    ``truth_last_frame``: the last frame holding a predicted box, a truth box (0: none)."""

    precision: float
    recall: float
    mota: float
    idf1: float
    hota: float
    deta: float
    assa: float
    switches: int
    fragmentations: int
    tracks: int
    people: int
    boxes: int
    truth_boxes: int
    last_frame: int = 0
    truth_last_frame: int = 0

    def named(self) -> dict[str, float | int]:
        """The figures under the names MOTChallenge and TrackEval print them with, in the
        order they print them: percentages (0..100) as floats, counts as ints."""
        return {
            "HOTA": self.hota,
            "DetA": self.deta,
            "AssA": self.assa,
            "MOTA": self.mota,
            "IDF1": self.idf1,
            "Prcn": 100.0 * self.precision,
            "Rcll": 100.0 * self.recall,
            "IDSW": self.switches,
            "Frag": self.fragmentations,
            "IDs": self.tracks,
            "GT_IDs": self.people,
            "Dets": self.boxes,
            "GT_Dets": self.truth_boxes,
        }


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) intersection over union of (N, 4) and (M, 4) x, y, w, h boxes, 0..1."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 0] + a[:, None, 2], b[None, :, 0] + b[None, :, 2])
    y1 = np.minimum(a[:, None, 1] + a[:, None, 3], b[None, :, 1] + b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    union = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def scored_truth(rows: Iterable[MotRow]) -> list[MotRow]:
    """The ground-truth rows MOTChallenge scores: those whose flag (score column) is not 0."""
    return [r for r in rows if r.score != 0]


def score_tracks(truth: Iterable[MotRow], predicted: Iterable[MotRow]) -> MotScore:
    """Score ``predicted`` tracks against ``truth`` (already :func:`scored_truth`) over
    every frame either holds.  Raises ConfigError when py-motmetrics is not installed."""
    try:
        import motmetrics
    except ImportError:
        raise ConfigError("scoring tracks needs py-motmetrics: pip install 'reid-toolkit[mot]'") from None
    truth, predicted = list(truth), list(predicted)
    gt, pr = by_frame(truth), by_frame(predicted)
    frames = sorted(set(gt) | set(pr))
    accumulator = motmetrics.MOTAccumulator(auto_id=False)
    for frame in frames:
        g, p = gt.get(frame, []), pr.get(frame, [])
        overlap = iou_matrix(np.array([r.box for r in g]), np.array([r.box for r in p]))
        distance = np.where(overlap >= MATCH_IOU, 1.0 - overlap, np.nan)
        accumulator.update([r.id for r in g], [r.id for r in p], distance, frameid=frame)
    names = ["precision", "recall", "mota", "idf1", "num_switches", "num_fragmentations"]
    summary = motmetrics.metrics.create().compute(accumulator, metrics=names, name="run")
    row = summary.loc["run"]
    hota, deta, assa = hota_score(gt, pr, frames)
    return MotScore(
        precision=float(row["precision"]),
        recall=float(row["recall"]),
        mota=100.0 * float(row["mota"]),
        idf1=100.0 * float(row["idf1"]),
        hota=100.0 * hota,
        deta=100.0 * deta,
        assa=100.0 * assa,
        switches=int(row["num_switches"]),
        fragmentations=int(row["num_fragmentations"]),
        tracks=len({r.id for r in predicted}),
        people=len({r.id for r in truth}),
        boxes=len(predicted),
        truth_boxes=len(truth),
        last_frame=max((r.frame for r in predicted), default=0),
        truth_last_frame=max((r.frame for r in truth), default=0),
    )


def score_mot_files(truth: Path, tracks: Path, last_frame: int | None = None) -> MotScore:
    """Score the tracker output ``tracks`` against the ground truth ``truth`` (both
    MOTChallenge files, :func:`reid.track.motfile.read_mot`) by MOTChallenge's rules: truth rows
    of flag 0 dropped (:func:`scored_truth`), predictions kept as they are.  ``last_frame``
    (None: every frame) scores frames 1..last_frame of both only, the frames a run that
    stopped early covered.  Raises DataError for a malformed file or a truth with no box to
    score (in those frames), ConfigError without py-motmetrics."""
    truth_rows = _up_to(scored_truth(read_mot(truth)), last_frame)
    if not truth_rows:
        where = "" if last_frame is None else f" in frames 1..{last_frame}"
        raise DataError(f"{truth}: no ground-truth box to score against{where} (rows of flag 0 are not scored)")
    return score_tracks(truth_rows, _up_to(read_mot(tracks), last_frame))


def _up_to(rows: list[MotRow], last_frame: int | None) -> list[MotRow]:
    return rows if last_frame is None else [r for r in rows if r.frame <= last_frame]


def hota_score(
    truth: dict[int, list[MotRow]], predicted: dict[int, list[MotRow]], frames: list[int]
) -> tuple[float, float, float]:
    """(HOTA, DetA, AssA) in 0..1, each the mean over :data:`HOTA_ALPHAS`."""
    gt_index = {i: n for n, i in enumerate(sorted({r.id for f in frames for r in truth.get(f, [])}))}
    pr_index = {i: n for n, i in enumerate(sorted({r.id for f in frames for r in predicted.get(f, [])}))}
    gt_count, pr_count = np.zeros(len(gt_index)), np.zeros(len(pr_index))
    alignment = np.zeros((len(gt_index), len(pr_index)))
    per_frame: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for frame in frames:
        g, p = truth.get(frame, []), predicted.get(frame, [])
        gi = np.array([gt_index[r.id] for r in g], dtype=int)
        pi = np.array([pr_index[r.id] for r in p], dtype=int)
        overlap = iou_matrix(np.array([r.box for r in g]), np.array([r.box for r in p]))
        per_frame.append((gi, pi, overlap))
        gt_count[gi] += 1
        pr_count[pi] += 1
        if overlap.size:
            # The paper's soft alignment: each box pair's share of the overlap its two
            # boxes have with anything in this frame.
            share = overlap / (overlap.sum(0, keepdims=True) + overlap.sum(1, keepdims=True) - overlap + 1e-12)
            alignment[gi[:, None], pi[None, :]] += share
    alignment = alignment / np.maximum(gt_count[:, None] + pr_count[None, :] - alignment, 1e-12)
    tp = np.zeros(len(HOTA_ALPHAS))
    fn = np.zeros(len(HOTA_ALPHAS))
    fp = np.zeros(len(HOTA_ALPHAS))
    pairs: list[defaultdict[tuple[int, int], int]] = [defaultdict(int) for _ in HOTA_ALPHAS]
    for gi, pi, overlap in per_frame:
        if not overlap.size:
            fn += len(gi)
            fp += len(pi)
            continue
        weight = alignment[gi[:, None], pi[None, :]] * overlap
        rows, columns = linear_sum_assignment(-weight)
        for a, alpha in enumerate(HOTA_ALPHAS):
            kept = [(r, c) for r, c in zip(rows, columns, strict=True) if overlap[r, c] >= alpha - 1e-9]
            tp[a] += len(kept)
            fn[a] += len(gi) - len(kept)
            fp[a] += len(pi) - len(kept)
            for r, c in kept:
                pairs[a][(int(gi[r]), int(pi[c]))] += 1
    deta = tp / np.maximum(tp + fn + fp, 1)
    assa = np.zeros(len(HOTA_ALPHAS))
    for a, counts in enumerate(pairs):
        if counts:
            matched = np.array(list(counts.values()), dtype=np.float64)
            g = np.array([k[0] for k in counts])
            p = np.array([k[1] for k in counts])
            # TPA / (TPA + FNA + FPA) of each matched pair, counted once per true positive.
            score = matched / (gt_count[g] + pr_count[p] - matched)
            assa[a] = float((matched * score).sum() / max(tp[a], 1))
    hota = np.sqrt(deta * assa)
    return float(hota.mean()), float(deta.mean()), float(assa.mean())
