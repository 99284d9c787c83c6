"""The metric loss's options: from a start that already embeds, distances on the unit sphere."""

from __future__ import annotations

from reid.engine.config import TrainConfig
from reid.engine.objective import build_metric, metric_options


def test_a_start_that_embeds_measures_its_triplet_on_unit_vectors() -> None:
    config = TrainConfig(metric_loss="triplet")
    assert metric_options(config, 10, 64, embedding_start=True)["normalize"] is True
    assert metric_options(config, 10, 64).get("normalize", False) is False
    metric = build_metric(config, 10, 64, embedding_start=True)
    assert metric is not None and metric.normalize is True


def test_the_recipe_says_otherwise_and_is_followed() -> None:
    config = TrainConfig(metric_loss="triplet", metric_options={"margin": 0.3, "normalize": False})
    assert metric_options(config, 10, 64, embedding_start=True)["normalize"] is False


def test_a_loss_without_normalize_gets_no_such_option() -> None:
    config = TrainConfig(metric_loss="centroid_triplet", metric_options={"margin": 0.3})
    assert "normalize" not in metric_options(config, 10, 64, embedding_start=True)
