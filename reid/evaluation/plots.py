"""PNG pictures of evaluation results: ranked lists, CMC, ROC and distance histograms.

Curves use matplotlib's object API with the Agg canvas (no pyplot state, no display);
the ranked-list mosaic is drawn with OpenCV, its captions by :func:`reid.draw.caption`.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from reid.data.io import read_image
from reid.data.records import ImageRecord
from reid.draw import Style, caption
from reid.errors import DataError
from reid.evaluation.names import RANKING_METRICS, count, distance, percent
from reid.evaluation.ranking import RankedList, RankingResult, ranked_lists
from reid.evaluation.verification import VerificationResult
from reid.paths import write_bytes_atomic

CELL = (128, 64)  # (height, width) of one image in the ranked-list mosaic
BORDER = 4
GREEN, RED, GREY = (40, 170, 40), (210, 40, 40), (90, 90, 90)
# Captions in the letters reid.draw gives a picture of one cell's height.
CAPTION = Style.for_frame(CELL[0])


def _save_figure(fig: Figure, path: Path) -> Path:
    # Rendered to memory, then written atomically: a link planted at the name is replaced,
    # never followed to overwrite its target.
    buffer = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buffer)
    write_bytes_atomic(path, buffer.getvalue())
    return path


def plot_cmc(result: RankingResult, path: str | Path, title: str = "CMC") -> Path:
    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.add_subplot()
    ranks = np.arange(1, result.cmc.size + 1)
    ax.plot(ranks, result.cmc * 100, marker="o", markersize=3)
    ax.set_xlabel("rank")
    ax.set_ylabel("matching rate (%)")
    ax.set_ylim(0, 100)
    ax.set_xlim(1, ranks[-1])
    ax.grid(alpha=0.3)
    ax.set_title(
        f"{title}: Rank-1 {percent(result.rank1)}, mAP {percent(result.mAP)}, mINP {percent(result.mINP)}\n"
        f"{result.num_valid_queries} of {result.num_query} queries, {result.num_gallery} gallery images",
        fontsize=9,
    )
    fig.tight_layout()
    return _save_figure(fig, Path(path))


def _cell(path: Path, colour: tuple[int, int, int]) -> np.ndarray:
    height, width = CELL
    try:
        image = cv2.resize(read_image(path), (width - 2 * BORDER, height - 2 * BORDER), interpolation=cv2.INTER_AREA)
    except DataError:
        image = np.full((height - 2 * BORDER, width - 2 * BORDER, 3), 200, np.uint8)
    return cv2.copyMakeBorder(image, BORDER, BORDER, BORDER, BORDER, cv2.BORDER_CONSTANT, value=colour)


def _caption(text: str, width: int) -> np.ndarray:
    return caption(text, width, CAPTION)


def plot_ranked_lists(
    lists: Sequence[RankedList],
    query_paths: Sequence[Path],
    gallery_paths: Sequence[Path],
    path: str | Path,
) -> Path:
    """One row per query: the query, then its top gallery images framed green (same
    identity) or red (another identity or a distractor), captioned with the distance."""
    if not lists:
        raise DataError("no queries to draw")
    top_k = max(len(lst.gallery) for lst in lists)
    height, width = CELL
    tall = height + CAPTION.label_size("0")[1]
    rows = []
    for lst in lists:
        cells = [np.vstack([_cell(Path(query_paths[lst.query]), GREY), _caption(f"query {lst.query}", width)])]
        cells.append(np.full((tall, width // 4, 3), 255, np.uint8))
        for g, dist, match in zip(lst.gallery, lst.distances, lst.matches):
            cell = _cell(Path(gallery_paths[g]), GREEN if match else RED)
            cells.append(np.vstack([cell, _caption(distance(dist), width)]))
        for _ in range(top_k - len(lst.gallery)):
            cells.append(np.full((tall, width, 3), 255, np.uint8))
        rows.append(np.hstack(cells))
    mosaic = np.vstack(rows)
    path = Path(path)
    ok, payload = cv2.imencode(".png", cv2.cvtColor(mosaic, cv2.COLOR_RGB2BGR))
    if not ok:
        raise DataError(f"{path}: could not encode the ranked-list picture")
    write_bytes_atomic(path, payload.tobytes())
    return path


def pick_queries(result: RankingResult, count: int) -> np.ndarray:
    """``count`` queries spread evenly over those that have a true match."""
    valid = np.flatnonzero(~np.isnan(result.average_precision))
    if valid.size <= count:
        return valid
    return valid[np.linspace(0, valid.size - 1, count).round().astype(int)]


def write_ranking_plots(
    out_dir: str | Path,
    result: RankingResult,
    query_features: np.ndarray,
    gallery_features: np.ndarray,
    query_records: Sequence[ImageRecord],
    gallery_records: Sequence[ImageRecord],
    *,
    num_queries: int = 8,
    top_k: int = 10,
) -> list[Path]:
    """``ranked_list.png`` (Euclidean distance order, junk removed) and ``cmc.png``."""
    out = Path(out_dir)
    lists = ranked_lists(
        query_features,
        gallery_features,
        [r.pid for r in query_records],
        [r.pid for r in gallery_records],
        [r.camid for r in query_records],
        [r.camid for r in gallery_records],
        queries=pick_queries(result, num_queries),
        top_k=top_k,
    )
    ranked = plot_ranked_lists(
        lists, [r.path for r in query_records], [r.path for r in gallery_records], out / "ranked_list.png"
    )
    title = "CMC (re-ranked)" if result.reranked else "CMC"
    return [ranked, plot_cmc(result, out / "cmc.png", title=title)]


def plot_roc(result: VerificationResult, path: str | Path) -> Path:
    if result.roc is None:
        raise DataError("verification result carries no ROC curve")
    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.add_subplot()
    # A log FAR axis shows the low-FAR region that thresholds are chosen in; FAR 0 cannot
    # be drawn there, so it is pinned at a tenth of the smallest resolvable FAR.
    floor = min([0.1 / max(1, result.num_impostor), *(far / 2 for far in result.tar_at_far)])
    ax.step(np.maximum(result.roc.far, floor), result.roc.tar, where="post")
    for far, tar in result.tar_at_far.items():
        ax.plot([far], [tar], marker="o", label=f"TAR {percent(tar)} @ FAR {far:g}")
    ax.set_xscale("log")
    ax.set_xlim(floor, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("false accept rate")
    ax.set_ylabel("true accept rate")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(f"ROC: AUC {result.auc:.4f}, EER {percent(result.eer)} ({count(result.num_pairs)} pairs)", fontsize=9)
    fig.tight_layout()
    return _save_figure(fig, Path(path))


def plot_histograms(result: VerificationResult, path: str | Path) -> Path:
    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.add_subplot()
    edges = result.histogram_edges
    width = np.diff(edges)
    for counts, label, colour in (
        (result.genuine_histogram, f"genuine ({result.num_genuine})", "tab:green"),
        (result.impostor_histogram, f"impostor ({result.num_impostor})", "tab:red"),
    ):
        share = counts / max(1, counts.sum())
        ax.bar(edges[:-1], share, width=width, align="edge", alpha=0.5, color=colour, label=label)
    ax.axvline(result.threshold, color="black", linestyle="--", label=f"best-accuracy threshold {distance(result.threshold)}")
    ax.set_xlabel("distance (Euclidean, L2-normalized embeddings)")
    ax.set_ylabel("share of pairs")
    ax.legend(fontsize=8)
    ax.set_title(f"Pair distances: accuracy {percent(result.accuracy)} ± {percent(result.accuracy_std)}", fontsize=9)
    fig.tight_layout()
    return _save_figure(fig, Path(path))


def write_verification_plots(out_dir: str | Path, result: VerificationResult) -> list[Path]:
    """``roc.png`` and ``distance_histogram.png``."""
    out = Path(out_dir)
    return [plot_roc(result, out / "roc.png"), plot_histograms(result, out / "distance_histogram.png")]


def plot_training_curves(history: Sequence[dict], path: str | Path, title: str = "training") -> Path:
    """A training run's history as one picture: the loss parts (epoch means) and the
    learning rate against the global step at each epoch's end, and Rank-1 and mAP against
    the epoch for the epochs that were evaluated.

    ``history`` is the list of epoch entries a run records (``history.jsonl``); entries
    written before steps were recorded are placed by epoch instead.

    Raises:
        DataError: ``history`` is empty.
    """
    if not history:
        raise DataError(f"{path}: no epochs to draw")
    by_step = all("step" in entry for entry in history)
    x = [entry["step"] if by_step else entry["epoch"] for entry in history]
    evaluated = [entry for entry in history if isinstance(entry.get("eval"), dict)]
    fig = Figure(figsize=(7, 8 if evaluated else 5.5), dpi=100)
    axes = fig.subplots(3 if evaluated else 2, 1)
    losses, lr_axis = axes[0], axes[1]
    for key, label in (("loss", "total"), ("ce", "cross-entropy"), ("metric", "metric loss")):
        values = [entry.get(key) for entry in history]
        if any(v is not None for v in values):
            losses.plot(x, [np.nan if v is None else v for v in values], marker="o", markersize=3, label=label)
    losses.set_ylabel("loss (epoch mean)")
    losses.legend(fontsize=8)
    losses.grid(alpha=0.3)
    losses.set_title(f"{title}: {len(history)} epochs", fontsize=9)
    lr_axis.plot(x, [entry.get("lr", np.nan) for entry in history], marker="o", markersize=3, color="tab:purple")
    lr_axis.set_ylabel("learning rate (last step)")
    lr_axis.set_xlabel("step" if by_step else "epoch")
    lr_axis.grid(alpha=0.3)
    losses.set_xlabel(lr_axis.get_xlabel())
    for axis in axes:
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    if evaluated:
        ranking = axes[2]
        epochs = [entry["epoch"] for entry in evaluated]
        for key, label in ((key, RANKING_METRICS[key]) for key in ("rank1", "mAP")):
            ranking.plot(epochs, [entry["eval"].get(key, np.nan) * 100 for entry in evaluated], marker="o", markersize=3, label=label)
        ranking.set_xlabel("epoch")
        ranking.set_ylabel("%")
        ranking.set_ylim(0, 100)
        ranking.legend(fontsize=8)
        ranking.grid(alpha=0.3)
    fig.tight_layout()
    return _save_figure(fig, Path(path))
