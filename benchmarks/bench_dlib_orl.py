"""dlib-face on the ORL faces: faces found, descriptor norms, pair accuracy over all pairs.

Every one of the 400 ORL images (40 people x 10, 92x112 grey) goes through reid's
``DlibFaceEncoder``: dlib's HOG detector (upsampled only when nothing is found), 5-point
alignment, the ResNet descriptor.  Images without a detected face are counted, not
guessed.  Over all pairs of images whose faces were found, the script reports:

* pair accuracy at the card's threshold on reid's distance (Euclidean between
  L2-normalized descriptors), and at dlib's own 0.6 and 0.5 on its raw descriptors;
* the same at the card's threshold counting the pairs with a missing face as errors;
* 10-fold accuracy (threshold chosen on the other nine folds), ROC AUC and EER under the
  verification protocol of ``reid verify``;
* leave-one-out 1-NN identification;
* the descriptors' norms, which relate dlib's 0.6 to the card's threshold.

Run: ``python benchmarks/bench_dlib_orl.py [--data ../shared/data/orl_faces] [--json FILE]``
(about a minute on two cores).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from reid.data.io import read_image
from reid.errors import DataError
from reid.evaluation import pair_distance, verification_metrics
from reid.models import DlibFaceEncoder
from reid.models.dlib_face import AUTHORS_THRESHOLD

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "orl_faces"


def accuracy(distances: np.ndarray, same: np.ndarray, threshold: float) -> float:
    return float(np.mean((distances <= threshold) == same))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="ORL folder with s1..s40/1..10.pgm")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    paths = sorted(args.data.glob("s*/*.pgm"), key=lambda p: (int(p.parent.name[1:]), int(p.stem)))
    if not paths:
        raise SystemExit(f"{args.data}: no ORL images (s*/*.pgm)")

    encoder = DlibFaceEncoder()
    chips, labels, missing = [], [], []
    start = time.perf_counter()
    for path in paths:
        try:
            chips.append(encoder.face_chip(read_image(path), path.relative_to(args.data)))
            labels.append(int(path.parent.name[1:]))
        except DataError as exc:
            missing.append(str(exc))
    detect_s = time.perf_counter() - start
    start = time.perf_counter()
    raw = encoder.raw_descriptors(chips)
    describe_s = time.perf_counter() - start

    labels_a = np.asarray(labels)
    norms = np.linalg.norm(raw, axis=1)
    unit = raw / norms[:, None]
    i, j = np.triu_indices(len(chips), 1)
    same = labels_a[i] == labels_a[j]
    unit_d = pair_distance(unit[i], unit[j])
    raw_d = pair_distance(raw[i], raw[j])
    card_threshold = float(encoder.card.threshold)
    total_pairs = len(paths) * (len(paths) - 1) // 2
    at_card = accuracy(unit_d, same, card_threshold)
    result = verification_metrics(unit_d, same, folds=10)
    full = np.sum(unit * unit, axis=1)[:, None] + np.sum(unit * unit, axis=1)[None] - 2 * unit @ unit.T
    np.fill_diagonal(full, np.inf)
    nn_accuracy = float(np.mean(labels_a[np.argmin(full, axis=1)] == labels_a))

    figures = {
        "images": len(paths),
        "faces_found": len(chips),
        "missing": missing,
        "detect_align_ms_per_image": 1000 * detect_s / len(paths),
        "descriptor_ms_per_face": 1000 * describe_s / max(1, len(chips)),
        "descriptor_norm": {"median": float(np.median(norms)), "min": float(norms.min()), "max": float(norms.max())},
        "pairs_total": total_pairs,
        "pairs_scored": int(same.size),
        "genuine": int(same.sum()),
        "impostor": int((~same).sum()),
        "card_threshold": card_threshold,
        "accuracy_at_card_threshold": at_card,
        "accuracy_at_card_threshold_missing_as_errors": at_card * same.size / total_pairs,
        f"accuracy_raw_{AUTHORS_THRESHOLD}": accuracy(raw_d, same, AUTHORS_THRESHOLD),
        "accuracy_raw_0.5": accuracy(raw_d, same, 0.5),
        f"decisions_agree_card_vs_raw_{AUTHORS_THRESHOLD}": float(
            np.mean((unit_d <= card_threshold) == (raw_d <= AUTHORS_THRESHOLD))
        ),
        "best_accuracy_threshold": result.threshold,
        "best_accuracy": accuracy(unit_d, same, result.threshold),
        "kfold_accuracy": result.accuracy,
        "kfold_accuracy_std": result.accuracy_std,
        "auc": result.auc,
        "eer": result.eer,
        "loo_1nn_identification": nn_accuracy,
    }
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        shown = f"{value:.4f}" if isinstance(value, float) else value
        print(f"{key:<{width}}  {shown}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
