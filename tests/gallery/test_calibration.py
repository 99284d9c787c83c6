"""A gallery's own threshold from the impostor pairs of its identities."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from reid.errors import ConfigError, GalleryError
from reid.gallery import Gallery
from reid.gallery.calibration import (
    GalleryCalibration,
    calibrate,
    identities_needed,
    impostor_distances,
    sample_items,
    threshold_for_far,
)
from tests.gallery.gallery_helpers import DIM, clustered, make_card, metas


def circle(identities: int, per_identity: int, step: float) -> tuple[np.ndarray, list[str]]:
    """Identity k at angle k*step on a great circle, its items exactly there: impostor
    distances are 2 sin(j*step/2) for identities j apart, genuine distances are 0."""
    angles = np.repeat(np.arange(identities) * step, per_identity)
    vectors = np.zeros((len(angles), DIM), np.float32)
    vectors[:, 0], vectors[:, 1] = np.cos(angles), np.sin(angles)
    labels = [f"id{k:03d}" for k in range(identities) for _ in range(per_identity)]
    return vectors, labels


def known_threshold_bounds(identities: int, per_identity: int, step: float, far: float) -> tuple[float, float]:
    """From the distribution alone: the distance of the farthest identity gap a threshold at
    ``far`` may admit, and that of the next gap, which it must not."""
    total = per_identity**2 * identities * (identities - 1) / 2
    admitted, gap = 0.0, 0
    while admitted + per_identity**2 * (identities - gap - 1) <= far * total:
        gap += 1
        admitted += per_identity**2 * (identities - gap)
    return 2 * math.sin(gap * step / 2), 2 * math.sin((gap + 1) * step / 2)


@pytest.mark.parametrize("far", [5e-2, 1e-1, 3e-1])
def test_threshold_of_a_gallery_with_a_known_impostor_distribution(tmp_path: Path, far: float) -> None:
    identities, per_identity, step = 60, 4, 0.01
    vectors, labels = circle(identities, per_identity, step)
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        calibration = gallery.calibrate(far)
    admitted_gap, refused_gap = known_threshold_bounds(identities, per_identity, step, far)
    # Gaps are 0.01 apart; float32 rounding spreads one gap's distances by about 1e-6.
    assert admitted_gap > 0 and admitted_gap - 1e-4 < calibration.threshold < refused_gap + 1e-4
    # Every item sampled (240 <= 2,048): all 4^2 * 60*59/2 pairs of different identities, and
    # no pair of one identity, whose distance 0 would otherwise pull the threshold to 0.
    assert calibration.impostor_pairs == per_identity**2 * identities * (identities - 1) // 2
    assert calibration.admitted <= far * calibration.impostor_pairs
    assert (calibration.identities, calibration.items, calibration.sampled_items) == (60, 240, 240)


def test_only_pairs_of_different_identities_are_impostors() -> None:
    vectors, labels = circle(5, 3, 0.3)
    codes = np.array([int(label[2:]) for label in labels])
    distances = impostor_distances(vectors, codes)
    expected = sorted(
        2 * math.sin(abs(codes[i] - codes[j]) * 0.3 / 2)
        for i in range(len(codes))
        for j in range(i + 1, len(codes))
        if codes[i] != codes[j]
    )
    np.testing.assert_allclose(np.sort(distances), expected, atol=1e-5)
    assert distances.min() > 0.29


def test_sampling_keeps_identities_even_and_estimates_the_full_rate() -> None:
    vectors, labels, _ = clustered(300, 20, spread=0.6, seed=3)
    codes = np.array([int(label[2:]) for label in labels])
    chosen = sample_items(codes, 600, seed=0)
    assert len(chosen) == 600 and set(np.bincount(codes[chosen])) == {2}
    assert len(sample_items(codes, 100, seed=0)) == 100  # more identities than the budget: one each
    assert len(set(codes[sample_items(codes, 100, seed=0)])) == 100
    ids = np.arange(1, len(codes) + 1)
    calibration = calibrate(ids, codes, lambda wanted: vectors[wanted - 1], far=1e-2, max_items=600)
    assert calibration.sampled_items == 600 and calibration.impostor_pairs == 600 * 599 // 2 - 300
    # Measured on every impostor pair of the 6,000 items, the sampled threshold's rate is near its target.
    everything = impostor_distances(vectors, codes)
    rate = float(np.mean(everything <= calibration.threshold))
    assert 0.5e-2 < rate < 2e-2


def test_too_few_pairs_or_identities_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^1,000 impostor pairs cannot resolve FAR 0.001: at least 10"):
        threshold_for_far(np.linspace(0.5, 1.5, 1000), 1e-3)
    assert threshold_for_far(np.linspace(0.5, 1.5, 10_001), 1e-3)[1] == 10
    with pytest.raises(ConfigError, match="holds no impostor pair"):
        calibrate(np.arange(1, 4), np.zeros(3, int), lambda ids: np.eye(3, DIM, dtype=np.float32))
    for bad in (0.0, 1.0, 5.0, -1e-3, math.nan):
        with pytest.raises(ConfigError, match=r"^far is a false-accept rate"):
            threshold_for_far(np.linspace(0, 1, 100), bad)


@pytest.mark.parametrize("far", [1e-3, 1e-2, 2e-2, 0.1])
def test_enough_identities_is_ten_expected_identity_pairs(far: float) -> None:
    n = identities_needed(far)
    assert n * (n - 1) / 2 * far >= 10 > (n - 1) * (n - 2) / 2 * far
    assert identities_needed(1e-3) == 142 and identities_needed(1e-2) == 46


def test_stored_calibration_survives_reopening_and_the_integrity_check(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(50, 4, seed=1)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        assert gallery.calibration is None and gallery.info().calibration is None
        gallery.add(vectors, metas(labels))
        stored = gallery.calibrate(2e-2)
    with Gallery.open(folder) as gallery:
        assert gallery.calibration == stored and stored.stored
        assert gallery.current_calibration() == stored
        assert gallery.info().calibration == stored.to_dict()
        gallery.check(queries=20)
    db = sqlite3.connect(folder / "gallery.db")
    db.execute("UPDATE meta SET value = replace(value, '\"far\": 0.02', '\"far\": 0.5') WHERE key = 'calibration'")
    db.commit()
    db.close()
    with Gallery.open(folder) as gallery:
        with pytest.raises(GalleryError, match="stored calibration does not match its checksum"):
            gallery.check(queries=20)
    db = sqlite3.connect(folder / "gallery.db")
    db.execute("UPDATE meta SET value = '{\"far\": 7}' WHERE key = 'calibration'")
    db.commit()
    db.close()
    with Gallery.open(folder) as gallery, pytest.raises(GalleryError, match="stored calibration is malformed"):
        gallery.calibration  # noqa: B018


def test_a_write_after_calibrating_recomputes_at_the_stored_rate(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(50, 4, seed=2)
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        gallery.add(vectors[:100], metas(labels[:100]))
        stored = gallery.calibrate(5e-2)
        gallery.add(vectors[100:], metas(labels[100:], prefix="more"))
        fresh = gallery.current_calibration()
        assert fresh is not None and not fresh.stored
        assert fresh.far == stored.far and fresh.identities == 50 and stored.identities == 25
        assert gallery.calibration == stored


def test_on_by_default_only_with_enough_identities(tmp_path: Path) -> None:
    few, few_labels, _ = clustered(141, 2, seed=4)
    with Gallery.create(tmp_path / "few", make_card()) as gallery:
        gallery.add(few, metas(few_labels))
        assert gallery.current_calibration() is None
    many, many_labels, _ = clustered(150, 2, seed=4)
    with Gallery.create(tmp_path / "many", make_card()) as gallery:
        gallery.add(many, metas(many_labels))
        chosen = gallery.current_calibration()
        assert chosen is not None and chosen.far == 1e-3 and chosen.enough and not chosen.stored
        assert chosen.identity_pairs == 150 * 149 // 2
        assert gallery.calibration is None  # computed for the run, not written by a reader


def test_stored_values_are_checked_on_reading() -> None:
    good = GalleryCalibration(1e-3, 0.8, 10, 40, 40, 40, 10, 720, 45, 0, "t", stored=True)
    assert GalleryCalibration.from_json(good.to_json()) == good
    for broken in ('{"far": 0.001}', "[1]", "{", good.to_json().replace('"admitted": 0', '"admitted": 999')):
        with pytest.raises(ValueError):
            GalleryCalibration.from_json(broken)
