"""Ready-made face encoders side by side on ORL: 10-fold verification over a fixed list of
600 pairs, faces found, and milliseconds a photo for detection and for embedding.

The pairs are built here, by :func:`orl_pairs` from a fixed seed (code, not a data file):
10 folds of 30 genuine pairs (one person, two different shots) and 30 impostor pairs (two
people, one shot each), no pair twice; ``--write-pairs FILE`` writes them as the CSV that
``reid verify --pairs FILE --root ORL --folds 10`` reads (genuine and impostor pairs each in
fold order, which is how ``--folds 10`` cuts them).  ``--subjects 21-40`` restricts them to
those people (the held-out half of the face recipe in docs/models.md).

Each model embeds every photo once.  A photo in which its detector finds no face is counted
and embedded whole (``--no-face whole``), so every model is scored on the same 600 pairs.
Detection time is the model's own face finder alone; embedding time is the rest (landmarks,
alignment, the network).  Both are wall time per photo after one warm-up photo, decoding
excluded, measured in the same run for every model (compare them as ratios).

``--calibrate`` also prints, for each model, the threshold at FAR <= 1e-3 over every pair
of the photos used (every genuine and impostor pair, not only the 600): how the card
threshold of ``sface`` was chosen, and the impostor quantiles that the cards of ``sface`` and
``dlib-face`` carry (what ``--far`` and the far-looser note read).

Run: ``python benchmarks/bench_faces.py [--models dlib-face sface] [--data ../shared/data/orl_faces]
[--subjects 1-40] [--seed 0] [--write-pairs FILE] [--calibrate] [--json FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import cv2
import numpy as np

from reid.data.io import read_image
from reid.decision import impostor_quantiles
from reid.evaluation.names import count, distance, far_percent, percent
from reid.evaluation.verification import choose_threshold, verification_metrics
from reid.models import DlibFaceEncoder, SFaceEncoder, l2_normalize, load_encoder

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "orl_faces"
SHOTS = 10
FOLDS = 10
PER_FOLD = 30  # genuine pairs, and as many impostor pairs, in each fold


def orl_pairs(subjects: Sequence[int], seed: int = 0) -> list[tuple[str, str, bool, int]]:
    """``(photo_a, photo_b, same, fold)`` with photos as ``sN/K.pgm``: FOLDS folds of
    PER_FOLD genuine and PER_FOLD impostor pairs drawn with ``seed``, no pair twice."""
    rng = np.random.default_rng(seed)
    people = list(subjects)
    seen: set[frozenset[str]] = set()
    pairs: list[tuple[str, str, bool, int]] = []

    def draw(same: bool) -> tuple[str, str]:
        while True:
            if same:
                person = people[int(rng.integers(len(people)))]
                a, b = rng.choice(SHOTS, size=2, replace=False) + 1
                first, second = f"s{person}/{a}.pgm", f"s{person}/{b}.pgm"
            else:
                one, other = rng.choice(len(people), size=2, replace=False)
                first = f"s{people[one]}/{int(rng.integers(SHOTS)) + 1}.pgm"
                second = f"s{people[other]}/{int(rng.integers(SHOTS)) + 1}.pgm"
            key = frozenset((first, second))
            if key not in seen:
                seen.add(key)
                return first, second

    for fold in range(FOLDS):
        for same in (True, False):
            pairs += [(*draw(same), same, fold) for _ in range(PER_FOLD)]
    return pairs


def subject_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def stages(model: str) -> tuple[Callable, Callable, Callable]:
    """(find the face, chip and embed a found face, embed a photo whole) of a model."""
    encoder = load_encoder(model)
    if isinstance(encoder, (DlibFaceEncoder, SFaceEncoder)):
        size = encoder.card.input_size
        return (
            encoder.find_face,
            lambda image, face: encoder.embed_chips([encoder.chip_of(image, face)])[0],
            lambda image: encoder.embed_chips([cv2.resize(image, size[::-1], interpolation=cv2.INTER_AREA)])[0],
        )
    # A trained model: no face finder of its own; the photo is its input.
    return (lambda image: None, None, lambda image: l2_normalize(encoder.embed([image]))[0])


def embed_all(model: str, images: list[np.ndarray]) -> tuple[np.ndarray, int, float, float]:
    """Embeddings of every photo, faces found, ms a photo detecting, ms a photo embedding."""
    find, embed_face, embed_whole = stages(model)
    find(images[0])
    detect_s = embed_s = 0.0
    found = 0
    rows = []
    for image in images:
        tick = time.perf_counter()
        face = find(image)
        tock = time.perf_counter()
        rows.append(embed_whole(image) if face is None else embed_face(image, face))
        embed_s += time.perf_counter() - tock
        detect_s += tock - tick
        found += face is not None
    return np.asarray(rows, np.float32), found, 1000 * detect_s / len(images), 1000 * embed_s / len(images)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["dlib-face", "sface"])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="ORL root: s1..s40/1..10.pgm")
    parser.add_argument("--subjects", default="1-40", help="People the pairs are drawn from, e.g. 21-40.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write-pairs", type=Path, default=None, help="Write the pair list as CSV and stop.")
    parser.add_argument("--calibrate", action="store_true", help="Also the threshold at FAR 1e-3 over all pairs.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    subjects = subject_range(args.subjects)
    pairs = orl_pairs(subjects, args.seed)
    if args.write_pairs:
        lines = [f"{a},{b},{int(same)}" for a, b, same, _ in pairs]
        args.write_pairs.write_text("path_a,path_b,label\n" + "\n".join(lines) + "\n")
        print(f"{len(pairs)} pairs ({FOLDS} folds) over s{subjects[0]}-s{subjects[-1]} written to {args.write_pairs}")
        return
    photos = [f"s{s}/{k}.pgm" for s in subjects for k in range(1, SHOTS + 1)]
    missing = [p for p in photos if not (args.data / p).is_file()]
    if missing:
        raise SystemExit(f"{args.data}: {len(missing)} ORL photos missing, first {missing[0]}")
    images = [read_image(args.data / p) for p in photos]
    where = {p: i for i, p in enumerate(photos)}
    a = np.array([where[p[0]] for p in pairs])
    b = np.array([where[p[1]] for p in pairs])
    same = np.array([p[2] for p in pairs])
    folds = np.array([p[3] for p in pairs])
    print(
        f"machine: {os.cpu_count()} cores; {len(images)} photos of {len(subjects)} people, "
        f"{len(pairs)} pairs in {FOLDS} folds (seed {args.seed})"
    )
    header = f"{'model':<12} {'acc':>6} {'±':>5} {'AUC':>6} {'EER':>6} {'TAR@1e-2':>8} {'TAR@1e-3':>8} " \
             f"{'faces':>7} {'det ms':>7} {'emb ms':>7}"
    print(header)
    results = {}
    for model in args.models:
        features, found, detect_ms, embed_ms = embed_all(model, images)
        distances = np.linalg.norm(features[a] - features[b], axis=1)
        metrics = verification_metrics(distances, same, folds=folds, fars=(1e-2, 1e-3))
        row = {
            "accuracy": metrics.accuracy, "accuracy_std": metrics.accuracy_std, "auc": metrics.auc, "eer": metrics.eer,
            "tar_at_far_1e-2": metrics.tar_at_far[1e-2], "tar_at_far_1e-3": metrics.tar_at_far[1e-3],
            "faces_found": found, "photos": len(images), "detect_ms": detect_ms, "embed_ms": embed_ms,
        }
        print(
            f"{model:<12} {metrics.accuracy:6.4f} {metrics.accuracy_std:5.3f} {metrics.auc:6.4f} {metrics.eer:6.4f} "
            f"{metrics.tar_at_far[1e-2]:8.4f} {metrics.tar_at_far[1e-3]:8.4f} {found:>3}/{len(images):<3} "
            f"{detect_ms:7.1f} {embed_ms:7.1f}"
        )
        if args.calibrate:
            upper = np.triu_indices(len(images), 1)
            everything = np.linalg.norm(features[upper[0]] - features[upper[1]], axis=1)
            people = np.repeat(np.arange(len(subjects)), SHOTS)
            choice = choose_threshold(everything, people[upper[0]] == people[upper[1]], target_far=1e-3)
            row["calibration"] = choice.to_dict()
            impostors = everything[people[upper[0]] != people[upper[1]]]
            row["impostor_quantiles"] = impostor_quantiles(impostors)
            print(
                f"{'':<12} threshold {distance(choice.threshold)} at FAR <= 1e-3 over all {count(choice.num_genuine)} "
                f"genuine and {count(choice.num_impostor)} impostor pairs: FAR {far_percent(choice.far)}, "
                f"TAR {percent(choice.tar)}"
            )
            print(f"{'':<12} impostor quantiles (rate, distance) for the card: {row['impostor_quantiles']}")
        results[model] = row
    if len(args.models) > 1:
        first, *others = args.models
        for other in others:
            total = results[other]["detect_ms"] + results[other]["embed_ms"]
            base = results[first]["detect_ms"] + results[first]["embed_ms"]
            print(f"{other} takes {total / base:.2f} of {first}'s time a photo (detection + embedding)")
    if args.json:
        args.json.write_text(json.dumps({"pairs": len(pairs), "seed": args.seed, "models": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
