"""Trainer throughput against the bare model's forward + backward, measured in one run.

The bare loop feeds one fixed, already normalized batch to the network and does
forward, cross-entropy, backward and an optimizer step: the upper bound for training
speed at that batch and image size.  The trainer run adds everything real training
needs (P x K sampling, augmentation, BNNeck losses, progress callbacks).  Both time the
same number of steps after the same warm-up.

    python benchmarks/bench_trainer.py --arch resnet18 --size 128x64 --steps 30
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from reid.data import SyntheticConfig, generate_synthetic
from reid.engine import TrainCallbacks, TrainConfig, train
from reid.models.network import ReidNet


def bare_images_per_second(arch: str, size: tuple[int, int], batch: int, classes: int, steps: int, warmup: int) -> float:
    torch.manual_seed(0)
    net = ReidNet(arch, num_classes=classes).train()
    optimizer = torch.optim.Adam(net.parameters(), lr=3.5e-4, weight_decay=5e-4)
    images = torch.randn(batch, 3, *size)
    labels = torch.arange(batch) % classes
    for step in range(warmup + steps):
        if step == warmup:
            started = time.perf_counter()
        loss = F.cross_entropy(net(images).logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return steps * batch / (time.perf_counter() - started)


def trainer_images_per_second(arch: str, size: tuple[int, int], p: int, k: int, steps: int, warmup: int, root: Path) -> float:
    stamps: list[float] = []
    config = TrainConfig(
        data=f"market1501:{root}", out=root / "model", architecture=arch, pretrained=None,
        input_size=size, p=p, k=k, epochs=1000, max_steps=warmup + steps, warmup_epochs=0,
    )
    train(config, TrainCallbacks(on_step=lambda _: stamps.append(time.perf_counter())))
    # stamps[i] is taken after step i; steps warmup..warmup+steps-1 are timed.
    return steps * p * k / (stamps[-1] - stamps[warmup - 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="resnet18")
    parser.add_argument("--size", default="128x64")
    parser.add_argument("--p", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        # Enough identities that every timed step falls inside the first epoch: the
        # end-of-epoch checkpoint is real work, but belongs to epochs, not to steps.
        identities = (args.warmup + args.steps + 2) * args.p // 2 + args.p
        root = generate_synthetic(Path(tmp) / "data", SyntheticConfig(train_ids=identities, test_ids=4, distractors=0, junk=0))
        ours = trainer_images_per_second(args.arch, size, args.p, args.k, args.steps, args.warmup, root)
    bare = bare_images_per_second(args.arch, size, args.p * args.k, identities, args.steps, args.warmup)
    print(f"{args.arch} {size[0]}x{size[1]}, batch {args.p}x{args.k}, {args.steps} timed steps, {torch.get_num_threads()} threads")
    print(f"bare forward+backward : {bare:8.1f} images/s")
    print(f"reid trainer          : {ours:8.1f} images/s")
    print(f"ratio trainer / bare  : {ours / bare:8.3f}  (aim >= 0.90)")


if __name__ == "__main__":
    main()
