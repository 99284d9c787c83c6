"""Backbones side by side at one input size, measured in one run: parameters, forward
images/s (eval, no gradient) and forward+backward images/s (cross-entropy, backward,
Adam step) at one batch size; then ``reid train``'s images/s against the bare
forward+backward of one backbone (the trainer's overhead; aim >= 0.9).

    python benchmarks/bench_backbones.py --size 256x128 --batch 32 --steps 5
    python benchmarks/bench_backbones.py --arch resnet18 --arch osnet_x0_25 --trainer-arch osnet_x0_25

Weights are random: speed does not depend on them, and no download is needed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trainer import bare_images_per_second, trainer_images_per_second  # noqa: E402

from reid.data import SyntheticConfig, generate_synthetic  # noqa: E402
from reid.models.backbones import architecture_available  # noqa: E402
from reid.models.network import ReidNet  # noqa: E402

DEFAULT_ARCHS = (
    "resnet18", "resnet50", "mobilenet_v2", "efficientnet_lite0",
    "osnet_x0_25", "osnet_x0_5", "osnet_x0_75", "osnet_x1_0",
)


def forward_images_per_second(arch: str, size: tuple[int, int], batch: int, steps: int, warmup: int) -> float:
    net = ReidNet(arch, num_classes=0).eval()
    images = torch.randn(batch, 3, *size)
    with torch.no_grad():
        for step in range(warmup + steps):
            if step == warmup:
                started = time.perf_counter()
            net(images)
    return steps * batch / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append", help="Backbone to measure (repeatable; default: eight of them).")
    parser.add_argument("--size", default="256x128")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--classes", type=int, default=751)
    parser.add_argument("--trainer-arch", default="resnet18", help="Backbone for the trainer-versus-bare row ('' skips it).")
    parser.add_argument("--json", type=Path, help="Also write the rows as JSON.")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    rows = []
    print(f"{size[0]}x{size[1]}, batch {args.batch}, {args.steps} timed steps after {args.warmup}, {torch.get_num_threads()} threads")
    print(f"{'backbone':<20}{'parameters':>12}{'forward img/s':>15}{'fwd+bwd img/s':>15}")
    for arch in args.arch or DEFAULT_ARCHS:
        if not architecture_available(arch):
            print(f"{arch:<20} skipped: needs timm (pip install 'reid-toolkit[pretrained]')")
            continue
        params = sum(p.numel() for p in ReidNet(arch, num_classes=0).backbone.parameters())
        forward = forward_images_per_second(arch, size, args.batch, args.steps, args.warmup)
        both = bare_images_per_second(arch, size, args.batch, args.classes, args.steps, args.warmup)
        rows.append({"backbone": arch, "parameters": params, "forward_img_s": forward, "train_img_s": both})
        print(f"{arch:<20}{params:>12,}{forward:>15.1f}{both:>15.1f}", flush=True)
    report: dict = {"size": list(size), "batch": args.batch, "threads": torch.get_num_threads(), "backbones": rows}
    if args.trainer_arch:
        p, k = args.batch // 4, 4
        with tempfile.TemporaryDirectory() as tmp:
            # Enough identities that every timed step falls inside the first epoch.
            identities = (args.warmup + args.steps + 2) * p // 2 + p
            root = generate_synthetic(Path(tmp) / "data", SyntheticConfig(train_ids=identities, test_ids=4, distractors=0, junk=0))
            ours = trainer_images_per_second(args.trainer_arch, size, p, k, args.steps, args.warmup, root)
        bare = bare_images_per_second(args.trainer_arch, size, p * k, identities, args.steps, args.warmup)
        report["trainer"] = {"backbone": args.trainer_arch, "trainer_img_s": ours, "bare_img_s": bare, "ratio": ours / bare}
        print(f"reid train {args.trainer_arch} (P={p} K={k}): {ours:.1f} img/s, bare {bare:.1f} img/s, ratio {ours / bare:.3f} (aim >= 0.90)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
