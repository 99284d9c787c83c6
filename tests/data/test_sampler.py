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
