from __future__ import annotations

import torch

from reid.data.transforms import AugmentConfig, augment
from reid.models.card import IMAGENET_MEAN, IMAGENET_STD


def test_rows_of_a_global_batch_are_augmented_as_in_the_whole_batch() -> None:
    images = torch.randint(0, 256, (12, 3, 32, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    config = AugmentConfig(erase=0.9)
    whole_generator = torch.Generator().manual_seed(5)
    share_generators = [torch.Generator().manual_seed(5) for _ in range(3)]
    for _ in range(3):
        whole = augment(images, IMAGENET_MEAN, IMAGENET_STD, config, whole_generator)
        shares = [
            augment(images[4 * r : 4 * r + 4], IMAGENET_MEAN, IMAGENET_STD, config, g, rows=(4 * r, 12))
            for r, g in enumerate(share_generators)
        ]
        assert torch.equal(torch.cat(shares), whole)
    assert all(torch.equal(g.get_state(), whole_generator.get_state()) for g in share_generators)
