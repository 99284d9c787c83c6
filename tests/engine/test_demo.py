"""Where the demo starts: an ImageNet start that needs no network when one is installed,
else from scratch, and it says which."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.engine import demo
from reid.engine.demo import demo_config, demo_start


def test_demo_starts_from_the_offline_imagenet_weights(imagenet_wheels: dict[str, Path]) -> None:
    assert demo_start() == ("efficientnet_lite0", "imagenet")
    config = demo_config()
    assert (config.architecture, config.pretrained) == ("efficientnet_lite0", "imagenet")


def test_demo_without_the_extra_trains_from_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a base install: EfficientNet-Lite0's weights are neither cached nor installed.
    monkeypatch.setattr(demo, "offline_imagenet", lambda architecture: None)
    assert demo_start() == ("resnet18", None)
    assert demo_config().pretrained is None
