"""The photo commands' configs: their checks, and that the library's defaults are theirs."""

from __future__ import annotations

import pytest

from reid.cli.defaults import default_of
from reid.errors import ConfigError, ConfigValueError
from reid.photos import CalibrateConfig, EvalConfig, PairConfig, PhotoConfig


@pytest.mark.parametrize(
    ("config", "values", "key"),
    [
        (PhotoConfig, {"detect": "people"}, "detect"),
        (PhotoConfig, {"no_face": "ignore"}, "no_face"),
        (PairConfig, {"folds": 1}, "folds"),
        (PairConfig, {"batch_size": 0}, "batch_size"),
        (EvalConfig, {"batch_size": 5000}, "batch_size"),
    ],
)
def test_a_wrong_value_is_refused_naming_its_key(config: type, values: dict, key: str) -> None:
    with pytest.raises(ConfigValueError) as info:
        config(**values)
    assert info.value.key == key


def test_a_false_accept_rate_outside_its_interval_is_refused() -> None:
    with pytest.raises(ConfigError, match="false-accept rate"):
        CalibrateConfig(far=3.0)


def test_the_library_defaults_are_the_configs() -> None:
    from reid.pipeline import calibrate_model, evaluate_encoder, verify_pairs
    from reid.pipeline.subject import photo_rule

    assert default_of(photo_rule, "detect") == PhotoConfig.detect
    assert default_of(photo_rule, "no_face") == PhotoConfig.no_face
    assert default_of(verify_pairs, "folds") == PairConfig.folds
    assert default_of(verify_pairs, "batch_size") == PairConfig.batch_size
    assert default_of(calibrate_model, "target_far") == CalibrateConfig.far
    assert default_of(evaluate_encoder, "batch_size") == EvalConfig.batch_size
