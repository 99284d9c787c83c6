"""Face crops aligned by landmarks for encoders whose card asks for aligned faces."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from reid.data.io import read_image
from reid.pipeline import photo_rule
from reid.models import ModelCard, build_network, load_encoder, save_model
from reid.models.card import embedding_fingerprint


def face_model(folder: Path, alignment: str) -> Path:
    card = ModelCard(
        name="faces", architecture="resnet18", embedding_dim=32, input_size=(112, 112), kind="face",
        face_alignment=alignment,
    )
    save_model(build_network(card), card, folder)
    return folder


def test_aligned_chips_only_for_encoders_that_ask(tmp_path: Path, orl_faces: Path) -> None:
    aligned = load_encoder(face_model(tmp_path / "aligned", "5-point"))
    plain = load_encoder(face_model(tmp_path / "plain", "none"))
    assert aligned.aligned_face_size == (112, 112) and plain.aligned_face_size is None
    # The alignment flag says how crops are cut, not what the weights compute.
    weights = aligned.card.weights_fingerprint
    assert embedding_fingerprint(aligned.card, weights) == embedding_fingerprint(replace(aligned.card, face_alignment="none"), weights)
    photo = read_image(orl_faces / "s3" / "2.pgm")
    rule = photo_rule("face", "yunet")
    chip = rule.fitted_to(aligned).apply(photo, "s3/2.pgm").crops[0]
    crop = rule.fitted_to(plain).apply(photo, "s3/2.pgm").crops[0]
    assert chip.shape[:2] == (112, 112) and crop.shape[:2] != (112, 112)
    # Left to itself ("auto"), an aligned encoder's photos become its aligned chips; a plain one's stay whole.
    auto = photo_rule(aligned_face_size=aligned.aligned_face_size).apply(photo, "s3/2.pgm").crops[0]
    np.testing.assert_array_equal(auto, chip)
    assert photo_rule(aligned_face_size=plain.aligned_face_size).apply(photo, "s3/2.pgm").crops[0] is photo
    # Haar finds no landmarks: its crops stay plain boxes, even for an aligned encoder.
    haar = photo_rule("face").fitted_to(aligned).apply(photo, "s3/2.pgm").crops[0]
    assert haar.shape[:2] != (112, 112)
    assert np.asarray(chip).dtype == np.uint8


def test_verify_gives_a_model_trained_on_aligned_chips_its_chips_by_itself(tmp_path: Path, orl_faces: Path) -> None:
    import json

    from typer.testing import CliRunner

    from reid.cli.app import app
    from reid.decision import pair_distance
    from reid.detect import build_detector
    from reid.detect.align import align_face
    from reid.detect.base import largest_detection

    folder = face_model(tmp_path / "aligned", "5-point")
    photos = [orl_faces / "s3" / "2.pgm", orl_faces / "s3" / "3.pgm"]

    def verify(*options: str) -> float:
        result = tmp_path / "v.json"
        args = ["verify", *map(str, photos), "-m", str(folder), "--threshold", "1.0", "--json", str(result), *options]
        run = CliRunner().invoke(app, args)
        assert run.exit_code == 0, run.output
        return json.loads(result.read_text())["distance"]

    encoder = load_encoder(folder)
    yunet = build_detector("yunet", "face")
    chips = []
    for path in photos:
        image = read_image(path)
        face = largest_detection(yunet.detect(image))
        assert face is not None and face.landmarks is not None
        chips.append(align_face(image, face.landmarks, (112, 112)))
    expected = float(pair_distance(encoder.embed(chips[:1]), encoder.embed(chips[1:]))[0])
    # Left to itself (--detect auto), verify cuts the aligned chips the card asks for.
    assert abs(verify() - expected) < 1e-5
    assert abs(verify("--detect", "face", "--detector", "yunet") - expected) < 1e-5
    assert abs(verify("--detect", "none") - expected) > 1e-4


def test_query_finds_faces_for_an_aligning_model_with_the_detector_that_gives_landmarks(tmp_path: Path, orl_faces: Path) -> None:
    from reid.detect import YuNetDetector
    from reid.pipeline import QueryConfig, choose_detector, open_source

    aligned = load_encoder(face_model(tmp_path / "aligned", "5-point"))
    plain = load_encoder(face_model(tmp_path / "plain", "none"))
    photos = open_source(orl_faces / "s3")
    assert isinstance(choose_detector(QueryConfig(), photos, aligned), YuNetDetector)
    assert choose_detector(QueryConfig(), photos, plain) is None
    assert isinstance(choose_detector(QueryConfig(detect="face"), photos, aligned), YuNetDetector)
    assert not isinstance(choose_detector(QueryConfig(detect="face"), photos, plain), YuNetDetector)
    assert not isinstance(choose_detector(QueryConfig(detect="face", detector="haar"), photos, aligned), YuNetDetector)
