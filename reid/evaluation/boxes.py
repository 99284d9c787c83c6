"""Detection boxes scored against ground truth, under MOTChallenge's rules.

A detection matches a ground-truth box when their intersection over union is at least
``min_iou`` (0.5 in MOTChallenge and PASCAL VOC), one to one within a frame: the
assignment that maximises the total overlap (Hungarian), as py-motmetrics does for CLEAR MOT
(Bernardin & Stiefelhagen 2008).  Ground-truth rows whose flag is 0 are dropped before
scoring; detections are not filtered.

Reading MOT text files and the overlap and assignment arithmetic come from py-motmetrics
(``motmetrics.io.loadtxt``, ``motmetrics.distances.boxiou``,
``motmetrics.lap.linear_sum_assignment``; not ``iou_matrix``, which py-motmetrics 1.4 writes
with ``np.asfarray``, gone from NumPy 2), a development dependency: the functions here
import it when called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from reid.errors import ConfigError, DataError

# Person-height bands, in pixels, of the recall figures: under 80, 80-120 and over 120.
HEIGHT_BANDS = (80.0, 120.0)


def _motmetrics() -> Any:
    try:
        import motmetrics
    except ImportError as exc:
        raise ConfigError('scoring boxes needs py-motmetrics, which is not installed: pip install "reid-toolkit[dev]"') from exc
    return motmetrics


def read_mot_boxes(path: str | Path, min_confidence: float | None = None) -> dict[int, np.ndarray]:
    """Boxes of a MOTChallenge text file (``frame,id,x,y,w,h,conf,...``) by 0-based frame.

    Returns ``{frame - 1: (N, 4) float64 array of (x, y, w, h)}`` in 0-based pixels (MOT's
    frames and corners are 1-based).  ``min_confidence``: rows whose 7th column is below it
    are dropped (1 drops the ground truth's flag-0 rows).  Raises DataError naming the file
    when it is missing or not in MOT format.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such MOT file")
    kwargs = {} if min_confidence is None else {"min_confidence": min_confidence}
    try:
        table = _motmetrics().io.loadtxt(str(path), fmt="mot15-2D", **kwargs)
    except (ValueError, IndexError, KeyError) as exc:
        raise DataError(f"{path}: not a MOTChallenge text file ({exc.__class__.__name__})") from exc
    boxes: dict[int, np.ndarray] = {}
    frames = table.index.get_level_values("FrameId").to_numpy()
    # loadtxt has already moved the corners to 0-based pixels.
    values = table[["X", "Y", "Width", "Height"]].to_numpy(dtype=np.float64)
    for frame in np.unique(frames):
        boxes[int(frame) - 1] = values[frames == frame]
    return boxes


@dataclass(frozen=True)
class BoxScore:
    """Detections against ground truth over a set of frames.

    ``truths``, ``detections``, ``matched``: counts of boxes.  ``by_height``: for each
    height band (:data:`HEIGHT_BANDS`, labelled ``<80``, ``80-120``, ``>120``), matched and
    total ground-truth boxes.  ``width_ratios``, ``height_ratios``: detection / truth size
    of each matched pair.
    """

    truths: int
    detections: int
    matched: int
    by_height: dict[str, tuple[int, int]] = field(default_factory=dict)
    width_ratios: np.ndarray = field(default_factory=lambda: np.empty(0))
    height_ratios: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def precision(self) -> float:
        return self.matched / self.detections if self.detections else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.truths if self.truths else 0.0

    def band_recall(self, band: str) -> float:
        matched, total = self.by_height[band]
        return matched / total if total else 0.0

    @property
    def width_ratio(self) -> float:
        """Median detection / truth width of the matches (1: as wide; NaN without matches)."""
        return float(np.median(self.width_ratios)) if len(self.width_ratios) else float("nan")

    @property
    def height_ratio(self) -> float:
        """Median detection / truth height of the matches."""
        return float(np.median(self.height_ratios)) if len(self.height_ratios) else float("nan")


def band_labels(bands: Sequence[float] = HEIGHT_BANDS) -> list[str]:
    """``<80``, ``80-120``, ``>120`` for the default bands."""
    edges = [f"{b:g}" for b in bands]
    return [f"<{edges[0]}"] + [f"{a}-{b}" for a, b in zip(edges, edges[1:])] + [f">{edges[-1]}"]


def match_frame(truth: np.ndarray, found: np.ndarray, min_iou: float = 0.5) -> list[tuple[int, int]]:
    """One-to-one (truth index, detection index) pairs of one frame whose IoU >= ``min_iou``,
    chosen to maximise the total overlap.  Both arrays are (N, 4) (x, y, w, h)."""
    if len(truth) == 0 or len(found) == 0:
        return []
    mm = _motmetrics()
    iou = mm.distances.boxiou(truth[:, None], found[None, :])
    # Pairs below the threshold may not match: a cost no allowed pair reaches.
    allowed = iou >= min_iou
    rows, cols = mm.lap.linear_sum_assignment(np.where(allowed, 1.0 - iou, 1e6))
    return [(int(r), int(c)) for r, c in zip(rows, cols) if allowed[r, c]]


def score_boxes(
    truth: Mapping[int, np.ndarray],
    found: Mapping[int, np.ndarray],
    frames: Sequence[int],
    min_iou: float = 0.5,
    bands: Sequence[float] = HEIGHT_BANDS,
) -> BoxScore:
    """Score the detections ``found`` against ``truth`` over ``frames``.

    ``truth`` and ``found`` map a 0-based frame to an (N, 4) array of (x, y, w, h) boxes in
    pixels (a frame absent from either holds no box).  Raises ConfigError when py-motmetrics
    is not installed.
    """
    labels = band_labels(bands)
    band_matched, band_total = np.zeros(len(labels), int), np.zeros(len(labels), int)
    truths = detections = matched = 0
    widths: list[float] = []
    heights: list[float] = []
    empty = np.empty((0, 4))
    for frame in frames:
        t = np.asarray(truth.get(frame, empty), dtype=np.float64).reshape(-1, 4)
        f = np.asarray(found.get(frame, empty), dtype=np.float64).reshape(-1, 4)
        pairs = match_frame(t, f, min_iou)
        truths, detections, matched = truths + len(t), detections + len(f), matched + len(pairs)
        band = np.searchsorted(np.asarray(bands), t[:, 3], side="right")
        np.add.at(band_total, band, 1)
        for ti, fi in pairs:
            band_matched[band[ti]] += 1
            widths.append(f[fi, 2] / t[ti, 2])
            heights.append(f[fi, 3] / t[ti, 3])
    return BoxScore(
        truths, detections, matched,
        {label: (int(m), int(n)) for label, m, n in zip(labels, band_matched, band_total)},
        np.asarray(widths), np.asarray(heights),
    )
