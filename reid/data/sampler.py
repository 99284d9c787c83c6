"""The P x K identity sampler: every batch holds P identities with K images each.

Batch-hard and other in-batch mining need positives in every batch, which random
batches do not give.  Within an epoch each identity's images are shuffled and cut into
groups of K (an identity with fewer than K images is filled up by sampling its images
again with replacement).  A batch needs P distinct identities, so an identity can give
at most one group to each batch: with B batches in the epoch, identity i gives
``min(groups_i, B)`` groups, and B is the largest number of batches those groups fill
(``sum_i min(groups_i, B) >= P * B``).  Every identity is drawn in proportion to its
images up to that cap; the largest identities are subsampled to B groups of random
images (different ones every epoch), never left out.  :meth:`PKSampler.coverage` says
how many of the images an epoch draws.

Building an epoch is linear in the images (a sort of random keys, then array
arithmetic): groups are laid out identity after identity in a random identity order and
dealt to the batches in turn, so an identity's at most B consecutive groups land in
distinct batches.

Under distributed training every process builds the same global batches of
``world_size * P`` distinct identities (the draw depends only on the seed, the epoch and
that global P) and process ``rank`` keeps its own P of them.  The processes therefore see
disjoint identities at every step, take the same number of steps, and together cover the
data once per epoch; and the global batch is exactly the batch a single process with
``P = world_size * P`` draws, concatenated in rank order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
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
        self._cached: tuple[int, np.ndarray] | None = None
        raw = np.asarray(labels, dtype=np.int64).reshape(-1)
        # Labels compacted to 0..N-1 in order of first appearance, so any label values work.
        _, first, compact = np.unique(raw, return_index=True, return_inverse=True)
        rank_of = np.empty(len(first), dtype=np.int64)
        rank_of[np.argsort(first, kind="stable")] = np.arange(len(first))
        self.labels = rank_of[compact] if len(raw) else raw
        self.counts = np.bincount(self.labels, minlength=len(first)) if len(raw) else np.zeros(0, dtype=np.int64)
        identities = len(self.counts)
        if world_size == 1 and identities < p:
            raise ConfigError(
                f"the training split has {identities} identities; P={p} needs at least {p} (lower -P)"
            )
        if identities < self.global_p:
            raise ConfigError(
                f"the training split has {identities} identities; P={p} on each of {world_size} processes "
                f"needs at least {self.global_p} per step (lower -P or use fewer processes)"
            )

    @property
    def global_p(self) -> int:
        """Identities per step over all processes."""
        return self.p * self.world_size

    @property
    def identities(self) -> int:
        return len(self.counts)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @staticmethod
    def batch_count(groups: np.ndarray, p: int) -> int:
        """The most batches of ``p`` distinct identities that identities with ``groups``
        groups each can fill, one group per identity and batch: the largest B with
        ``sum(min(groups, B)) >= p * B`` (a binary search, each step linear)."""
        low, high = 0, int(groups.sum()) // p
        while low < high:
            middle = (low + high + 1) // 2
            if int(np.minimum(groups, middle).sum()) >= p * middle:
                low = middle
            else:
                high = middle - 1
        return low

    def global_array(self) -> np.ndarray:
        """This epoch's batches over all processes as an int64 array (batches, world_size
        * P * K) of dataset indices, rows in rank order (see the module docstring)."""
        if self._cached is not None and self._cached[0] == self.epoch:
            return self._cached[1]
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        k, global_p = self.k, self.global_p
        keys = torch.rand(len(self.labels), generator=generator, dtype=torch.float64).numpy()
        # Each identity's images in a random order, identities one after another.
        order = np.lexsort((keys, self.labels))
        counts = self.counts
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        groups = np.maximum(counts // k, 1)
        batches = self.batch_count(groups, global_p)
        taken = np.minimum(groups, batches)
        identities = torch.randperm(len(counts), generator=generator).numpy()
        # Flat list of (identity, group number), identity after identity in random order.
        flat_identity = np.repeat(identities, taken[identities])
        first = np.concatenate(([0], np.cumsum(taken[identities])[:-1]))
        flat_group = np.arange(len(flat_identity)) - np.repeat(first, taken[identities])
        keep = global_p * batches
        flat_identity, flat_group = flat_identity[:keep], flat_group[:keep]
        position = flat_group[:, None] * k + np.arange(k)[None, :]
        size = counts[flat_identity][:, None]
        # Past an identity's own images (fewer than K), draw its images again at random.
        draws = torch.randint(1 << 62, position.shape, generator=generator).numpy()
        position = np.where(position < size, position, draws % size)
        images = order[starts[flat_identity][:, None] + position]
        # Flat position j = slot * batches + batch: an identity's consecutive groups
        # (at most ``batches`` of them) fall into distinct batches.
        layout = images.reshape(global_p, batches, k).transpose(1, 0, 2).reshape(batches, global_p * k)
        shuffled = layout[torch.randperm(batches, generator=generator).numpy()] if batches else layout
        self._cached = (self.epoch, shuffled)
        return shuffled

    def global_batches(self) -> list[list[int]]:
        """This epoch's batches over all processes, each ``world_size * P * K`` indices in rank order."""
        return self.global_array().tolist()

    def coverage(self) -> tuple[int, int]:
        """``(drawn, total)``: how many distinct images this epoch's batches (over all
        processes) hold, of all the training images."""
        return int(np.unique(self.global_array()).size), len(self.labels)

    def batches(self) -> list[list[int]]:
        """This process's share of every global batch: P identities x K images."""
        size = self.p * self.k
        start = self.rank * size
        return self.global_array()[:, start : start + size].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.global_array())
