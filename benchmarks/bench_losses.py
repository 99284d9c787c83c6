"""Forward + backward time of every loss against pytorch-metric-learning's equivalent.

    python benchmarks/bench_losses.py [--device cpu|cuda] [--repeats 20] [--dim 2048]
                                      [--threads N] [--only triplet]

Batches are P x K with K = 4 at batch sizes 64 and 256.  Ours and theirs are timed in
alternation within the same run (so that a busy machine slows both alike) and the median
of each is reported with their ratio.  pytorch-metric-learning is an optional benchmark
dependency (``pip install pytorch-metric-learning``); without it only our times print.
The "same value" column says whether both computed the same loss on the same batch, which
tells an exact equivalent from a comparable one.  On a machine shared with other jobs,
``--threads 1`` gives steadier figures: a busy core stalls every multi-threaded kernel.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from reid.losses import build_loss

K = 4
SOFTTRIPLE_CLASSES = 100

# label -> our loss, built for embedding dimension `dim`.
OURS: dict[str, Callable[[int], nn.Module]] = {
    "triplet hard (m=0.3)": lambda dim: build_loss("triplet", mining="hard", margin=0.3),
    "triplet hard soft": lambda dim: build_loss("triplet", mining="hard", soft=True),
    "triplet all (m=0.3)": lambda dim: build_loss("triplet", mining="all", margin=0.3),
    "triplet semihard": lambda dim: build_loss("triplet", mining="semihard", margin=0.3),
    "contrastive two_margin": lambda dim: build_loss("contrastive", form="two_margin"),
    "contrastive hadsell": lambda dim: build_loss("contrastive", form="hadsell"),
    "contrastive chopra": lambda dim: build_loss("contrastive", form="chopra"),
    "lifted smooth (m=1)": lambda dim: build_loss("lifted", margin=1.0),
    "lifted hard": lambda dim: build_loss("lifted", smooth=False),
    "centroid triplet": lambda dim: build_loss("centroid_triplet"),
    f"softtriple ({SOFTTRIPLE_CLASSES} classes)": lambda dim: build_loss(
        "softtriple", num_classes=SOFTTRIPLE_CLASSES, embedding_dim=dim
    ),
}


class _Mined(nn.Module):
    """A pytorch-metric-learning loss fed by its miner, called as loss(embeddings, labels)."""

    def __init__(self, loss: nn.Module, miner: nn.Module) -> None:
        super().__init__()
        self.loss, self.miner = loss, miner

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(embeddings, labels, self.miner(embeddings, labels))


def theirs(label: str, dim: int) -> nn.Module | None:
    """pytorch-metric-learning's counterpart of ``label``, or None (no equivalent, or the
    library is not installed).  Its default distance normalizes; ours do not by default,
    so it is given the plain Euclidean distance."""
    try:
        from pytorch_metric_learning import distances, losses, miners, reducers
    except ImportError:
        return None
    euclid = distances.LpDistance(normalize_embeddings=False)
    # Our batch-hard averages over the anchors, theirs by default over non-zero losses.
    per_anchor = reducers.MeanReducer()
    if label.startswith("triplet hard"):
        soft = "soft" in label
        loss = losses.TripletMarginLoss(
            margin=0.0 if soft else 0.3, smooth_loss=soft, distance=euclid, reducer=per_anchor
        )
        return _Mined(loss, miners.BatchHardMiner(distance=euclid))
    if label.startswith("triplet all"):
        return losses.TripletMarginLoss(margin=0.3, distance=euclid)
    if label.startswith("triplet semihard"):
        miner = miners.TripletMarginMiner(margin=0.3, type_of_triplets="semihard", distance=euclid)
        return _Mined(losses.TripletMarginLoss(margin=0.3, distance=euclid), miner)
    if label.startswith("contrastive two_margin"):
        return losses.ContrastiveLoss(pos_margin=0.0, neg_margin=1.0, distance=euclid)
    if label.startswith("lifted smooth"):
        return losses.LiftedStructureLoss(neg_margin=1.0, pos_margin=0.0, distance=euclid)
    if label.startswith("softtriple"):
        return losses.SoftTripleLoss(
            num_classes=SOFTTRIPLE_CLASSES,
            embedding_size=dim,
            centers_per_class=10,
            la=20,
            gamma=0.1,
            margin=0.01,
        )
    return None


def step(loss: nn.Module, embeddings: torch.Tensor, labels: torch.Tensor) -> float:
    embeddings.grad = None
    loss.zero_grad(set_to_none=True)
    value = loss(embeddings, labels)
    value.backward()
    return value.item()


def timed(loss: nn.Module, embeddings: torch.Tensor, labels: torch.Tensor, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    step(loss, embeddings, labels)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--only", default="", help="run only the losses whose label contains this")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)

    try:
        import pytorch_metric_learning

        version = pytorch_metric_learning.__version__
    except ImportError:
        version = None
    print(
        f"device {device}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"dim {args.dim}, K = {K}, median of {args.repeats}; "
        f"pytorch-metric-learning {version or 'not installed'}"
    )
    header = f"{'loss':26s} {'batch':>5s} {'ours ms':>9s} {'theirs ms':>10s} {'speed-up':>9s}  same value"
    print(header)
    print("-" * len(header))
    for label, make_ours in OURS.items():
        if args.only not in label:
            continue
        for batch in args.batch:
            generator = torch.Generator().manual_seed(0)
            classes = batch // K
            labels = torch.arange(classes).repeat_interleave(K).to(device)
            embeddings = (torch.randn(batch, args.dim, generator=generator) / args.dim**0.5).to(device)
            embeddings.requires_grad_(True)
            torch.manual_seed(0)
            ours = make_ours(args.dim).to(device)
            other = theirs(label, args.dim)
            if other is not None:
                other = other.to(device)
                if hasattr(other, "fc") and hasattr(ours, "centers"):
                    # Same centers for both, so that the values can be compared.
                    with torch.no_grad():
                        other.fc.copy_(ours.centers.reshape(-1, args.dim).t())
            runners = [ours] + ([other] if other is not None else [])
            values = [step(runner, embeddings, labels) for runner in runners]
            for runner in runners:
                step(runner, embeddings, labels)
            times: list[list[float]] = [[] for _ in runners]
            for _ in range(args.repeats):
                for index, runner in enumerate(runners):
                    times[index].append(timed(runner, embeddings, labels, device))
            ours_ms = 1e3 * statistics.median(times[0])
            if other is None:
                print(f"{label:26s} {batch:5d} {ours_ms:9.2f} {'—':>10s} {'—':>9s}  —")
                continue
            theirs_ms = 1e3 * statistics.median(times[1])
            same = abs(values[0] - values[1]) <= 1e-4 * max(1.0, abs(values[1]))
            verdict = "yes" if same else f"no ({values[0]:.4g} vs {values[1]:.4g})"
            print(
                f"{label:26s} {batch:5d} {ours_ms:9.2f} {theirs_ms:10.2f} "
                f"{theirs_ms / ours_ms:8.2f}x  {verdict}"
            )


if __name__ == "__main__":
    main()
