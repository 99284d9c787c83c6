"""Shared fixtures: the real data sets beside the project, skipped with a reason when absent."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


def _shared(relative: str) -> Path:
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"real data {relative} not present beside the project (../shared/data/{relative})")
    return path


@pytest.fixture
def market1501_mini() -> Path:
    """The Market-1501 subset: bounding_box_train/, query/, bounding_box_test/."""
    return _shared("market1501-mini")


@pytest.fixture
def orl_faces() -> Path:
    """The ORL faces: s1..s40/1..10.pgm."""
    return _shared("orl_faces")


@pytest.fixture
def pedestrian_video() -> Path:
    """OpenCV's vtest.avi pedestrian video."""
    return _shared("video/vtest.avi")
