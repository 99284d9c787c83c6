"""Ranking evaluation on a Market-1501-shaped problem: reid against its peers, same run.

The problem has Market-1501's shape: 3,368 queries and 15,913 gallery items (750
identities plus distractors of pid 0) over 6 cameras, 512-dimensional L2-normalized
features clustered by identity, with a per-camera shift.  Every implementation gets the
same float32 distance matrix (squared Euclidean, as torchreid computes it) and the same
labels; the script prints each one's Rank-1/5/10, mAP, mINP, time and peak memory, and the
largest difference from reid's figures.

Peers, each timed when it can be imported:

* a plain per-query NumPy implementation written here (stable argsort of each row);
* torchreid's ``evaluate_rank`` (``pip install torchreid --no-deps``).  The PyPI release
  (0.2.5) ships without its Cython source, so only its pure-Python path runs from it;
* fast-reid's compiled evaluator ``rank_cy.evaluate_cy``, the Cython code that torchreid's
  compiled path is also built from: ``pip install fastreid --no-deps cython``, then run
  ``cythonize -i -3 rank_cy.pyx`` in the installed ``fastreid/evaluation/rank_cylib``
  folder (with ``CFLAGS=-I$(python -c 'import numpy; print(numpy.get_include())')``).

Peak memory is what tracemalloc sees allocated during the call (NumPy buffers included),
beyond the inputs.  Run: ``python benchmarks/bench_eval.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from reid.evaluation import evaluate_distmat, evaluate_features
from reid.evaluation.distances import distance_rows, prepare_features

NUM_QUERY, NUM_GALLERY, NUM_IDS, NUM_DISTRACTORS, CAMERAS, DIM = 3368, 15913, 750, 2798, 6, 512

Metrics = dict[str, float]


def market_shaped(seed: int = 0) -> tuple[np.ndarray, ...]:
    """Features and labels shaped like Market-1501's test split."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((NUM_IDS, DIM)).astype(np.float32)
    camera_shift = 0.8 * rng.standard_normal((CAMERAS, DIM)).astype(np.float32)

    def sample(pids: np.ndarray, cams: np.ndarray) -> np.ndarray:
        noise = 1.0 * rng.standard_normal((pids.size, DIM)).astype(np.float32)
        feats = centres[np.maximum(pids, 1) - 1] + camera_shift[cams] + noise
        distractor = pids == 0
        feats[distractor] = 1.6 * rng.standard_normal((int(distractor.sum()), DIM)).astype(np.float32)
        return feats / np.linalg.norm(feats, axis=1, keepdims=True)

    q_pids = np.sort(rng.integers(1, NUM_IDS + 1, NUM_QUERY))
    q_cams = rng.integers(0, CAMERAS, NUM_QUERY)
    g_pids = np.concatenate([np.zeros(NUM_DISTRACTORS, np.int64),
                             rng.integers(1, NUM_IDS + 1, NUM_GALLERY - NUM_DISTRACTORS)])
    g_cams = rng.integers(0, CAMERAS, NUM_GALLERY)
    return sample(q_pids, q_cams), sample(g_pids, g_cams), q_pids, g_pids, q_cams, g_cams


def plain_numpy(distmat, q_pids, g_pids, q_cams, g_cams, max_rank=50) -> Metrics:
    """The per-query loop every Re-ID codebase starts from, with a stable sort."""
    firsts, aps, inps = [], [], []
    for i in range(distmat.shape[0]):
        order = np.argsort(distmat[i], kind="stable")
        keep = (g_pids[order] != q_pids[i]) | (g_cams[order] != q_cams[i])
        ranks = np.flatnonzero((g_pids[order] == q_pids[i])[keep]) + 1
        if ranks.size == 0:
            continue
        firsts.append(ranks[0])
        aps.append(np.mean(np.arange(1, ranks.size + 1) / ranks))
        inps.append(ranks.size / ranks[-1])
    first = np.asarray(firsts)
    return {"rank1": np.mean(first <= 1), "rank5": np.mean(first <= 5), "rank10": np.mean(first <= 10),
            "mAP": float(np.mean(aps)), "mINP": float(np.mean(inps))}


def load_module(name: str, path: Path) -> Any:
    if path.suffix == ".py":
        spec = importlib.util.spec_from_file_location(name, path)
    else:
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def package_dir(package: str) -> Path | None:
    # find_spec on a top-level name locates the package without running its __init__,
    # which for both peers imports training dependencies the benchmark does not need.
    spec = importlib.util.find_spec(package)
    return Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None


def torchreid_python() -> Callable[..., Metrics] | None:
    root = package_dir("torchreid")
    if root is None or not (root / "reid/metrics/rank.py").is_file():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = load_module("torchreid_rank", root / "reid/metrics/rank.py")

    def run(distmat, q_pids, g_pids, q_cams, g_cams) -> Metrics:
        cmc, mAP = module.evaluate_rank(distmat, q_pids, g_pids, q_cams, g_cams, max_rank=50, use_cython=False)
        return {"rank1": cmc[0], "rank5": cmc[4], "rank10": cmc[9], "mAP": mAP, "mINP": float("nan")}

    return run


def fastreid_compiled() -> Callable[..., Metrics] | None:
    root = package_dir("fastreid")
    built = sorted((root / "evaluation/rank_cylib").glob("rank_cy*.so")) if root else []
    if not built:
        return None
    module = load_module("rank_cy", built[0])

    def run(distmat, q_pids, g_pids, q_cams, g_cams) -> Metrics:
        cmc, all_ap, all_inp = module.evaluate_cy(distmat, q_pids, g_pids, q_cams, g_cams, 50, False)
        return {"rank1": cmc[0], "rank5": cmc[4], "rank10": cmc[9], "mAP": float(np.mean(all_ap)),
                "mINP": float(np.mean(all_inp))}

    return run


def measure(fn: Callable[[], Any], repeat: int, trace: bool = True) -> tuple[Any, float, int | None]:
    """Best wall time of ``repeat`` runs, and the peak memory of one more, traced run.

    Tracing slows Python-level loops many times over, so it is never part of a timed run,
    and it is skipped (``trace=False``) for the slow pure-Python peers.
    """
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    if not trace:
        return out, best, None
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, best, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of the fast implementations (best kept)")
    args = parser.parse_args()

    q, g, q_pids, g_pids, q_cams, g_cams = market_shaped()
    qp, gp, g_sq = prepare_features(q, g, "euclidean")
    distmat = distance_rows(qp, gp, g_sq, "euclidean")
    labels = (q_pids, g_pids, q_cams, g_cams)
    print(f"problem: {NUM_QUERY} queries x {NUM_GALLERY} gallery ({NUM_DISTRACTORS} distractors), "
          f"{CAMERAS} cameras, dim {DIM}; float32 distance matrix {distmat.nbytes / 2**20:.0f} MiB")

    def ours() -> Metrics:
        r = evaluate_distmat(distmat, *labels)
        return {"rank1": r.rank1, "rank5": r.rank5, "rank10": r.rank10, "mAP": r.mAP, "mINP": r.mINP}

    rows: list[tuple[str, Metrics, float, int | None]] = []
    reference, ours_time, ours_peak = measure(ours, args.repeat)
    rows.append(("reid evaluate_distmat", reference, ours_time, ours_peak))
    feats_result, feats_time, _ = measure(lambda: evaluate_features(q, g, *labels), 1, trace=False)
    rows.append(("reid evaluate_features (distances + ranking, chunked)",
                 {k: getattr(feats_result, k) for k in reference}, feats_time, feats_result.peak_memory_bytes))
    peers: list[tuple[str, Callable[..., Metrics] | None, int, str]] = [
        ("fast-reid rank_cy.evaluate_cy (compiled)", fastreid_compiled(), args.repeat,
         "not installed or not built (see this script's docstring)"),
        ("torchreid evaluate_rank (PyPI build: Python path)", torchreid_python(), 1, "torchreid not installed"),
        ("plain per-query NumPy", plain_numpy, 1, ""),
    ]
    for name, fn, repeat, why in peers:
        if fn is None:
            print(f"skipped {name}: {why}")
            continue
        result, seconds, peak = measure(lambda fn=fn: fn(distmat, *labels), repeat, trace=repeat > 1)
        rows.append((name, result, seconds, peak))

    print(f"\n{'implementation':<56}{'Rank-1':>8}{'Rank-5':>8}{'Rank-10':>8}{'mAP':>10}{'mINP':>10}"
          f"{'seconds':>9}{'vs reid':>9}{'peak MiB':>10}{'max |diff|':>12}")
    for name, metrics, seconds, peak in rows:
        diff = max(abs(float(metrics[k]) - float(reference[k])) for k in ("rank1", "rank5", "rank10", "mAP"))
        print(f"{name:<56}{metrics['rank1']:>8.4f}{metrics['rank5']:>8.4f}{metrics['rank10']:>8.4f}"
              f"{metrics['mAP']:>10.6f}{metrics['mINP']:>10.6f}{seconds:>9.3f}{seconds / ours_time:>8.1f}x"
              f"{'-' if peak is None else f'{peak / 2**20:.1f}':>10}{diff:>12.2e}")
    print("\n'vs reid' is each time divided by reid evaluate_distmat's; 'max |diff|' is the largest "
          "difference in Rank-1/5/10 and mAP from reid's figures.  AP: mean of precision at each true match.\n"
          "Peak memory: traced in a separate run; '-' where tracing a pure-Python loop would take too long.")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, best of {args.repeat} for the fast rows")


if __name__ == "__main__":
    main()
