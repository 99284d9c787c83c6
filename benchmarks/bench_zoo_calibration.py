"""Verification distances of published Re-ID models on a Market-1501 training split: the
threshold at a false accept rate, for a model that did not train on those people.

Every image of the split's identities (``bounding_box_train``, distractors left out) is
embedded by ``--model`` (any name ``load_encoder`` takes); over every pair, two images of one
identity are genuine and two of different identities impostor. The script prints, per
model, the pairs, the median genuine and impostor distance (Euclidean between unit
embeddings), the threshold at FAR <= ``--far`` with its FAR and TAR, and the impostor
quantiles (:func:`reid.decision.impostor_quantiles`, what ``--far`` reads from a card).

A threshold found here holds only for a model that never saw these people: the split is
Market-1501's training identities, so it is held out for a model trained elsewhere (on
MSMT17, say), and not for one trained on Market-1501.  Use the test split
(``--split test``) of the same set for nothing you report as held out once a threshold is
taken from it.

Run: ``python benchmarks/bench_zoo_calibration.py --data PATH --models NAME [NAME ...]
[--far 1e-3] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from reid.data.io import read_image
from reid.data.market import read_market_style
from reid.decision import impostor_quantiles
from reid.evaluation.verification import choose_threshold
from reid.models import load_encoder


def pair_distances(features: np.ndarray, pids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Euclidean distance and same-identity flag of every unordered pair (upper triangle)."""
    upper = np.triu_indices(len(pids), k=1)
    gram = np.clip(features @ features.T, -1.0, 1.0)
    distances = np.sqrt(np.maximum(2.0 - 2.0 * gram, 0.0))[upper]
    return distances, (pids[:, None] == pids[None, :])[upper]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="A Market-1501 layout.")
    parser.add_argument("--models", nargs="+", required=True)
    parser.add_argument("--split", choices=("train", "test"), default="train")
    parser.add_argument("--far", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    dataset = read_market_style(args.data, "market1501")
    records = dataset.train if args.split == "train" else dataset.query + [r for r in dataset.gallery if r.pid > 0]
    pids = np.array([record.pid for record in records])
    images = [read_image(record.path) for record in records]
    results = {}
    for name in args.models:
        encoder = load_encoder(name)
        features = np.concatenate([encoder.embed(images[i : i + args.batch]) for i in range(0, len(images), args.batch)])
        distances, same = pair_distances(features, pids)
        choice = choose_threshold(distances, same, args.far)
        results[name] = {
            "images": len(records),
            "identities": len(set(pids.tolist())),
            "genuine_pairs": int(same.sum()),
            "impostor_pairs": int((~same).sum()),
            "genuine_median": float(np.median(distances[same])),
            "impostor_median": float(np.median(distances[~same])),
            "threshold": choice.threshold,
            "far": choice.far,
            "tar": choice.tar,
            "impostor_quantiles": impostor_quantiles(distances[~same]),
        }
        row = results[name]
        print(
            f"{name}: {row['images']} images of {row['identities']} identities, {row['genuine_pairs']} genuine and "
            f"{row['impostor_pairs']} impostor pairs; median distance genuine {row['genuine_median']:.4f}, impostor "
            f"{row['impostor_median']:.4f}; threshold {row['threshold']:.4f} at FAR {row['far']:.4f} "
            f"(<= {args.far:g}), TAR {row['tar']:.4f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
