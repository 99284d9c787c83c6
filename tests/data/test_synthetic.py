from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from reid.data import SyntheticConfig, generate_synthetic, load_dataset
from reid.data.io import read_image
from reid.data.transforms import AugmentConfig, augment, normalize

TINY = SyntheticConfig(seed=3, train_ids=6, test_ids=5, distractors=4, junk=3)


def test_synthetic_set_is_deterministic_and_market_shaped(tmp_path: Path) -> None:
    a = load_dataset(f"synthetic:{tmp_path / 'a'}", TINY)
    b = load_dataset(f"synthetic:{tmp_path / 'b'}", TINY)
    assert [r.path.name for r in a.train] == [r.path.name for r in b.train]
    first_a, first_b = read_image(a.train[0].path), read_image(b.train[0].path)
    assert first_a.shape == (128, 64, 3) and np.array_equal(first_a, first_b)
    assert a.num_train_ids == 6
    assert {r.pid for r in a.query} <= {r.pid for r in a.gallery} | {0}
    assert any(r.pid == 0 for r in a.gallery), "distractors are kept in the gallery"
    assert len(list((tmp_path / "a" / "bounding_box_test").glob("-1_*.jpg"))) == 3, "junk written, then dropped"
    assert all(r.pid != -1 for r in a.gallery)
    assert len({r.camid for r in a.train}) > 1


def test_identities_differ_and_cameras_change_appearance(tmp_path: Path) -> None:
    dataset = load_dataset(f"synthetic:{tmp_path}", TINY)
    by_pid: dict[int, list[np.ndarray]] = {}
    for record in dataset.train:
        by_pid.setdefault(record.pid, []).append(read_image(record.path).astype(np.float32))
    means = {pid: np.mean([im.mean(axis=(0, 1)) for im in ims], axis=0) for pid, ims in by_pid.items()}
    spread = np.std(list(means.values()), axis=0).mean()
    assert spread > 3.0
    views = by_pid[min(by_pid)]
    assert max(np.abs(views[0] - v).mean() for v in views[1:]) > 5.0


def test_regeneration_is_skipped_when_config_matches(tmp_path: Path) -> None:
    root = generate_synthetic(tmp_path, TINY)
    stamp = (root / "synthetic.json").stat().st_mtime_ns
    generate_synthetic(tmp_path, TINY)
    assert (root / "synthetic.json").stat().st_mtime_ns == stamp


def test_augment_shapes_flip_and_erase() -> None:
    batch = torch.arange(2 * 3 * 8 * 4, dtype=torch.float32).reshape(2, 3, 8, 4).remainder(256).to(torch.uint8)
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    plain = normalize(batch, mean, std)
    assert torch.allclose(plain[0, 0, 0, 0], (batch[0, 0, 0, 0].float() - 127.5) / 63.75)
    flipped = augment(batch, mean, std, AugmentConfig(flip=1.0, pad=0, erase=0.0), torch.Generator().manual_seed(0))
    assert torch.equal(flipped, plain.flip(-1))
    erased = augment(batch, mean, std, AugmentConfig(flip=0.0, pad=0, erase=1.0), torch.Generator().manual_seed(0))
    assert erased.shape == plain.shape and not torch.equal(erased, plain)
    shifted = augment(batch, mean, std, AugmentConfig(flip=0.0, pad=2, erase=0.0), torch.Generator().manual_seed(1))
    assert shifted.shape == plain.shape
