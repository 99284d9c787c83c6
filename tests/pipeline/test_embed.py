"""Running encoders over image files: ranking splits, pair files, calibration, plots, and
the one crop rule applied to each photo first."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from reid.data.records import ImageRecord
from reid.decision import impostor_quantiles
from reid.errors import ConfigError, DataError, ModelError
from reid.evaluation import read_pairs
from reid.pipeline import (
    SubjectRule,
    calibrate_model,
    compare_images,
    embed_paths,
    evaluate_encoder,
    photo_rule,
    score_pairs,
    verify_pairs,
)
from reid.pipeline.embed import person_model_note
from reid.evaluation.plots import write_ranking_plots, write_verification_plots
from reid.models import Encoder, ModelCard, build_network, load_card, save_model
from reid.models.encoder import l2_normalize


class ColourEncoder(Encoder):
    """Embeds an image as its L2-normalized mean colour: cheap and predictable."""

    def __init__(self, threshold: float | None = None) -> None:
        self.card = ModelCard(name="colour", architecture="mean-colour", embedding_dim=3, threshold=threshold)
        self.calls = 0

    def embed(self, images):
        self.calls += 1
        return l2_normalize(np.array([img.reshape(-1, 3).mean(axis=0) + 1.0 for img in images], np.float32))


PALETTE = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30), (30, 200, 200)]


def write_image(path: Path, colour, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    image = np.clip(np.array(colour) + rng.normal(0, 25, (32, 16, 3)), 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    return path


def colour_split(root: Path) -> tuple[list[ImageRecord], list[ImageRecord]]:
    """Five identities by colour; queries in camera 1, gallery in cameras 1 and 2, plus a distractor."""
    query, gallery = [], []
    for pid, colour in enumerate(PALETTE, start=1):
        query.append(ImageRecord(write_image(root / f"q{pid}.png", colour, pid), pid, 1))
        for cam in (1, 2):
            gallery.append(ImageRecord(write_image(root / f"g{pid}_{cam}.png", colour, 10 * pid + cam), pid, cam))
    gallery.append(ImageRecord(write_image(root / "g0.png", (128, 128, 128), 99), 0, 3))
    return query, gallery


def test_evaluate_encoder_on_written_images(tmp_path):
    query, gallery = colour_split(tmp_path)
    seen = []
    evaluation = evaluate_encoder(
        ColourEncoder(), query, gallery, batch_size=4, on_progress=lambda done, total: seen.append((done, total))
    )
    result = evaluation.result
    assert result.rank1 == 1.0 and result.mAP == 1.0
    assert result.num_query == 5 and result.num_gallery == 11 and result.num_valid_queries == 5
    assert evaluation.query_features.shape == (5, 3)
    result_tuple, q_feats, g_feats, q_records, g_records, skipped = evaluation
    assert result_tuple is result and g_feats.shape == (11, 3)
    assert (len(q_records), len(g_records), skipped) == (5, 11, [])
    assert seen[-1] == (16, 16) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_market1501_mini_protocol(market1501_mini):
    from reid.data import load_dataset

    dataset = load_dataset(f"market1501:{market1501_mini}")
    evaluation = evaluate_encoder(ColourEncoder(), dataset.query, dataset.gallery, batch_size=256)
    result = evaluation.result
    # 782 gallery images of the 50 test identities + 300 distractors; the 100 junk dropped.
    assert (result.num_query, result.num_gallery, result.num_valid_queries) == (215, 1082, 215)
    q_pids = np.array([r.pid for r in dataset.query])
    g_pids = np.array([r.pid for r in dataset.gallery])
    g_cams = np.array([r.camid for r in dataset.gallery])
    assert (g_pids == 0).sum() == 300 and (g_pids >= 0).all()
    # Per-query reference on the real labels and features.
    aps = []
    for i, query in enumerate(dataset.query):
        dist = np.linalg.norm(evaluation.gallery_features - evaluation.query_features[i], axis=1)
        order = np.argsort(dist, kind="stable")
        junk = (g_pids[order] == q_pids[i]) & (g_cams[order] == query.camid)
        ranks = np.flatnonzero((g_pids[order] == q_pids[i])[~junk]) + 1
        aps.append(np.mean(np.arange(1, ranks.size + 1) / ranks))
    # Mean colours nearly tie often; float32 rounding may order such neighbours differently.
    assert result.mAP == pytest.approx(np.mean(aps), abs=1e-4)
    assert 0.02 < result.mAP < 0.5


def test_unreadable_image_names_the_file(tmp_path):
    query, gallery = colour_split(tmp_path)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    gallery.append(ImageRecord(broken, 3, 2))
    with pytest.raises(DataError, match="broken.png"):
        evaluate_encoder(ColourEncoder(), query, gallery)


def test_unreadable_image_can_be_left_out_and_named(tmp_path):
    query, gallery = colour_split(tmp_path)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    evaluation = evaluate_encoder(ColourEncoder(), query, gallery + [ImageRecord(broken, 3, 2)], skip_unreadable=True)
    assert evaluation.result.num_gallery == len(gallery) == len(evaluation.gallery_records)
    assert [path.name for path, _ in evaluation.skipped] == ["broken.png"]


def test_real_network_on_written_images(tmp_path):
    card = ModelCard(name="t", architecture="resnet18", embedding_dim=64, input_size=(64, 32), num_classes=0)
    save_model(build_network(card), card, tmp_path / "m")
    from reid.models import load_encoder

    encoder = load_encoder(tmp_path / "m")
    query, gallery = colour_split(tmp_path / "img")
    evaluation = evaluate_encoder(encoder, query, gallery, batch_size=8, rerank=True)
    assert evaluation.gallery_features.shape == (11, 64)
    np.testing.assert_allclose(np.linalg.norm(evaluation.gallery_features, axis=1), 1.0, atol=1e-5)
    assert 0.0 <= evaluation.result.mAP <= 1.0 and evaluation.result.reranked


def colour_pairs(tmp_path: Path) -> Path:
    for pid, colour in enumerate(PALETTE, start=1):
        for i in range(4):
            write_image(tmp_path / f"p{pid}" / f"{i}.png", colour, 100 * pid + i)
    lines = ["path_a,path_b,label"]
    for pid in range(1, 6):
        lines += [f"p{pid}/0.png,p{pid}/{i}.png,1" for i in (1, 2, 3)]
        lines += [f"p{pid}/0.png,p{pid % 5 + 1}/{i}.png,0" for i in (1, 2, 3)]
    lines.append("p1/0.png,missing/9.png,1")
    path = tmp_path / "pairs.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_no_readable_pair_is_one_data_error(tmp_path):
    """Every pair unscored (a wrong --root, say) is a clear error, not a reshape failure."""
    pair_set = read_pairs(colour_pairs(tmp_path), tmp_path / "elsewhere")
    with pytest.raises(DataError, match="no pair has two readable images"):
        verify_pairs(ColourEncoder(), pair_set, folds=3)


def test_verify_pairs_skips_and_counts_unreadable(tmp_path):
    pair_set = read_pairs(colour_pairs(tmp_path), tmp_path)
    encoder = ColourEncoder()
    result, scores = verify_pairs(encoder, pair_set, folds=3)
    assert scores.num_pairs_total == 31 and scores.num_pairs_skipped == 1
    assert len(scores.skipped_images) == 1 and "missing" in str(scores.skipped_images[0][0])
    assert result.num_pairs == 30 and result.accuracy == 1.0 and result.auc == 1.0
    # Each of the 21 distinct readable images was embedded once (one batch).
    assert encoder.calls == 1
    paths = write_verification_plots(tmp_path / "plots", result)
    assert [p.name for p in paths] == ["roc.png", "distance_histogram.png"]
    assert all(cv2.imread(str(p)) is not None for p in paths)


def test_verify_pairs_on_orl_faces(tmp_path, orl_faces):
    lines = []
    for s in range(1, 11):
        lines += [f"s{s}/1.pgm,s{s}/{i}.pgm,1" for i in (2, 3)]
        lines += [f"s{s}/1.pgm,s{s % 10 + 1}/{i}.pgm,0" for i in (2, 3)]
    (tmp_path / "orl.csv").write_text("\n".join(lines) + "\n")
    pair_set = read_pairs(tmp_path / "orl.csv", orl_faces)
    scores = score_pairs(ColourEncoder(), pair_set)
    assert scores.distances.size == 40 and not scores.skipped_images
    # Grey images: every mean colour is grey, so all distances vanish.
    assert np.allclose(scores.distances, 0.0, atol=1e-6)


def test_compare_images_and_threshold(tmp_path):
    a = write_image(tmp_path / "a.png", PALETTE[0], 1)
    b = write_image(tmp_path / "b.png", PALETTE[0], 2)
    c = write_image(tmp_path / "c.png", PALETTE[2], 3)
    with pytest.raises(ConfigError, match="models/x: the model card has no calibrated threshold"):
        compare_images(ColourEncoder(), a, b, model_name="models/x")
    same = compare_images(ColourEncoder(threshold=0.1), a, b)
    other = compare_images(ColourEncoder(threshold=0.1), a, c)
    assert same.same and not other.same and same.distance < 0.1 < other.distance
    assert compare_images(ColourEncoder(), a, c, threshold=2.0).same


def test_a_person_model_given_photos_without_a_persons_shape_says_so(tmp_path):
    tall = [write_image(tmp_path / f"tall-{k}.png", PALETTE[k], k) for k in range(2)]
    square = []
    for k in range(2):
        image = np.full((92, 80, 3), PALETTE[k], np.uint8)
        square.append(tmp_path / f"square-{k}.png")
        cv2.imwrite(str(square[-1]), image)
    person = ColourEncoder(threshold=0.5)
    assert compare_images(person, *tall).kind_note == ""
    note = compare_images(person, *square, model_name="models/x").kind_note
    assert note.startswith("note: models/x is a person Re-ID model (its card's kind)") and "(92x80)" in note
    assert "sface" in note and len(note.splitlines()) == 1
    face = ModelCard(name="f", architecture="sface_mobilefacenet", embedding_dim=3, kind="face")
    assert person_model_note(face, [(92, 80, 3)]) == ""
    assert person_model_note(person.card, [(92, 80, 3), (128, 64, 3)]) == "", "one person-shaped photo is enough"
    # A pair file: the photos given whole are looked at; a person detector's crops are not.
    (tmp_path / "pairs.csv").write_text(f"{square[0].name},{square[1].name},0\n{square[0].name},{square[0].name},1\n")
    pair_set = read_pairs(tmp_path / "pairs.csv", tmp_path)
    assert score_pairs(person, pair_set).note.startswith("note: colour is a person Re-ID model")
    assert score_pairs(person, pair_set, subject=SubjectRule(BrightFaces(), none_found="whole")).note == ""


def test_calibrate_writes_the_card(tmp_path):
    card = ModelCard(name="t", architecture="resnet18", embedding_dim=64, input_size=(64, 32), num_classes=0)
    save_model(build_network(card), card, tmp_path / "m")
    before = load_card(tmp_path / "m")
    pairs = colour_pairs(tmp_path / "pairs")
    calibration = calibrate_model(tmp_path / "m", pairs, tmp_path / "pairs", target_far=0.1)
    after = load_card(tmp_path / "m")
    assert after.threshold == pytest.approx(calibration.choice.threshold)
    assert "FAR <= 0.1" in after.threshold_source and "pairs.csv" in after.threshold_source
    assert after.metrics["calibration"]["far"] <= 0.1
    assert after.fingerprint == before.fingerprint
    impostors = calibration.scores.distances[~calibration.scores.is_same]
    assert after.impostor_quantiles == impostor_quantiles(impostors) and after.impostor_quantiles[0][0] == 1.0
    assert after.impostor_quantiles[0][1] == pytest.approx(impostors.max(), abs=1e-6)
    assert not list((tmp_path / "m").glob(".*tmp*"))
    best = calibrate_model(tmp_path / "m", pairs, tmp_path / "pairs", target_far=None)
    assert load_card(tmp_path / "m").threshold_source.startswith("reid calibrate: best accuracy")
    assert best.choice.accuracy >= calibration.choice.accuracy
    with pytest.raises(ModelError, match="no such model folder"):
        calibrate_model(tmp_path / "nothing", pairs, tmp_path)


def test_ranking_plots(tmp_path):
    query, gallery = colour_split(tmp_path / "img")
    evaluation = evaluate_encoder(ColourEncoder(), query, gallery)
    paths = write_ranking_plots(tmp_path / "plots", evaluation.result, evaluation.query_features,
                                evaluation.gallery_features, query, gallery, top_k=4)
    ranked = cv2.imread(str(paths[0]))
    assert paths[1].name == "cmc.png" and cv2.imread(str(paths[1])) is not None
    from reid.evaluation.plots import CAPTION, CELL

    # Five query rows of a 128-pixel cell and its caption; query, gap and 4 results of 64 pixels each.
    assert CELL == (128, 64)
    assert ranked.shape == (5 * (128 + CAPTION.label_size("0")[1]), 64 * 5 + 16, 3)
    # The first result of the first row is a true match: a green frame (BGR on disk).
    assert tuple(ranked[1, 64 + 16 + 1]) == (40, 170, 40)
    assert json.dumps(evaluation.result.to_dict())


class FakeFaces:
    kind = "face"
    confident_score = None

    def __init__(self, boxes):
        self.boxes = boxes

    def detect(self, image):
        from reid.detect import Detection

        return [Detection(box=b, score=1.0, kind="face") for b in self.boxes]


class BrightFaces:
    """A face in the top-left quarter of every photo brighter than mid-grey; none in darker ones."""

    kind = "face"
    confident_score = None

    def detect(self, image):
        from reid.detect import Detection

        if image.mean() <= 128:
            return []
        height, width = image.shape[:2]
        return [Detection(box=(0, 0, width // 2, height // 2), score=1.0, kind="face")]


def write_photos(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, value in (("bright.png", 200), ("dark.png", 40), ("light.png", 180)):
        image = np.full((40, 40, 3), value, np.uint8)
        image[:20, :20] = (value, 0, 0)  # the "face": the top-left quarter, redder
        cv2.imwrite(str(folder / name), image[:, :, ::-1])
        paths.append(folder / name)
    return paths


def test_embedding_cuts_each_photo_by_the_rule_and_follows_its_no_face(tmp_path):
    paths = write_photos(tmp_path / "photos")
    skip = embed_paths(ColourEncoder(), paths, skip_unreadable=True, subject=SubjectRule(BrightFaces(), 0.0, none_found="skip"))
    assert skip.embedded.tolist() == [True, False, True]
    assert skip.failures == [(paths[1], "no face found")]
    # The face crop (red) is embedded, not the whole grey photo.
    whole_bright = embed_paths(ColourEncoder(), paths[:1]).features[0]
    assert skip.features[0][0] > whole_bright[0]
    whole = embed_paths(ColourEncoder(), paths, skip_unreadable=True, subject=SubjectRule(BrightFaces(), 0.0, none_found="whole"))
    assert whole.embedded.all() and not whole.failures
    with pytest.raises(DataError, match="dark.png: no face found"):
        embed_paths(ColourEncoder(), paths, skip_unreadable=True, subject=SubjectRule(BrightFaces(), none_found="error"))
    # Two photos are compared or nothing is: a faceless one is an error under skip too.
    with pytest.raises(DataError, match="dark.png: no face found"):
        compare_images(ColourEncoder(threshold=0.5), paths[0], paths[1], subject=SubjectRule(BrightFaces(), none_found="skip"))
    taken = compare_images(ColourEncoder(threshold=0.5), paths[0], paths[1], subject=SubjectRule(BrightFaces(), none_found="whole"))
    assert 0 <= taken.distance <= 2


def test_photo_rule_reads_the_options_of_every_command():
    assert photo_rule().detector is None and photo_rule("none").detector is None
    assert photo_rule("face").kind == "face" and photo_rule("face").align_to is None
    aligned = photo_rule("auto", aligned_face_size=(64, 64))
    assert aligned.kind == "face" and aligned.align_to == (64, 64)
    assert photo_rule("auto", "haar").kind == "face"
    assert photo_rule("face", no_face="whole").none_found == "whole"
    for options, message in (
        ({"detect": "eyes"}, "^detect 'eyes': choose one of auto, person, face, none"),
        ({"no_face": "maybe"}, "^no_face 'maybe': choose one of whole, skip, error"),
        ({"detect": "none", "detector": "haar"}, "^detector haar: detect none"),
        ({"detect": "person", "detector": "haar"}, "haar"),
    ):
        with pytest.raises(ConfigError, match=message):
            photo_rule(**options)


def test_face_detection_on_orl(orl_faces):
    from reid.data.io import read_image

    face = photo_rule("face").apply(read_image(orl_faces / "s1" / "1.pgm"), orl_faces / "s1" / "1.pgm").crops[0]
    assert 20 < face.shape[0] <= 112 and 20 < face.shape[1] <= 92


def test_faces_for_an_aligning_encoder_are_found_by_the_detector_that_gives_landmarks():
    from reid.detect import YuNetDetector

    assert isinstance(photo_rule("face", aligned_face_size=(112, 112)).detector, YuNetDetector)
    assert not isinstance(photo_rule("face").detector, YuNetDetector)
    assert not isinstance(photo_rule("face", "haar", aligned_face_size=(112, 112)).detector, YuNetDetector)
