"""One rule for distance thresholds, and every command that takes one applies it."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from reid import ConfigError, check_distance_threshold
from reid.cli.app import app
from reid.pipeline import QueryConfig
from reid.track import TrackerConfig

LINE = "--threshold is a distance between unit embeddings, in (0, 2]; got"


@pytest.mark.parametrize("value", [0.0, -1.0, 2.0001, 75.0, math.nan, math.inf])
def test_thresholds_outside_the_unit_sphere_range_are_refused(value: float) -> None:
    with pytest.raises(ConfigError, match=r"\(0, 2\]"):
        check_distance_threshold(value)


@pytest.mark.parametrize("value", [None, 1e-6, 0.5, 2.0])
def test_thresholds_inside_are_kept(value: float | None) -> None:
    assert check_distance_threshold(value) == value


def test_query_and_tracker_use_the_same_rule() -> None:
    with pytest.raises(ConfigError, match=r"^--threshold is a distance"):
        QueryConfig(threshold=75.0)
    with pytest.raises(ConfigError, match=r"^--appearance is a distance"):
        TrackerConfig(appearance=-1.0)


@pytest.mark.parametrize("value", ["75", "-1", "0"])
def test_verify_refuses_what_query_refuses_with_the_same_line(tmp_path: Path, value: str) -> None:
    pytest.importorskip("dlib", reason="the dlib extra gives a model that needs no training")
    image = tmp_path / "a.png"
    cv2.imwrite(str(image), np.full((128, 64, 3), 100, np.uint8))
    result = CliRunner().invoke(app, ["verify", "-m", "dlib-face", str(image), str(image), "--threshold", value])
    assert result.exit_code == 1
    assert LINE in result.output and "Traceback" not in result.output
