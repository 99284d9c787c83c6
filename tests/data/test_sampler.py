from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from reid.data.sampler import PKSampler
from reid.errors import ConfigError


def labels_for(counts: list[int]) -> list[int]:
    return [pid for pid, n in enumerate(counts) for _ in range(n)]


def test_every_batch_is_p_identities_times_k() -> None:
    labels = labels_for([4, 8, 5, 12, 6, 4, 9, 7])
    sampler = PKSampler(labels, p=4, k=4, seed=1)
    batches = list(sampler)
    assert batches
    for batch in batches:
        assert len(batch) == 16
        per_id = Counter(labels[i] for i in batch)
        assert len(per_id) == 4 and set(per_id.values()) == {4}


def test_epoch_covers_most_images_without_repeats_within_groups() -> None:
    labels = labels_for([8] * 10)
    sampler = PKSampler(labels, p=5, k=4, seed=0)
    seen = [i for batch in sampler for i in batch]
    assert sorted(seen) == list(range(80)), "with K dividing every class size an epoch is a permutation"


def test_small_identity_is_filled_with_replacement() -> None:
    labels = labels_for([1, 2, 4, 4])
    batches = list(PKSampler(labels, p=4, k=4, seed=3))
    assert len(batches) == 1
    singles = [i for i in batches[0] if labels[i] == 0]
    assert singles == [0, 0, 0, 0]


def test_deterministic_per_seed_and_epoch() -> None:
    labels = labels_for([6] * 12)
    a, b = PKSampler(labels, 4, 3, seed=5), PKSampler(labels, 4, 3, seed=5)
    assert list(a) == list(b)
    b.set_epoch(1)
    assert list(a) != list(b)
    assert len(a) == len(list(a))


def test_too_few_identities() -> None:
    with pytest.raises(ConfigError, match="has 3 identities; P=4"):
        PKSampler(labels_for([4, 4, 4]), p=4, k=2)


def test_one_process_draws_the_same_batches_as_before_distribution() -> None:
    labels = labels_for([5, 3, 6, 4, 4, 7, 2, 5])
    sampler = PKSampler(labels, p=3, k=2, seed=4, rank=0, world_size=1)
    # Drawn by the proportional sampler; a resumed run relies on them not changing.
    assert list(sampler) == [
        [22, 27, 20, 19, 14, 16], [23, 26, 9, 13, 15, 17], [6, 5, 11, 10, 35, 31], [24, 25, 21, 18, 29, 30], [8, 12, 32, 33, 0, 2],
    ]
    sampler.set_epoch(1)
    assert list(sampler) == [
        [18, 21, 8, 10, 35, 33], [24, 22, 4, 1, 13, 9], [20, 19, 11, 12, 5, 6], [23, 28, 2, 0, 15, 14], [26, 27, 29, 30, 17, 16],
    ]


@pytest.mark.parametrize("epoch", [0, 1, 2])
def test_processes_share_the_global_batch_of_one_process(epoch: int) -> None:
    labels = labels_for([4, 8, 6, 12, 4, 4, 8, 6, 10, 4, 6, 8])
    world = 3
    samplers = [PKSampler(labels, p=2, k=2, seed=7, rank=r, world_size=world) for r in range(world)]
    single = PKSampler(labels, p=2 * world, k=2, seed=7)
    for sampler in [*samplers, single]:
        sampler.set_epoch(epoch)
    per_rank = [list(s) for s in samplers]
    assert len({len(batches) for batches in per_rank}) == 1, "every process takes the same number of steps"
    assert all(len(s) == len(per_rank[0]) for s in samplers)
    for step, global_batch in enumerate(single):
        shares = [per_rank[r][step] for r in range(world)]
        assert [i for share in shares for i in share] == global_batch
        identities = [{labels[i] for i in share} for share in shares]
        assert all(len(ids) == 2 for ids in identities)
        assert len(set().union(*identities)) == 2 * world, "the processes see disjoint identities"
    seen = [i for batches in per_rank for batch in batches for i in batch]
    assert len(seen) == len(set(seen)), "an epoch shows every image at most once over all processes"


def test_processes_together_cover_the_epoch_once() -> None:
    labels = labels_for([4] * 12)
    samplers = [PKSampler(labels, p=2, k=4, seed=1, rank=r, world_size=3) for r in range(3)]
    seen = [i for s in samplers for batch in s for i in batch]
    assert sorted(seen) == list(range(48)), "with one group per identity an epoch is a permutation over all processes"


def test_too_few_identities_for_every_process() -> None:
    with pytest.raises(ConfigError, match="has 5 identities; P=2 on each of 3 processes needs at least 6 per step"):
        PKSampler(labels_for([4] * 5), p=2, k=2, rank=0, world_size=3)
    with pytest.raises(ConfigError, match="process rank 3 is outside a world of 3 processes"):
        PKSampler(labels_for([4] * 8), p=2, k=2, rank=3, world_size=3)


@pytest.mark.parametrize("counts", [[200] + [2] * 19, [60, 40] + [4] * 30, [9, 1, 1, 1, 1, 1, 30]])
def test_every_identity_is_drawn_and_the_largest_are_subsampled(counts: list[int]) -> None:
    labels = labels_for(counts)
    p, k = 4, 2
    sampler = PKSampler(labels, p=p, k=k, seed=2)
    batches = list(sampler)
    drawn = Counter(labels[i] for batch in batches for i in batch)
    groups = [max(1, n // k) for n in counts]
    steps = len(batches)
    assert steps == PKSampler.batch_count(np.array(groups), p) and steps > 0
    # Every identity gives min(its groups, batches) groups, less fewer than P dropped to fill whole batches.
    expected = sum(min(g, steps) for g in groups)
    assert expected - p < sum(drawn.values()) // k <= expected
    assert sum(1 for pid in range(len(counts)) if drawn[pid] == 0) < p
    biggest = max(range(len(counts)), key=counts.__getitem__)
    assert drawn[biggest] == k * steps, "the largest identity is subsampled to one group per batch, not dropped"
    for batch in batches:
        assert len({labels[i] for i in batch}) == p
    seen, total = sampler.coverage()
    assert total == len(labels) and seen == len({i for batch in batches for i in batch})
    sampler.set_epoch(1)
    assert {i for batch in sampler for i in batch if labels[i] == biggest} != {
        i for batch in batches for i in batch if labels[i] == biggest
    }, "another epoch draws other images of the largest identity"


def test_the_batch_count_is_the_largest_that_fills() -> None:
    for groups, p in (([50] + [1] * 19, 16), ([3, 3, 3, 3], 2), ([10, 1, 1], 2), ([1] * 100, 7)):
        best = PKSampler.batch_count(np.array(groups), p)
        assert sum(min(g, best) for g in groups) >= p * best
        assert sum(min(g, best + 1) for g in groups) < p * (best + 1)


def test_an_epoch_over_100000_identities_is_built_from_arrays() -> None:
    labels = labels_for([4] * 100_000)
    sampler = PKSampler(labels, p=16, k=4, seed=0)
    array = sampler.global_array()
    assert array.shape == (100_000 // 16, 64)
    assert sampler.coverage() == (400_000, 400_000), "K dividing every identity: the epoch is a permutation"
    assert len({tuple(sorted({labels[i] for i in row})) for row in array[:100].tolist()}) == 100
