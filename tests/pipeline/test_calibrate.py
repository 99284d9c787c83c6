"""Thresholds chosen on the pairs of a labelled data set (reid.pipeline.calibrate)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pipeline_helpers import build_encoder, write_rgb

from reid.data import load_dataset
from reid.decision import pair_distance
from reid.errors import DataError
from reid.pipeline.calibrate import choose_on_dataset, dataset_pairs
from reid.pipeline.embed import embed_paths


def market(root: Path) -> Path:
    """3 identities: queries in camera 1, gallery in cameras 1 and 2, a distractor, and an
    unreadable gallery image."""
    rng = np.random.default_rng(0)
    for pid in (1, 2, 3):
        write_rgb(root / "bounding_box_train" / f"{pid + 10:04d}_c1s1_000001_00.jpg", rng.integers(0, 255, (64, 32, 3), np.uint8))
        write_rgb(root / "query" / f"{pid:04d}_c1s1_000001_00.jpg", rng.integers(0, 255, (64, 32, 3), np.uint8))
        for cam in (1, 2):
            write_rgb(root / "bounding_box_test" / f"{pid:04d}_c{cam}s1_00000{cam}_00.jpg", rng.integers(0, 255, (64, 32, 3), np.uint8))
    write_rgb(root / "bounding_box_test" / "0000_c3s1_000009_00.jpg", rng.integers(0, 255, (64, 32, 3), np.uint8))
    (root / "bounding_box_test" / "0003_c2s1_000008_00.jpg").write_bytes(b"not a jpeg")
    return root


def test_dataset_pairs_are_every_cross_camera_query_gallery_pair(tmp_path: Path) -> None:
    root = market(tmp_path / "market")
    encoder = build_encoder(tmp_path / "m")
    pairs = dataset_pairs(encoder, load_dataset(f"market1501:{root}"))
    # 3 queries x 8 gallery images (6 of the identities, the distractor, the unreadable one),
    # less the 3 pairs of one identity in camera 1: 21 pairs, of which the unreadable image's
    # 3 are unscored.
    assert pairs.scores.num_pairs_total == 21 and pairs.scores.distances.size == 18
    assert pairs.scores.num_pairs_skipped == 3
    assert [p.name for p, _ in pairs.scores.skipped_images] == ["0003_c2s1_000008_00.jpg"]
    assert int(pairs.scores.is_same.sum()) == 3 and pairs.identities == 3 and pairs.images == 10
    # The distances are the pairs' own, in query-major order.
    query = sorted((root / "query").iterdir())
    gallery = [p for p in sorted((root / "bounding_box_test").iterdir()) if p.name != "0003_c2s1_000008_00.jpg"]
    features = embed_paths(encoder, [*query, *gallery]).features
    expected = [
        (i, len(query) + j, q.name[:4] == g.name[:4])
        for i, q in enumerate(query)
        for j, g in enumerate(gallery)
        if not (q.name[:4] == g.name[:4] and g.name[6] == "1")
    ]
    left, right, same = zip(*expected)
    np.testing.assert_allclose(pairs.scores.distances, pair_distance(features[list(left)], features[list(right)]), atol=1e-5)
    np.testing.assert_array_equal(pairs.scores.is_same, same)


def test_a_rate_the_pairs_cannot_resolve_becomes_the_smallest_they_do(tmp_path: Path) -> None:
    root = market(tmp_path / "market")
    encoder = build_encoder(tmp_path / "m")
    choice, pairs = choose_on_dataset(encoder, load_dataset(f"market1501:{root}"), 1e-3)
    impostor = int((~pairs.scores.is_same).sum())
    assert impostor == 15 and choice.target_far == pytest.approx(0.67)  # 10 / 15, rounded up
    assert choice.far <= 0.67 and choice.num_impostor == 15
    resolved, _ = choose_on_dataset(encoder, load_dataset(f"market1501:{root}"), 0.8)
    assert resolved.target_far == 0.8


def test_a_split_without_impostors_is_refused_in_one_line(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    root = tmp_path / "one"
    write_rgb(root / "bounding_box_train" / "0005_c1s1_000001_00.jpg", rng.integers(0, 255, (64, 32, 3), np.uint8))
    write_rgb(root / "query" / "0001_c1s1_000001_00.jpg", rng.integers(0, 255, (64, 32, 3), np.uint8))
    write_rgb(root / "bounding_box_test" / "0001_c2s1_000002_00.jpg", rng.integers(0, 255, (64, 32, 3), np.uint8))
    with pytest.raises(DataError, match=f"^{root}: its query and gallery images give no impostor pair"):
        dataset_pairs(build_encoder(tmp_path / "m"), load_dataset(f"market1501:{root}"))
