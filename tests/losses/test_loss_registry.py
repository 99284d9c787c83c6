"""The name -> loss registry behind ``reid train --loss``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from reid.errors import ConfigError
from reid.losses import LOSS_NAMES, build_loss, loss_options
from reid.losses.registry import convert_options, typed_options


def test_loss_names() -> None:
    assert set(LOSS_NAMES) == {
        "triplet",
        "contrastive",
        "lifted",
        "centroid_triplet",
        "softtriple",
        "cross_entropy",
    }


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_every_loss_is_a_module_returning_a_scalar(name: str) -> None:
    options = {"num_classes": 3, "embedding_dim": 4} if name in ("softtriple", "cross_entropy") else {}
    loss = build_loss(name, **options)
    assert isinstance(loss, nn.Module)
    value = loss(torch.randn(6, 4), torch.tensor([0, 0, 1, 1, 2, 2]))
    assert value.shape == ()


def test_the_public_signatures() -> None:
    assert loss_options("triplet") == {
        "mining": "hard",
        "margin": 0.3,
        "swap": False,
        "soft": False,
        "squared": False,
        "normalize": False,
    }
    contrastive = loss_options("contrastive")
    assert contrastive["form"] == "hadsell" and contrastive["margin"] == 1.0
    assert (contrastive["pos_margin"], contrastive["neg_margin"]) == (0.0, 1.0)
    assert {"q", "normalize", "squared"} <= set(contrastive)
    assert loss_options("lifted") == {"smooth": True, "margin": 1.0, "normalize": False}
    assert loss_options("centroid_triplet") == {"margin": 0.05, "smooth_loss": False}
    softtriple = loss_options("softtriple")
    assert {k: softtriple[k] for k in ("centers_per_class", "la", "gamma", "margin", "tau", "center_lr")} == {
        "centers_per_class": 10,
        "la": 20.0,
        "gamma": 0.1,
        "margin": 0.01,
        "tau": 0.2,
        "center_lr": 0.01,
    }
    assert loss_options("cross_entropy")["label_smoothing"] == 0.1


def test_unknown_name_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match="triplet, contrastive, lifted") as error:
        build_loss("arcface")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("name", ["triplet", "contrastive", "lifted", "centroid_triplet"])
@pytest.mark.parametrize("option", ["num_classes", "embedding_dim"])
def test_losses_without_parameters_refuse_class_options(name: str, option: str) -> None:
    with pytest.raises(ConfigError, match="valid options"):
        build_loss(name, **{option: 10})


def test_unknown_option_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="mining, margin, swap, soft, squared, normalize"):
        build_loss("triplet", hardness=2)


def test_required_options_are_reported() -> None:
    with pytest.raises(ConfigError, match="num_classes, embedding_dim"):
        build_loss("softtriple")
    with pytest.raises(ConfigError, match="num_classes, embedding_dim"):
        typed_options("softtriple", centers_per_class=1)


def test_convert_options_checks_and_converts_only_what_is_given() -> None:
    assert convert_options("softtriple", centers_per_class="1") == {"centers_per_class": 1}
    with pytest.raises(ConfigError, match="softtriple: unknown option centres"):
        convert_options("softtriple", centres=1)


def test_command_line_strings_are_converted() -> None:
    loss = build_loss("triplet", mining="hard", margin="0.5", soft="true", normalize="no")
    assert (loss.margin, loss.soft, loss.normalize) == (0.5, True, False)
    softtriple = build_loss("softtriple", num_classes="3", embedding_dim="4", centers_per_class="2")
    assert softtriple.centers.shape == (3, 2, 4)
    assert build_loss("contrastive", form="chopra", q="3").q == 3.0


@pytest.mark.parametrize(
    "options",
    [{"margin": "wide"}, {"soft": "maybe"}, {"mining": "hardest"}, {"margin": None}, {"mining": 3}],
)
def test_bad_values_raise_config_error(options: dict) -> None:
    with pytest.raises(ConfigError):
        build_loss("triplet", **options)


def test_each_call_builds_a_fresh_module() -> None:
    first = build_loss("softtriple", num_classes=2, embedding_dim=3)
    second = build_loss("softtriple", num_classes=2, embedding_dim=3)
    assert first is not second and first.centers is not second.centers


def test_wrong_inputs_raise_value_error() -> None:
    loss = build_loss("triplet")
    with pytest.raises(ValueError):
        loss(torch.randn(4), torch.tensor([0, 0, 1, 1]))
    with pytest.raises(ValueError):
        loss(torch.randn(4, 2), torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError):
        loss(torch.randn(4, 2), torch.tensor([0.0, 0.0, 1.0, 1.0]))
