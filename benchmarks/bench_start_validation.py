"""Choosing how to fine-tune from a published Re-ID start on validation identities carved
from the training split, never on the held-out test identities.

The training identities of a Market-1501-style folder are split into ``--folds`` disjoint
validation sets (seeded). For each fold a Market-1501-style folder of links is built: the
other identities are its ``bounding_box_train``; each validation identity gives one query
image per camera (seeded) and the rest of its images to ``bounding_box_test``. Per fold the
script then

* evaluates the start model as it is (zero-shot),
* trains with the recipe (``--config``) and ``--options`` from the start, saving the trained
  weights as they are (``wise_alpha`` 1), and
* evaluates the trained network blended with its start at each ``--alphas`` value
  (:mod:`reid.engine.wise`: ``alpha * trained + (1 - alpha) * start``).

It prints Rank-1 and mAP per fold and their mean change from the zero-shot figures. The
test split (``query``, ``bounding_box_test``) of ``--data`` is never read.

Run: ``python benchmarks/bench_start_validation.py --data PATH [--config
configs/market1501-cpu.yaml] [--start osnet_x0_25.msmt17-onnx] [--arch osnet_x0_25]
[--options backbone_lr_scale=1.0] [--alphas 0.1 0.2 0.3 0.5] [--folds 3]``.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections import defaultdict
from pathlib import Path

import torch
import yaml

from reid.data import load_dataset
from reid.data.records import ImageRecord
from reid.engine import TrainConfig, train
from reid.engine.config import resolve_config
from reid.engine.trainer import evaluate_dataset
from reid.engine.wise import blended, start_weights
from reid.evaluation import RankingResult
from reid.models import load_encoder
from reid.models.encoder import TorchEncoder
from reid.models.network import ReidNet
from reid.models.pretrained import load_start, resolve_start, start_neck


def carve_folds(data: Path, folds: int, seed: int, root: Path) -> list[Path]:
    """Market-1501-style folders of links, one per fold, as the module docstring says: the
    identities shuffled by ``seed`` and cut into ``folds`` runs (the first ones one longer
    where they do not divide evenly)."""
    by_pid: dict[int, list[ImageRecord]] = defaultdict(list)
    for record in load_dataset(f"market1501:{data}").train:
        by_pid[record.pid].append(record)
    pids = sorted(by_pid)
    random.Random(seed).shuffle(pids)
    size, extra = divmod(len(pids), folds)
    made = []
    for k in range(folds):
        begin = k * size + min(k, extra)
        held = set(pids[begin : begin + size + (k < extra)])
        folder = root / f"fold{k}"
        for split in ("bounding_box_train", "query", "bounding_box_test"):
            (folder / split).mkdir(parents=True)
        draw = random.Random(seed + k)
        for pid in sorted(by_pid):
            shots = sorted(by_pid[pid], key=lambda r: r.path.name)
            if pid not in held:
                for record in shots:
                    (folder / "bounding_box_train" / record.path.name).symlink_to(record.path.resolve())
                continue
            for camera in sorted({r.camid for r in shots}):
                seen = [r for r in shots if r.camid == camera]
                query = draw.choice(seen)
                for record in seen:
                    split = "query" if record is query else "bounding_box_test"
                    (folder / split / record.path.name).symlink_to(record.path.resolve())
        made.append(folder)
    return made


def figures(result: RankingResult) -> tuple[float, float]:
    """Rank-1 and mAP in percent."""
    return 100 * result.rank1, 100 * result.mAP


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a Market-1501-style folder (its bounding_box_train is read)")
    parser.add_argument("--config", type=Path, default=Path("configs/market1501-cpu.yaml"))
    parser.add_argument("--start", default="osnet_x0_25.msmt17-onnx")
    parser.add_argument("--arch", default="osnet_x0_25")
    parser.add_argument("--size", default="256x128")
    parser.add_argument("--options", nargs="*", default=["backbone_lr_scale=1.0"], help="KEY=VALUE recipe keys (YAML values)")
    parser.add_argument("--alphas", nargs="*", type=float, default=[0.1, 0.2, 0.3, 0.4, 0.5])
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="seed of the folds (training uses the recipe's)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    height, width = (int(v) for v in args.size.split("x"))
    overrides = {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.options)}
    zero_encoder = load_encoder(args.start, device="cpu")
    start = resolve_start(args.arch, args.start)
    columns = ["zero-shot", "alpha 1", *(f"alpha {a:g}" for a in args.alphas)]
    table: dict[str, list[tuple[float, float]]] = {c: [] for c in columns}
    with tempfile.TemporaryDirectory() as scratch:
        for k, folder in enumerate(carve_folds(args.data, args.folds, args.seed, Path(scratch))):
            dataset = load_dataset(f"market1501:{folder}")
            table["zero-shot"].append(figures(evaluate_dataset(zero_encoder, dataset, 128)))
            config = resolve_config(TrainConfig(), args.config, {
                **overrides, "data": f"market1501:{folder}", "out": Path(scratch) / f"model{k}", "architecture": args.arch,
                "pretrained": args.start, "input_size": (height, width), "wise_alpha": 1.0, "eval_every": 0,
                "threads": args.threads, "device": "cpu",
            })
            result = train(config)
            network, card = result.network.eval(), result.card
            table["alpha 1"].append(figures(evaluate_dataset(TorchEncoder(network, card, torch.device("cpu")), dataset, 128)))
            neck, dim = start_neck(start, args.arch, config.keep_fc, config.embedding_dim)
            begun = ReidNet(args.arch, num_classes=0, embedding_dim=dim, neck=neck)
            load_start(begun, start)
            weights = start_weights(begun)
            for alpha in args.alphas:
                with blended(network, weights, alpha):
                    result_alpha = evaluate_dataset(TorchEncoder(network, card, torch.device("cpu")), dataset, 128)
                table[f"alpha {alpha:g}"].append(figures(result_alpha))
            print(f"fold {k}: " + ", ".join(f"{c} {r1:.1f}/{m:.1f}" for c, (r1, m) in ((c, table[c][-1]) for c in columns)), flush=True)
    zero = table["zero-shot"]
    print(f"\n{'weights':<12} {'Rank-1 per fold':<24} {'mAP per fold':<24} {'mean dRank-1':>12} {'mean dmAP':>10}")
    for column in columns:
        rows = table[column]
        d_rank1 = sum(r[0] - z[0] for r, z in zip(rows, zero)) / len(rows)
        d_map = sum(r[1] - z[1] for r, z in zip(rows, zero)) / len(rows)
        print(
            f"{column:<12} {' '.join(f'{r[0]:5.1f}' for r in rows):<24} {' '.join(f'{r[1]:5.1f}' for r in rows):<24} "
            f"{d_rank1:>+12.2f} {d_map:>+10.2f}"
        )


if __name__ == "__main__":
    main()
