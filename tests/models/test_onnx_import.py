"""ONNX exports of torchreid's OSNet read back as weights: exact, or refused in one line."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from reid.data import SyntheticConfig, generate_synthetic
from reid.engine import TrainCallbacks, TrainConfig, train
from reid.errors import ModelError
from reid.models.onnx_import import MIN_COSINE, osnet_onnx_state
from reid.models.osnet import OSNet
from reid.models.pretrained import load_start, resolve_start, start_neck
from reid.models.network import ReidNet
from tests.conftest import SHARED_WEIGHTS
from tests.models.starting import export_onnx, torchreid_like

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

SIZE = (64, 32)
SHARED = SHARED_WEIGHTS / "osnet_x0_25_msmt17.onnx"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[OSNet, Path]:
    network = torchreid_like("osnet_x0_25", seed=3)
    return network, export_onnx(network, tmp_path_factory.mktemp("onnx") / "osnet.onnx")


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_export_folds_its_batchnorms(exported: tuple[OSNet, Path]) -> None:
    model = onnx.load(str(exported[1]))
    kinds = [node.op_type for node in model.graph.node]
    # Only fc's BatchNorm1d survives: every other one is in a convolution's weights.
    assert kinds.count("BatchNormalization") <= 1
    assert any(init.name.startswith("onnx::Conv") for init in model.graph.initializer)


def test_import_reproduces_the_exported_network(exported: tuple[OSNet, Path]) -> None:
    original, path = exported
    state = osnet_onnx_state(path, "osnet_x0_25")
    imported = OSNet("osnet_x0_25", num_classes=1).eval()
    imported.load_state_dict(state, strict=False)
    images = torch.rand(3, 3, *SIZE) * 4 - 2
    with torch.no_grad():
        expected, got = original(images).numpy(), imported(images).numpy()
    assert _cosines(expected, got).min() >= MIN_COSINE
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-3)
    # The folded BatchNorms are the identity plus the folded bias; the kept one is as it was.
    assert torch.equal(state["conv1.bn.weight"], torch.ones(16))
    assert torch.equal(state["fc.1.running_var"], original.fc[1].running_var)
    assert not any(key.startswith("classifier.") for key in state)


def test_training_start_from_the_export_places_the_backbone(exported: tuple[OSNet, Path]) -> None:
    original, path = exported
    start = resolve_start("osnet_x0_25", path)
    assert start is not None and start.format == "torchreid-onnx"
    network = ReidNet("osnet_x0_25", num_classes=5)
    note = load_start(network, start)
    assert "head tensors of the file" in note  # fc's Linear + BatchNorm1d do not fit a BNNeck
    network.eval()
    images = torch.rand(2, 3, *SIZE)
    with torch.no_grad():
        features = original.global_avgpool(original.featuremaps(images)).flatten(1)
        np.testing.assert_allclose(network(images).feature.numpy(), features.numpy(), atol=1e-4, rtol=1e-3)


def test_training_keeps_the_starts_fc_and_its_forward(exported: tuple[OSNet, Path]) -> None:
    """Trained from a start with fc, the network in training mode is the start's own: every
    BatchNorm of the start (the backbone's and fc's) normalises by the start's statistics."""
    original, path = exported
    start = resolve_start("osnet_x0_25", path)
    assert start_neck(start, "osnet_x0_25", keep_fc=True, embedding_dim=None) == ("fc", 512)
    network = ReidNet("osnet_x0_25", num_classes=5, embedding_dim=512, neck="fc")
    note = load_start(network, start)
    assert "not used" not in note
    assert start.embeds and network.embedding_start  # a Re-ID model: the saved model blends with it by default
    network.train()
    assert not any(m.training for m in network.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm))
    assert network.classifier is not None and network.classifier.training
    images = torch.rand(3, 3, *SIZE)
    with torch.no_grad():
        expected = original(images)
        output = network(images)
    assert output.logits is not None and output.logits.shape == (3, 5)
    torch.testing.assert_close(output.embedding, expected, rtol=1e-3, atol=1e-5 * expected.abs().max().item())
    torch.testing.assert_close(output.feature, output.embedding)


def test_training_drops_the_fc_when_asked_or_another_width_is_asked(exported: tuple[OSNet, Path]) -> None:
    start = resolve_start("osnet_x0_25", exported[1])
    assert start_neck(start, "osnet_x0_25", keep_fc=False, embedding_dim=None) == ("bnneck", None)
    assert start_neck(start, "osnet_x0_25", keep_fc=True, embedding_dim=256) == ("bnneck", 256)
    assert start_neck(None, "osnet_x0_25", keep_fc=True, embedding_dim=None) == ("bnneck", None)


def test_another_width_is_refused_in_one_line(tmp_path: Path) -> None:
    path = export_onnx(torchreid_like("osnet_x0_5", seed=4), tmp_path / "x0_5.onnx")
    with pytest.raises(ModelError) as caught:
        osnet_onnx_state(path, "osnet_x0_25")
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "does not map onto conv1.conv.weight" in message


def test_weights_placed_on_the_wrong_layers_are_refused(exported: tuple[OSNet, Path], tmp_path: Path) -> None:
    """Two convolutions of one shape in the last block swap names: every shape still fits,
    and the embedding's cosine stays above 0.99998 (random weights); only the size of the
    difference tells."""
    model = onnx.load(str(exported[1]))
    first, second = [n for n in model.graph.node if n.op_type == "Conv" and "conv4.1/conv2b" in n.name and n.name.endswith("/conv1/Conv")][:2]
    first.name, second.name = second.name, first.name
    path = tmp_path / "swapped.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelError, match=r"do not reproduce the file: embedding cosine"):
        osnet_onnx_state(path, "osnet_x0_25")


def test_a_file_that_is_not_onnx_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.onnx"
    path.write_text("not a graph")
    with pytest.raises(ModelError, match=r"notes.onnx: not an ONNX model"):
        osnet_onnx_state(path, "osnet_x0_25")


def test_another_architecture_is_refused(exported: tuple[OSNet, Path]) -> None:
    with pytest.raises(ModelError, match="imports as an OSNet only, not resnet18"):
        resolve_start("resnet18", exported[1])


def test_a_few_training_steps_from_the_export(exported: tuple[OSNet, Path], tmp_path: Path) -> None:
    data = generate_synthetic(tmp_path / "d", SyntheticConfig(
        seed=5, train_ids=6, test_ids=4, cameras_per_id=(2, 2), images_per_camera=(2, 2), distractors=0, junk=0,
    ))
    losses: list[float] = []
    config = TrainConfig(
        data=f"market1501:{data}", out=tmp_path / "m", architecture="osnet_x0_25", pretrained=str(exported[1]),
        input_size=SIZE, p=4, k=2, epochs=1, lr=3.5e-4, warmup_epochs=0, schedule="constant", threads=2, eval_every=0,
    )
    result = train(config, TrainCallbacks(on_step=lambda step: losses.append(step.loss)))
    assert len(losses) >= 2 and all(np.isfinite(losses))
    assert f"started from {exported[1]}" in result.pretrained_note
    # The folded BatchNorms have no statistics to learn from: training keeps the start's.
    state = result.network.state_dict()
    assert torch.equal(state["backbone.conv1.bn.running_mean"], torch.zeros(16))
    assert torch.equal(state["backbone.conv1.bn.running_var"], torch.full((16,), 1 - 1e-5))
    assert not torch.equal(state["backbone.conv1.conv.weight"], osnet_onnx_state(exported[1], "osnet_x0_25")["conv1.conv.weight"])
    # fc is kept as the neck, and its BatchNorm1d keeps the start's statistics too.
    assert result.card.neck == "fc" and result.card.embedding_dim == 512
    fc_norm = exported[0].fc[1]
    assert torch.equal(state["reduction.1.running_mean"], fc_norm.running_mean)
    assert torch.equal(state["reduction.1.running_var"], fc_norm.running_var)


@pytest.mark.skipif(not SHARED.is_file(), reason="the published OSNet x0_25 MSMT17 export is not in shared/weights")
def test_the_published_export_imports_exactly() -> None:
    state = osnet_onnx_state(SHARED, "osnet_x0_25")
    session = ort.InferenceSession(str(SHARED), providers=["CPUExecutionProvider"])
    network = OSNet("osnet_x0_25", num_classes=1).eval()
    network.load_state_dict(state, strict=False)
    images = torch.rand(2, 3, 256, 128) * 4 - 2
    with torch.no_grad():
        got = network(images).numpy()
    expected = session.run(None, {session.get_inputs()[0].name: images.numpy()})[0]
    assert _cosines(expected, got).min() >= MIN_COSINE


@pytest.mark.skipif(not SHARED.is_file(), reason="the published OSNet x0_25 MSMT17 export is not in shared/weights")
def test_training_from_the_published_export_starts_from_its_embedding(market1501_mini: Path) -> None:
    """The network training builds from the published file, in training mode, embeds a few
    Market-1501 images as onnxruntime runs the file."""
    paths = sorted((market1501_mini / "query").glob("*.jpg"))[:4]
    rgb = [cv2.cvtColor(cv2.resize(cv2.imread(str(p)), (128, 256)), cv2.COLOR_BGR2RGB) for p in paths]
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    batch = np.stack([((image / 255.0 - mean) / std).transpose(2, 0, 1) for image in rgb]).astype(np.float32)
    start = resolve_start("osnet_x0_25", SHARED)
    neck, dim = start_neck(start, "osnet_x0_25", keep_fc=True, embedding_dim=None)
    network = ReidNet("osnet_x0_25", num_classes=50, embedding_dim=dim, neck=neck)
    load_start(network, start)
    network.train()
    with torch.no_grad():
        got = network(torch.from_numpy(batch)).embedding.numpy()
    session = ort.InferenceSession(str(SHARED), providers=["CPUExecutionProvider"])
    expected = session.run(None, {session.get_inputs()[0].name: batch})[0]
    assert got.shape == expected.shape == (4, 512)
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()
