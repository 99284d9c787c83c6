"""Export of a model folder to ONNX and TorchScript, checked against PyTorch."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from reid.cli.app import app
from reid.data import SyntheticConfig, generate_synthetic, load_dataset
from reid.errors import ConfigError, ModelError
from reid.pipeline import evaluate_encoder
from reid.models import ModelCard, OnnxEncoder, build_network, export_model, load_encoder, save_model
from reid.models.card import file_fingerprint
from reid.models.export import check_images

ort = pytest.importorskip("onnxruntime", reason='onnxruntime not installed (pip install "reid-toolkit[onnx]")')
pytest.importorskip("onnx", reason='onnx not installed (pip install "reid-toolkit[onnx]")')


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    card = ModelCard(name="t", architecture="resnet18", embedding_dim=64, input_size=(64, 32), num_classes=0)
    torch.manual_seed(0)
    network = build_network(card)
    # Non-trivial BatchNorm statistics, as a trained model has, so that export must carry them.
    for module in network.modules():
        if isinstance(module, torch.nn.BatchNorm2d | torch.nn.BatchNorm1d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 2.0)
    folder = tmp_path_factory.mktemp("models") / "m"
    save_model(network, card, folder)
    return folder


@pytest.fixture(scope="module")
def exported(model: Path):
    return export_model(model, "onnx")


def images(count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (90 + i, 40 + i, 3), dtype=np.uint8) for i in range(count)]


def test_onnx_export_matches_pytorch_with_a_dynamic_batch(model: Path, exported) -> None:
    assert exported.path == model / "m.onnx" and exported.path.is_file()
    assert exported.card_path == model / "m.card.json"
    assert exported.max_abs_diff < 1e-4
    card = json.loads(exported.card_path.read_text())
    assert card["format"] == "onnx" and card["normalized_output"] is True
    assert card["weights_fingerprint"] == file_fingerprint(exported.path) and card["fingerprint_version"] == 2
    assert card["input_size"] == [64, 32] and card["embedding_dim"] == 64
    assert card["training"]["exported_from"]["model"] == "m"
    assert not list(model.glob(".*tmp*"))

    session = ort.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])
    assert isinstance(session.get_inputs()[0].shape[0], str)
    torch_encoder = load_encoder(model)
    batch = check_images(torch_encoder.card, 7, seed=42)
    got = session.run(None, {session.get_inputs()[0].name: batch.numpy()})[0]
    expected = torch_encoder.embed_tensor(batch).numpy()
    assert got.shape == (7, 64)
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_exported_file_evaluates_like_the_pytorch_model(tmp_path: Path, model: Path, exported) -> None:
    root = generate_synthetic(tmp_path / "syn", SyntheticConfig(seed=1, train_ids=4, test_ids=8, distractors=2, junk=0))
    dataset = load_dataset(f"market1501:{root}")
    torch_result = evaluate_encoder(load_encoder(model), dataset.query, dataset.gallery).result
    onnx_encoder = load_encoder(exported.path)
    assert isinstance(onnx_encoder, OnnxEncoder)
    onnx_result = evaluate_encoder(onnx_encoder, dataset.query, dataset.gallery).result
    assert onnx_result.num_valid_queries == torch_result.num_valid_queries > 0
    assert onnx_result.rank1 == pytest.approx(torch_result.rank1, abs=1e-9)
    assert onnx_result.mAP == pytest.approx(torch_result.mAP, abs=1e-6)


def test_torchscript_export(tmp_path: Path, model: Path) -> None:
    result = export_model(model, "torchscript", tmp_path / "m.torchscript.pt")
    assert result.max_abs_diff < 1e-4
    card = json.loads((tmp_path / "m.torchscript.card.json").read_text())
    assert card["format"] == "torchscript" and card["weights_fingerprint"] == file_fingerprint(result.path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        loaded = torch.jit.load(str(result.path))
    batch = check_images(result.card, 4, seed=3)
    with torch.jit.optimized_execution(False), torch.inference_mode():
        np.testing.assert_allclose(
            loaded(batch).numpy(), load_encoder(model).embed_tensor(batch).numpy(), atol=1e-5
        )


def test_export_above_tolerance_fails_and_leaves_no_file(
    tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("reid.models.export._write_onnx", lambda head, example, path, onnx: path.write_bytes(b"onnx"))
    monkeypatch.setattr("reid.models.export._max_abs_diff", lambda *args: 0.25)
    with pytest.raises(ModelError, match=r"differs from PyTorch by 0.25 \(max abs\), above the tolerance 0.0001"):
        export_model(model, "onnx", tmp_path / "bad.onnx")
    assert list(tmp_path.iterdir()) == []


def test_export_to_a_folder_is_refused_before_exporting(tmp_path: Path, model: Path) -> None:
    (tmp_path / "taken.onnx").mkdir()
    with pytest.raises(ConfigError, match=r"taken.onnx: --out needs a file name; this is a folder"):
        export_model(model, "onnx", tmp_path / "taken.onnx")
    assert [p.name for p in tmp_path.iterdir()] == ["taken.onnx"]


def test_export_input_errors(tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="choose one of onnx, torchscript"):
        export_model(model, "tflite")
    with pytest.raises(ConfigError, match="ending in .onnx"):
        export_model(model, "onnx", tmp_path / "m.bin")
    with pytest.raises(ModelError, match="model folder not found"):
        export_model(tmp_path / "missing", "onnx")
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ModelError, match=r'exporting to ONNX needs the onnx package, which is not installed: pip install "reid-toolkit\[onnx\]"'):
        export_model(model, "onnx", tmp_path / "x.onnx")


def test_export_cli_with_raw_output(tmp_path: Path, model: Path) -> None:
    out = tmp_path / "raw.onnx"
    result = CliRunner().invoke(
        app, ["export", "--model", str(model), "--out", str(out), "--raw", "--json", str(tmp_path / "e.json")]
    )
    assert result.exit_code == 0, result.output
    assert "max abs difference from PyTorch" in result.output and "raw" in result.output
    payload = json.loads((tmp_path / "e.json").read_text())
    card = json.loads((tmp_path / "raw.card.json").read_text())
    assert payload["max_abs_diff"] < 1e-4 and payload["fingerprint"] == card["fingerprint"]
    assert card["weights_fingerprint"] == file_fingerprint(out) and card["normalized_output"] is False

    torch_encoder = load_encoder(model)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    raw = session.run(None, {"images": check_images(torch_encoder.card, 3, seed=1).numpy()})[0]
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    # The encoder normalizes whatever the file returns, so raw and normalized exports agree.
    np.testing.assert_allclose(load_encoder(out).embed(images(3)), torch_encoder.embed(images(3)), atol=1e-4)

    bad = CliRunner().invoke(app, ["export", "--model", str(tmp_path / "nope")])
    assert bad.exit_code == 1 and "model folder not found" in bad.output
