from __future__ import annotations

from collections import Counter

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
    # Drawn by the sampler before it knew about processes; resume relies on them not changing.
    assert list(sampler) == [
        [12, 11, 30, 29, 18, 19], [21, 20, 2, 4, 25, 26], [8, 9, 15, 17, 0, 3], [16, 14, 24, 28, 31, 33], [5, 7, 34, 32, 22, 23],
    ]
    sampler.set_epoch(1)
    assert list(sampler) == [[11, 12, 33, 34, 15, 14], [6, 5, 1, 2, 27, 26], [18, 21, 31, 32, 16, 17], [20, 19, 29, 30, 4, 0]]


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
