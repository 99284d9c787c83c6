"""The demo's choice of start: ImageNet weights when an ImageNet start is installed,
random initialisation (and one line saying why) when none is."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.engine.demo import IMAGENET_ARCHITECTURE, choose_demo_config, demo_config, run_demo, start_line
from reid.models import ReidNet
from reid.models.pretrained import imagenet_offline, load_start, resolve_start
from reid.models.registry import ARTEFACTS


def test_demo_picks_the_installed_imagenet_start_and_says_so(imagenet_wheels: dict[str, Path]) -> None:
    # The dev install (pip install -e ".[dev]") holds EfficientNet-Lite0's ImageNet wheel.
    installed = imagenet_offline(IMAGENET_ARCHITECTURE)
    assert installed is not None
    config = demo_config()
    assert (config.architecture, config.pretrained) == ("efficientnet_lite0", "imagenet")
    network = ReidNet(config.architecture, num_classes=2)
    load_start(network, resolve_start(config.architecture, config.pretrained))
    line = start_line(config, network.pretrained_note, installed)
    assert line.startswith("start: efficientnet_lite0, started from efficientnet_lite0.imagenet")
    assert "ImageNet" in line and "\n" not in line and "not installed" not in line


def test_demo_falls_back_to_scratch_with_one_line() -> None:
    config = choose_demo_config(None)
    assert (config.architecture, config.pretrained) == ("resnet18", None)
    network = ReidNet(config.architecture, num_classes=2)
    load_start(network, resolve_start(config.architecture, config.pretrained))
    line = start_line(config, network.pretrained_note, None)
    assert line.startswith("start: resnet18, random initialisation")
    assert "no ImageNet start is installed" in line and 'pip install -e ".[pretrained]"' in line
    assert "\n" not in line


def test_a_chosen_scratch_recipe_is_not_blamed_on_the_installation() -> None:
    config = choose_demo_config(None)
    line = start_line(config, "random initialisation (--pretrained none)", ARTEFACTS["efficientnet_lite0.imagenet"])
    assert line == "start: resnet18, random initialisation (--pretrained none)"


@pytest.mark.slow
def test_demo_from_imagenet_beats_the_scratch_recipe(imagenet_wheels: dict[str, Path], tmp_path: Path) -> None:
    """The demo as shipped, on its synthetic set. Measured: trained Rank-1 0.840 (docs/models.md);
    the from-scratch recipe reached 0.475; 0.80 is the demo's promise."""
    config = demo_config()
    config.out = tmp_path / "demo"
    result = run_demo(config)
    assert result.start.startswith("start: efficientnet_lite0, started from efficientnet_lite0.imagenet")
    assert result.trained.rank1 >= 0.80, result.trained.to_dict()
    assert result.trained.rank1 > result.untrained.rank1
