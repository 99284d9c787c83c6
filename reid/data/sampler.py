"""The P x K identity sampler: every batch holds P identities with K images each.

Batch-hard and other in-batch mining need positives in every batch, which random
batches do not give.  Within an epoch each identity's images are shuffled and cut into
groups of K (an identity with fewer than K images is filled up by sampling its images
again with replacement), and batches draw P distinct identities that still have groups
left, so an epoch sees (nearly) every image once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from reid.errors import ConfigError


class PKSampler(torch.utils.data.Sampler[list[int]]):
    """Yields lists of P*K dataset indices; deterministic for a given seed and epoch."""

    def __init__(self, labels: Sequence[int], p: int, k: int, seed: int = 0) -> None:
        if p < 2 or k < 1:
            raise ConfigError(f"P x K batches need P >= 2 and K >= 1 (got P={p}, K={k})")
        self.p, self.k, self.seed = p, k, seed
        self.epoch = 0
        self.by_label: dict[int, list[int]] = {}
        for index, label in enumerate(labels):
            self.by_label.setdefault(int(label), []).append(index)
        if len(self.by_label) < p:
            raise ConfigError(
                f"the training split has {len(self.by_label)} identities; P={p} needs at least {p} (lower --p)"
            )

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _groups(self, generator: torch.Generator) -> dict[int, list[list[int]]]:
        groups = {}
        for label, indices in self.by_label.items():
            order = [indices[i] for i in torch.randperm(len(indices), generator=generator).tolist()]
            if len(order) < self.k:
                extra = torch.randint(len(indices), (self.k - len(order),), generator=generator).tolist()
                order += [indices[i] for i in extra]
            groups[label] = [order[i : i + self.k] for i in range(0, len(order) - self.k + 1, self.k)]
        return groups

    def batches(self) -> list[list[int]]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        groups = self._groups(generator)
        batches = []
        while True:
            available = [label for label, g in groups.items() if g]
            if len(available) < self.p:
                break
            chosen = torch.randperm(len(available), generator=generator)[: self.p].tolist()
            batch = []
            for i in chosen:
                batch.extend(groups[available[i]].pop())
            batches.append(batch)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.batches())
