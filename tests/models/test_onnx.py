"""OnnxEncoder: ONNX files from elsewhere (no card, fixed batch, fixed size) and their errors."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from reid.cli.app import app
from reid.errors import ConfigError, ModelError
from reid.models import ModelCard, OnnxEncoder, Preprocessing, build_network, load_encoder, preprocess, save_model
from reid.models.card import file_fingerprint

pytest.importorskip("onnxruntime", reason='onnxruntime not installed (pip install "reid-toolkit[onnx]")')


class TinyEncoder(nn.Module):
    """A small conv net standing in for a toolkit's exported encoder."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(16, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        maps = torch.relu(self.conv(x))
        return self.fc(torch.cat([maps.mean((2, 3)), maps.amax((2, 3))], dim=1))


class FeatureMap(nn.Module):
    """Returns a (N, C, H, W) map: not an embedding."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def to_onnx(module: nn.Module, path: Path, example: torch.Tensor, dynamic: dict | None = None) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(), (example,), str(path), dynamo=False, input_names=["input"], output_names=["output"],
            dynamic_axes=dynamic, opset_version=17,
        )
    return path


def images(count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (80 + 5 * i, 30 + 3 * i, 3), dtype=np.uint8) for i in range(count)]


@pytest.fixture(scope="module")
def tiny() -> TinyEncoder:
    torch.manual_seed(0)
    return TinyEncoder().eval()


@pytest.fixture(scope="module")
def fixed_batch_file(tmp_path_factory: pytest.TempPathFactory, tiny: TinyEncoder) -> Path:
    """Batch 1 and 64x32 baked into the file, no card: how many toolkits export."""
    return to_onnx(tiny, tmp_path_factory.mktemp("onnx") / "fixed.onnx", torch.zeros(1, 3, 64, 32))


@pytest.fixture(scope="module")
def dynamic_file(tmp_path_factory: pytest.TempPathFactory, tiny: TinyEncoder) -> Path:
    axes = {"input": {0: "n", 2: "h", 3: "w"}, "output": {0: "n"}}
    return to_onnx(tiny, tmp_path_factory.mktemp("onnx") / "dynamic.onnx", torch.zeros(2, 3, 64, 32), axes)


def expected(tiny: TinyEncoder, batch: list[np.ndarray], card: ModelCard) -> np.ndarray:
    with torch.inference_mode():
        out = tiny(torch.from_numpy(preprocess(batch, card)))
    return nn.functional.normalize(out, dim=1).numpy()


def test_fixed_batch_model_works_one_image_at_a_time(fixed_batch_file: Path, tiny: TinyEncoder) -> None:
    encoder = load_encoder(fixed_batch_file)
    assert isinstance(encoder, OnnxEncoder)
    assert encoder.batch_size == 1 and encoder.dim == 16
    # No card: the size fixed in the file, torchreid's ImageNet mean/std and RGB.
    assert encoder.card.input_size == (64, 32) and encoder.card.channel_order == "rgb"
    assert encoder.card.mean == (0.485, 0.456, 0.406) and encoder.card.threshold is None
    assert encoder.card.weights_fingerprint == file_fingerprint(fixed_batch_file)
    batch = images(5)
    out = encoder.embed(batch)
    assert out.dtype == np.float32 and out.shape == (5, 16)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(out, expected(tiny, batch, encoder.card), atol=1e-5)
    assert encoder.embed([]).shape == (0, 16)


def test_dynamic_model_without_card_uses_torchreid_defaults_or_flags(dynamic_file: Path, tiny: TinyEncoder) -> None:
    encoder = load_encoder(dynamic_file)
    assert encoder.batch_size is None and encoder.card.input_size == (256, 128)
    batch = images(3)
    np.testing.assert_allclose(encoder.embed(batch), expected(tiny, batch, encoder.card), atol=1e-5)

    flags = Preprocessing(input_size=(96, 48), mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), channel_order="bgr")
    flagged = load_encoder(dynamic_file, preprocessing=flags)
    card = flagged.card
    assert (card.input_size, card.mean, card.std, card.channel_order) == ((96, 48), flags.mean, flags.std, "bgr")
    np.testing.assert_allclose(flagged.embed(batch), expected(tiny, batch, card), atol=1e-5)
    assert not np.allclose(flagged.embed(batch), encoder.embed(batch), atol=1e-3)
    assert flagged.fingerprint != encoder.fingerprint, "other preprocessing makes other embeddings"
    assert flagged.card.weights_fingerprint == encoder.card.weights_fingerprint

    with pytest.raises(ModelError, match=r"field std\[0\]: input should be greater than 0"):
        load_encoder(dynamic_file, preprocessing=Preprocessing(std=(0.0, 0.2, 0.2)))
    with pytest.raises(ModelError, match=r"field input_size\[0\]: input should be less than or equal to 4096"):
        load_encoder(dynamic_file, preprocessing=Preprocessing(input_size=(100000, 100000)))


def test_card_beside_the_file_sets_preprocessing_and_threshold(tmp_path: Path, dynamic_file: Path) -> None:
    path = tmp_path / "osnet.onnx"
    path.write_bytes(dynamic_file.read_bytes())
    card = ModelCard(name="osnet", architecture="osnet_x1_0", embedding_dim=16, input_size=(80, 40),
                     channel_order="bgr", threshold=0.9, format="onnx")
    (tmp_path / "osnet.card.json").write_text(json.dumps(card.to_dict()))
    encoder = load_encoder(path)
    assert encoder.card.name == "osnet" and encoder.card.input_size == (80, 40)
    assert encoder.card.channel_order == "bgr" and encoder.threshold == 0.9
    assert load_encoder(path, preprocessing=Preprocessing(channel_order="rgb")).card.channel_order == "rgb"

    card.embedding_dim = 32
    (tmp_path / "osnet.card.json").write_text(json.dumps(card.to_dict()))
    with pytest.raises(ModelError, match="output has dimension 16, the card says 32"):
        load_encoder(path)
    card.embedding_dim, card.fingerprint = 16, "0123456789abcdef"
    (tmp_path / "osnet.card.json").write_text(json.dumps(card.to_dict()))
    with pytest.raises(ModelError, match="osnet.card.json: model card of fingerprint version 1 vouches for the weights alone"):
        load_encoder(path)
    card.fingerprint_version, card.weights_fingerprint = 2, "0123456789abcdef"
    (tmp_path / "osnet.card.json").write_text(json.dumps(card.to_dict()))
    with pytest.raises(ModelError, match="osnet.onnx: weights fingerprint .* does not match the card's 0123456789abcdef"):
        load_encoder(path)
    (tmp_path / "osnet.card.json").write_text("{broken")
    with pytest.raises(ModelError, match="osnet.card.json: model card is not valid JSON"):
        load_encoder(path)


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"missing.onnx: ONNX file not found"):
        load_encoder(tmp_path / "missing.onnx")
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage, not a protobuf")
    with pytest.raises(ModelError, match=r"corrupt.onnx: not a readable ONNX model") as info:
        load_encoder(corrupt)
    assert "\n" not in str(info.value)


def test_output_that_is_not_a_2d_embedding(tmp_path: Path) -> None:
    path = to_onnx(FeatureMap(), tmp_path / "map.onnx", torch.zeros(1, 3, 64, 32))
    with pytest.raises(ModelError, match=r"map.onnx: output 'output' has shape \[1, 3, 64, 32\], expected a 2-D"):
        load_encoder(path)


def test_wrong_input_size(fixed_batch_file: Path, dynamic_file: Path) -> None:
    with pytest.raises(ModelError, match=r"takes 64x32 images, preprocessing gives 128x64; pass --input-size 64x32"):
        load_encoder(fixed_batch_file, preprocessing=Preprocessing(input_size=(128, 64)))
    with pytest.raises(ConfigError, match="apply to ONNX files only"):
        load_encoder("dlib-face", preprocessing=Preprocessing(input_size=(128, 64)))


def test_missing_onnxruntime_names_the_extra(monkeypatch: pytest.MonkeyPatch, fixed_batch_file: Path) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ModelError, match=r'needs the onnxruntime package, which is not installed: pip install "reid-toolkit\[onnx\]"'):
        load_encoder(fixed_batch_file)


def test_torch_model_folder_refuses_onnx_flags(tmp_path: Path) -> None:
    card = ModelCard(name="t", architecture="resnet18", embedding_dim=8, input_size=(32, 16))
    save_model(build_network(card), card, tmp_path / "m")
    with pytest.raises(ConfigError, match="apply to ONNX files only"):
        load_encoder(tmp_path / "m", preprocessing=Preprocessing(channel_order="bgr"))


def write_image(path: Path, colour: tuple[int, int, int], seed: int) -> Path:
    rng = np.random.default_rng(seed)
    image = np.clip(np.array(colour) + rng.normal(0, 30, (64, 32, 3)), 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), image)
    return path


def test_eval_and_verify_accept_onnx_files_and_flags(tmp_path: Path, dynamic_file: Path) -> None:
    root = tmp_path / "market"
    for pid, colour in enumerate([(200, 40, 40), (40, 200, 40), (40, 40, 200)], start=1):
        write_image(root / "bounding_box_train" / f"{pid + 10:04d}_c1s1_000001_00.jpg", colour, pid)
        write_image(root / "query" / f"{pid:04d}_c1s1_000001_00.jpg", colour, 10 + pid)
        write_image(root / "bounding_box_test" / f"{pid:04d}_c2s1_000002_00.jpg", colour, 20 + pid)
    runner = CliRunner()
    flags = ["--input-size", "64x32", "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5", "--bgr"]
    result = runner.invoke(app, ["eval", "--model", str(dynamic_file), "--data", f"market1501:{root}", *flags])
    assert result.exit_code == 0, result.output
    assert "Rank-1" in result.output and "dynamic on market1501" in result.output

    a, b = root / "query" / "0001_c1s1_000001_00.jpg", root / "query" / "0002_c1s1_000001_00.jpg"
    result = runner.invoke(app, ["verify", str(a), str(b), "--model", str(dynamic_file), "--threshold", "2", *flags])
    assert result.exit_code == 0, result.output
    assert "same identity" in result.output

    for bad, message in [
        (["--input-size", "64by32"], "--input-size '64by32': expected HEIGHTxWIDTH"),
        (["--mean", "0.5,0.5"], "--mean '0.5,0.5': expected three comma-separated numbers"),
        (["--std", "0.5,0,0.5"], "every value must be positive"),
    ]:
        result = runner.invoke(app, ["eval", "--model", str(dynamic_file), "--data", f"market1501:{root}", *bad])
        assert result.exit_code == 1 and message in result.output, result.output


class EmptyEmbedding(nn.Module):
    """Returns an (N, 0) array: two dimensions, but nothing in them."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :0]


class NanEmbedding(TinyEncoder):
    """A broken export: every value NaN."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * float("nan")


def test_an_empty_embedding_output_is_refused_on_load(tmp_path: Path) -> None:
    path = to_onnx(EmptyEmbedding(), tmp_path / "empty.onnx", torch.zeros(1, 3, 32, 16))
    with pytest.raises(ModelError, match=r"empty\.onnx: output 'output' has an empty embedding"):
        OnnxEncoder(path, Preprocessing(input_size=(32, 16)))


def test_an_onnx_file_returning_nan_stops_verify_with_the_common_line(tmp_path: Path) -> None:
    path = to_onnx(NanEmbedding(), tmp_path / "nan.onnx", torch.zeros(1, 3, 32, 16))
    a, b = (tmp_path / "a.png", tmp_path / "b.png")
    for target, image in zip((a, b), images(2), strict=True):
        cv2.imwrite(str(target), image)
    command = ["verify", str(a), str(b), "-m", str(path), "--input-size", "32x16", "--threshold", "1"]
    result = CliRunner().invoke(app, command)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1 and "returned non-finite embeddings" in errors[0]
