"""The saved network as a blend of the trained one and its start (WiSE-FT)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from reid.data import SyntheticConfig, generate_synthetic, load_dataset
from reid.engine import TrainConfig, train
from reid.engine.config import EMBEDDING_START_WISE_ALPHA
from reid.engine.trainer import evaluate_dataset
from reid.engine.wise import blend, blended, restore, start_weights, wise_alpha
from reid.errors import ConfigValueError
from reid.models.encoder import TorchEncoder
from reid.models.folder import load_model
from reid.models.network import ReidNet
from tests.models.starting import export_onnx, started, torchreid_like


def _fc_network(seed: int, embedding_start: bool = True) -> ReidNet:
    torch.manual_seed(seed)
    network = ReidNet("osnet_x0_25", num_classes=4, embedding_dim=512, neck="fc")
    network.embedding_start = embedding_start
    return network


def _perturb(network: ReidNet, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in network.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(torch.randn(tensor.shape, generator=generator) * 0.01)


def test_the_blend_is_alpha_trained_plus_the_rest_start_and_restores_exactly() -> None:
    network = _fc_network(0)
    start = start_weights(network)
    # Every float tensor of the backbone and fc, the classifier's excluded (it has no start).
    assert any(k.startswith("backbone.") for k in start) and any(k.startswith("reduction.") for k in start)
    assert not any(k.startswith("classifier.") for k in start)
    _perturb(network, 1)
    trained = {k: v.clone() for k, v in network.state_dict().items()}
    replaced = blend(network, start, 0.25)
    state = network.state_dict()
    for key in start:
        torch.testing.assert_close(state[key], 0.25 * trained[key] + 0.75 * start[key])
    assert torch.equal(state["classifier.weight"], trained["classifier.weight"])
    restore(network, replaced)
    for key, tensor in network.state_dict().items():
        assert torch.equal(tensor, trained[key]), key


def test_blended_is_the_saved_network_inside_the_block_and_the_trained_one_after() -> None:
    network = _fc_network(0)
    start = start_weights(network)
    _perturb(network, 2)
    before = network.backbone.conv1.conv.weight.detach().clone()
    with blended(network, start, 0.5):
        inside = network.backbone.conv1.conv.weight.detach().clone()
    torch.testing.assert_close(inside, 0.5 * before + 0.5 * start["backbone.conv1.conv.weight"])
    assert torch.equal(network.backbone.conv1.conv.weight, before)


def test_the_default_blends_only_a_start_that_embeds_with_its_whole_network() -> None:
    config = TrainConfig()
    assert wise_alpha(config, _fc_network(0)) == EMBEDDING_START_WISE_ALPHA
    assert wise_alpha(config, _fc_network(0, embedding_start=False)) == 1.0
    bnneck = ReidNet("osnet_x0_25", num_classes=4)
    bnneck.embedding_start = True  # a Re-ID start whose fc was dropped: the BNNeck is fresh
    assert wise_alpha(config, bnneck) == 1.0
    assert wise_alpha(TrainConfig(wise_alpha=0.7), _fc_network(0)) == 0.7


def test_a_blend_without_a_start_to_blend_with_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigValueError, match="wise_alpha.*start that already embeds"):
        wise_alpha(TrainConfig(wise_alpha=0.5), _fc_network(0, embedding_start=False))
    assert wise_alpha(TrainConfig(wise_alpha=1.0), _fc_network(0, embedding_start=False)) == 1.0


@pytest.fixture(scope="module")
def osnet_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnx")
    return export_onnx(torchreid_like("osnet_x0_25", seed=3), tmp_path_factory.mktemp("onnx") / "osnet.onnx")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_synthetic(tmp_path_factory.mktemp("d") / "d", SyntheticConfig(
        seed=5, train_ids=6, test_ids=4, cameras_per_id=(2, 2), images_per_camera=(2, 2), distractors=0, junk=0,
    ))


def _config(data: Path, out: Path, start: Path, **overrides: object) -> TrainConfig:
    return TrainConfig(
        data=f"market1501:{data}", out=out, architecture="osnet_x0_25", pretrained=str(start), input_size=(64, 32),
        p=4, k=2, epochs=1, lr=1e-3, backbone_lr_scale=1.0, warmup_epochs=0, schedule="constant", threads=2, eval_every=1,
        **overrides,
    )


def test_training_from_an_embedding_start_saves_the_blend_and_reports_its_figures(
    synthetic: Path, tmp_path: Path, osnet_export: Path
) -> None:
    """The same seed and rates trained twice: saved as trained (alpha 1) and blended (alpha 0.3). The
    blend's tensors are 0.3 x the first run's + 0.7 x the start's; the figures in its
    history are the saved network's."""
    plain = train(_config(synthetic, tmp_path / "plain", osnet_export, wise_alpha=1.0))
    mixed = train(_config(synthetic, tmp_path / "mixed", osnet_export, wise_alpha=0.3))
    assert "WiSE-FT" in mixed.card.pretrained and "WiSE-FT" not in plain.card.pretrained
    start_network = ReidNet("osnet_x0_25", num_classes=0, embedding_dim=512, neck="fc")
    begun = started(start_network, str(osnet_export)).state_dict()
    trained, saved = plain.network.state_dict(), load_model(tmp_path / "mixed")[0].state_dict()
    key = "backbone.conv1.conv.weight"
    assert not torch.equal(trained[key], begun[key])  # training moved it
    for key in ("backbone.conv1.conv.weight", "backbone.conv5.conv.weight", "reduction.0.weight", "reduction.1.weight"):
        torch.testing.assert_close(saved[key], 0.3 * trained[key] + 0.7 * begun[key])
    network, card = load_model(tmp_path / "mixed")
    again = evaluate_dataset(TorchEncoder(network, card, torch.device("cpu")), load_dataset(f"market1501:{synthetic}"), 64)
    assert mixed.history[-1]["eval"]["mAP"] == pytest.approx(again.to_dict()["mAP"], abs=1e-6)
