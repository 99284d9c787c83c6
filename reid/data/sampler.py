"""The P x K identity sampler: every batch holds P identities with K images each.

Batch-hard and other in-batch mining need positives in every batch, which random
batches do not give.  Within an epoch each identity's images are shuffled and cut into
groups of K (an identity with fewer than K images is filled up by sampling its images
again with replacement), and batches draw P distinct identities that still have groups
left, so an epoch sees (nearly) every image once.

Under distributed training every process builds the same global batches of
``world_size * P`` distinct identities (the draw depends only on the seed, the epoch and
that global P) and process ``rank`` keeps its own P of them.  The processes therefore see
disjoint identities at every step, take the same number of steps, and together cover the
data once per epoch; and the global batch is exactly the batch a single process with
``P = world_size * P`` draws, concatenated in rank order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from reid.errors import ConfigError


class PKSampler(torch.utils.data.Sampler[list[int]]):
    """Yields lists of P*K dataset indices for one process; deterministic for a given
    seed, epoch and ``world_size * P``."""

    def __init__(self, labels: Sequence[int], p: int, k: int, seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        if p < 2 or k < 1:
            raise ConfigError(f"P x K batches need P >= 2 and K >= 1 (got P={p}, K={k})")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(f"process rank {rank} is outside a world of {world_size} processes")
        self.p, self.k, self.seed = p, k, seed
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        self.by_label: dict[int, list[int]] = {}
        for index, label in enumerate(labels):
            self.by_label.setdefault(int(label), []).append(index)
        if world_size == 1 and len(self.by_label) < p:
            raise ConfigError(
                f"the training split has {len(self.by_label)} identities; P={p} needs at least {p} (lower --p)"
            )
        if len(self.by_label) < self.global_p:
            raise ConfigError(
                f"the training split has {len(self.by_label)} identities; P={p} on each of {world_size} processes "
                f"needs at least {self.global_p} per step (lower --p or use fewer processes)"
            )

    @property
    def global_p(self) -> int:
        """Identities per step over all processes."""
        return self.p * self.world_size

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

    def global_batches(self) -> list[list[int]]:
        """This epoch's batches over all processes, each ``world_size * P * K`` indices in rank order."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        groups = self._groups(generator)
        batches = []
        while True:
            available = [label for label, g in groups.items() if g]
            if len(available) < self.global_p:
                break
            chosen = torch.randperm(len(available), generator=generator)[: self.global_p].tolist()
            batch = []
            for i in chosen:
                batch.extend(groups[available[i]].pop())
            batches.append(batch)
        return batches

    def batches(self) -> list[list[int]]:
        """This process's share of every global batch: P identities x K images."""
        size = self.p * self.k
        start = self.rank * size
        return [batch[start : start + size] for batch in self.global_batches()]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.global_batches())
