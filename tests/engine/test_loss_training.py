"""One real training run per metric loss, alone (no cross-entropy), on a small synthetic set.

Each run must rank better than the untrained encoder it started from: Rank-1 higher and mAP
at least 0.03 higher on the set's query/gallery split (Market-1501 protocol, cross-camera
matches only).  These take one to three minutes each on two CPU cores, so they are marked
slow: ``python -m pytest -m slow``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.data import SyntheticConfig, generate_synthetic, load_dataset
from reid.engine import TrainConfig, train
from reid.engine.demo import untrained_encoder
from reid.engine.trainer import evaluate_dataset

# 48 identities a split with 6-12 images each: about 13 P x K steps an epoch.
SMALL = SyntheticConfig(seed=21, train_ids=48, test_ids=48, cameras_per_id=(2, 3), images_per_camera=(3, 4), distractors=0, junk=0)

LOSSES = [
    ("triplet", {"mining": "hard", "margin": 0.3}),
    ("triplet", {"mining": "all", "margin": 0.3}),
    ("triplet", {"mining": "semihard", "margin": 0.3, "normalize": True}),
    ("triplet", {"mining": "hard", "soft": True, "swap": True}),
    ("contrastive", {"form": "hadsell", "margin": 1.0, "normalize": True}),
    ("contrastive", {"form": "chopra", "normalize": True}),
    ("contrastive", {"form": "two_margin", "pos_margin": 0.0, "neg_margin": 1.0, "normalize": True}),
    ("lifted", {"smooth": True, "margin": 1.0, "normalize": True}),
    ("centroid_triplet", {"margin": 0.05}),
    # One center per class: with several, each camera of an identity keeps a center of its
    # own and cross-camera matches are never pulled together (see docs/losses.md).
    ("softtriple", {"centers_per_class": 1}),
]


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    return "market1501:" + str(generate_synthetic(tmp_path_factory.mktemp("small"), SMALL))


@pytest.mark.slow
@pytest.mark.parametrize("name,options", LOSSES, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in o.items())}" for n, o in LOSSES])
def test_loss_alone_improves_ranking(small_data: str, tmp_path: Path, name: str, options: dict) -> None:
    config = TrainConfig(
        data=small_data, out=tmp_path / "m", architecture="resnet18", pretrained=None, input_size=(64, 32),
        p=8, k=4, epochs=20, lr=1e-3, warmup_epochs=1, schedule="cosine", threads=2,
        ce_weight=0.0, metric_loss=name, metric_options=options, eval_every=20,
    )
    dataset = load_dataset(small_data)
    before = evaluate_dataset(untrained_encoder(config, dataset), dataset)
    after = train(config).history[-1]["eval"]
    # Shown by ``pytest -rP``: the figures docs/losses.md quotes.
    print(f"{name} {options}: rank-1 {before.rank1:.3f} -> {after['rank1']:.3f}, mAP {before.mAP:.3f} -> {after['mAP']:.3f}")
    assert after["mAP"] >= before.mAP + 0.03, f"{name} {options}: mAP {before.mAP:.3f} -> {after['mAP']:.3f}"
    assert after["rank1"] > before.rank1, f"{name} {options}: rank-1 {before.rank1:.3f} -> {after['rank1']:.3f}"
