"""Mask-based mining against loops over the batch."""

from __future__ import annotations

import itertools

import torch

from reid.losses.mining import (
    batch_hard,
    pair_masks,
    positive_pairs,
    semihard_negatives,
    swapped_negative_distance,
)


def random_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 3, 3])
    x = torch.randn(len(labels), 3, generator=generator, dtype=torch.float64)
    return torch.cdist(x, x), labels


def test_pair_masks() -> None:
    masks = pair_masks(torch.tensor([5, 5, 7]))
    assert masks.positive.tolist() == [[False, True, False], [True, False, False], [False, False, False]]
    assert masks.negative.tolist() == [[False, False, True], [False, False, True], [True, True, False]]


def test_positive_pairs_and_their_negatives_enumerate_every_triplet() -> None:
    _, labels = random_batch()
    masks = pair_masks(labels)
    pairs = positive_pairs(masks)
    grid = masks.negative[pairs.anchor]
    found = {
        (int(a), int(p), q)
        for row, (a, p) in enumerate(zip(pairs.anchor, pairs.positive))
        for q in range(len(labels))
        if grid[row, q]
    }
    n = len(labels)
    expected = {
        (a, p, q)
        for a, p, q in itertools.product(range(n), repeat=3)
        if a != p and labels[a] == labels[p] and labels[a] != labels[q]
    }
    assert found == expected


def test_batch_hard_matches_loops() -> None:
    dist, labels = random_batch()
    hardest = batch_hard(dist, pair_masks(labels))
    for a in range(len(labels)):
        positives = [dist[a, p] for p in range(len(labels)) if p != a and labels[p] == labels[a]]
        negatives = [dist[a, q] for q in range(len(labels)) if labels[q] != labels[a]]
        assert bool(hardest.valid[a]) == bool(positives)
        if positives:
            assert labels[hardest.positive[a]] == labels[a] and hardest.positive[a] != a
            assert dist[a, hardest.positive[a]] == max(positives)
        assert labels[hardest.negative[a]] != labels[a]
        assert dist[a, hardest.negative[a]] == min(negatives)


def test_batch_hard_one_class_has_no_valid_anchor() -> None:
    dist, _ = random_batch()
    hardest = batch_hard(dist, pair_masks(torch.zeros(len(dist), dtype=torch.long)))
    assert not hardest.valid.any()


def test_swapped_negative_distance() -> None:
    dist, labels = random_batch()
    pairs = positive_pairs(pair_masks(labels))
    swapped = swapped_negative_distance(dist, pairs)
    for row, (a, p) in enumerate(zip(pairs.anchor, pairs.positive)):
        for q in range(len(labels)):
            assert swapped[row, q] == min(dist[a, q], dist[p, q])


def test_semihard_matches_loops() -> None:
    dist, labels = random_batch(3)
    margin = 0.8
    masks = pair_masks(labels)
    pairs = positive_pairs(masks)
    chosen, found = semihard_negatives(
        dist[pairs.anchor, pairs.positive], dist[pairs.anchor], masks.negative[pairs.anchor], margin
    )
    assert found.any() and not found.all()
    for row, (a, p) in enumerate(zip(pairs.anchor.tolist(), pairs.positive.tolist())):
        inside = {
            q: dist[a, q]
            for q in range(len(labels))
            if labels[q] != labels[a] and dist[a, p] < dist[a, q] < dist[a, p] + margin
        }
        assert bool(found[row]) == bool(inside)
        if inside:
            assert int(chosen[row]) == min(inside, key=inside.get)
