"""Cost of building one epoch's P x K batches as the data grows, measured in one run.

Each size is built from scratch (labels to batches) with the same P, K and images per
identity; the script prints the seconds of each and the ratio between consecutive sizes
beside the ratio of their image counts: a linear builder keeps the two close, a builder
that is quadratic in identities makes the first ten times the second at each tenfold step.

    python benchmarks/bench_sampler.py --identities 1000 10000 100000 --images 4
"""

from __future__ import annotations

import argparse
import time

from reid.data.sampler import PKSampler


def epoch_seconds(identities: int, images: int, p: int, k: int, repeats: int) -> tuple[float, int, float]:
    """Best of ``repeats`` wall times to build an epoch, its batches and its coverage."""
    labels = [pid for pid in range(identities) for _ in range(images)]
    best = float("inf")
    batches, coverage = 0, 0.0
    for repeat in range(repeats):
        started = time.perf_counter()
        sampler = PKSampler(labels, p, k, seed=repeat)
        batches = len(sampler)
        best = min(best, time.perf_counter() - started)
        drawn, total = sampler.coverage()
        coverage = drawn / total
    return best, batches, coverage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--identities", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--images", type=int, default=4, help="Images per identity.")
    parser.add_argument("--p", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'identities':>10} {'images':>9} {'batches':>8} {'coverage':>8} {'seconds':>9} {'time ratio':>10} {'size ratio':>10}")
    previous: tuple[int, float] | None = None
    for identities in args.identities:
        seconds, batches, coverage = epoch_seconds(identities, args.images, args.p, args.k, args.repeats)
        ratio = f"{seconds / previous[1]:10.1f} {identities / previous[0]:10.1f}" if previous else f"{'':>10} {'':>10}"
        print(f"{identities:>10} {identities * args.images:>9} {batches:>8} {coverage:>8.1%} {seconds:>9.3f} {ratio}")
        previous = (identities, seconds)


if __name__ == "__main__":
    main()
