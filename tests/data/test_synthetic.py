from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from reid.data import SyntheticConfig, generate_synthetic, load_dataset
from reid.data.io import read_image
from reid.data.synthetic import BUILDING_MARK
from reid.errors import DataError
from reid.paths import TEMP_MARK
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


def _market_copy(root: Path) -> list[Path]:
    """A folder in Market-1501's layout holding the user's own images."""
    paths = []
    for folder, name in (("bounding_box_train", "0002_c1s1_000451_03.jpg"), ("query", "0001_c1s1_001051_00.jpg"), ("bounding_box_test", "0001_c2s1_000301_01.jpg")):
        (root / folder).mkdir(parents=True, exist_ok=True)
        path = root / folder / name
        path.write_bytes(b"the user's own image " + name.encode())
        paths.append(path)
    return paths


@pytest.mark.parametrize("extra", ["market", "notes"])
def test_a_folder_holding_other_files_is_refused_and_left_as_it_was(tmp_path: Path, extra: str) -> None:
    root = tmp_path / "Market-1501"
    originals = _market_copy(root) if extra == "market" else []
    if extra == "notes":
        root.mkdir()
        (root / "notes.txt").write_text("mine")
        originals.append(root / "notes.txt")
    before = {p: p.read_bytes() for p in originals}
    with pytest.raises(DataError, match="did not write"):
        load_dataset(f"synthetic:{root}", TINY)
    assert {p: p.read_bytes() for p in originals} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Market-1501"], "nothing written beside it"


def test_a_stamped_set_with_a_user_file_added_is_not_rewritten(tmp_path: Path) -> None:
    generate_synthetic(tmp_path / "s", TINY)
    added = tmp_path / "s" / "query" / "0001_c1s1_000001_00.jpg"
    added.write_bytes(b"added by hand")
    with pytest.raises(DataError, match="query/0001_c1s1_000001_00.jpg"):
        generate_synthetic(tmp_path / "s", SyntheticConfig(seed=4, train_ids=3, test_ids=2, distractors=0, junk=0))
    assert added.read_bytes() == b"added by hand"


def test_an_empty_folder_or_an_own_set_of_another_config_is_written(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    generate_synthetic(tmp_path / "s", TINY)
    first = sorted(p.name for p in (tmp_path / "s" / "bounding_box_train").iterdir())
    other = SyntheticConfig(seed=4, train_ids=3, test_ids=2, distractors=0, junk=0)
    dataset = load_dataset(f"synthetic:{tmp_path / 's'}", other)
    assert dataset.num_train_ids == 3
    assert sorted(p.name for p in (tmp_path / "s" / "bounding_box_train").iterdir()) != first
    assert [p.name for p in tmp_path.iterdir()] == ["s"], "no temporary left beside the set"


def test_a_killed_generation_leaves_nothing_that_stays(tmp_path: Path) -> None:
    leftover = tmp_path / f".s{TEMP_MARK}999999999"
    (leftover / "query").mkdir(parents=True)
    (leftover / BUILDING_MARK).touch()
    foreign = tmp_path / f".s{TEMP_MARK}999999998"
    foreign.mkdir()
    generate_synthetic(tmp_path / "s", TINY)
    assert not leftover.exists()
    assert foreign.exists(), "a folder without the building mark is not the program's"


def test_images_are_not_written_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "s").symlink_to(target)
    with pytest.raises(DataError, match="link"):
        generate_synthetic(tmp_path / "s", TINY)
    assert list(target.iterdir()) == []
