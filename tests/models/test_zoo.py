"""Published person Re-ID models by name, on the published files beside the project
(../shared/weights, brought in with `reid models add`): the Open Model Zoo's IRs through
OpenVINO, torchreid's OSNet through an ONNX export; skipped with a reason where absent."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from reid.decision import threshold_at_far
from reid.errors import ModelError
from reid.models import load_encoder
from reid.models.registry import add, cached_files
from reid.models.zoo import is_zoo_model, zoo_encoder
from tests.conftest import shared_weights

OMZ_REID = ("0277", "0286", "0287", "0288")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _people(market1501_mini: Path) -> tuple[list[np.ndarray], list[int]]:
    """Two cameras' crops of each of the first six query identities."""
    images, labels = [], []
    seen: dict[int, int] = {}
    for path in sorted((market1501_mini / "query").glob("*.jpg")):
        person = int(path.name[:4])
        if seen.get(person, 0) < 2 and (person in seen or len(seen) < 6):
            seen[person] = seen.get(person, 0) + 1
            images.append(np.asarray(Image.open(path).convert("RGB")))
            labels.append(person)
    return images, labels


def _separates(features: np.ndarray, labels: list[int]) -> float:
    """Share of crops whose nearest other crop is the same person."""
    distances = np.linalg.norm(features[:, None] - features[None], axis=2)
    np.fill_diagonal(distances, np.inf)
    nearest = distances.argmin(axis=1)
    return float(np.mean([labels[i] == labels[j] for i, j in enumerate(nearest)]))


@pytest.mark.parametrize("number", OMZ_REID)
def test_open_model_zoo_reid_by_name(number: str, cache: Path, market1501_mini: Path) -> None:
    pytest.importorskip("openvino", reason="the openvino extra is not installed")
    name = f"person-reidentification-retail-{number}"
    folder = shared_weights(f"omz/{name}")
    assert cached_files(name) is None
    assert add(name, folder) == cached_files(name)
    encoder = load_encoder(name)
    assert encoder.card.name == name and encoder.card.format == "openvino" and encoder.dim == 256
    assert encoder.card.channel_order == "bgr" and encoder.card.input_size == (256, 128) and encoder.threshold is None
    assert encoder.card.metrics["published_market1501_rank1"] > 80
    images, labels = _people(market1501_mini)
    features = encoder.embed(images)
    assert features.shape == (len(images), 256) and features.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(features, axis=1), 1.0, atol=1e-5)
    # One image embeds the same alone as in a batch (float32 inference).
    np.testing.assert_allclose(encoder.embed(images[:1])[0], features[0], atol=1e-5)
    assert _separates(features, labels) >= 0.75, "a published Re-ID model finds the same person among six"
    # Each of the four has its own fingerprint, so galleries never mix them.
    assert len(encoder.fingerprint) == 16


def test_the_four_open_model_zoo_models_have_their_own_fingerprints(cache: Path) -> None:
    pytest.importorskip("openvino", reason="the openvino extra is not installed")
    prints = set()
    for number in OMZ_REID:
        name = f"person-reidentification-retail-{number}"
        add(name, shared_weights(f"omz/{name}"))
        prints.add(zoo_encoder(name).fingerprint)
    assert len(prints) == 4


def test_bgr_matters_for_the_open_model_zoo_models(cache: Path, market1501_mini: Path) -> None:
    pytest.importorskip("openvino", reason="the openvino extra is not installed")
    name = "person-reidentification-retail-0277"
    add(name, shared_weights(f"omz/{name}"))
    encoder = zoo_encoder(name)
    images, _ = _people(market1501_mini)
    as_given = encoder.embed(images[:2])
    swapped = encoder.embed([image[:, :, ::-1].copy() for image in images[:2]])
    assert float(np.min(np.sum(as_given * swapped, axis=1))) < 0.999, "RGB input is turned into the model's BGR"


def test_osnet_onnx_export_by_name(cache: Path, market1501_mini: Path) -> None:
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    export = shared_weights("osnet_x0_25_msmt17.onnx")
    add("osnet_x0_25.msmt17-onnx", export)
    encoder = load_encoder("osnet_x0_25.msmt17-onnx")
    assert encoder.dim == 512 and encoder.card.channel_order == "rgb" and encoder.card.mean == (0.485, 0.456, 0.406)
    assert encoder.card.name == "osnet_x0_25.msmt17-onnx" and encoder.card.metrics["published_msmt17_rank1"] == 61.4
    # Calibrated on people this MSMT17 model never saw; --far reads the quantiles.
    assert encoder.threshold == 0.6249 and "held out" in encoder.card.threshold_source
    assert threshold_at_far(encoder.card.impostor_quantiles, 1e-3) == pytest.approx(0.625, abs=1e-3)
    images, labels = _people(market1501_mini)
    assert _separates(encoder.embed(images), labels) >= 0.75


def test_a_model_not_in_the_cache_is_one_line_naming_reid_models_add(cache: Path) -> None:
    with pytest.raises(ModelError) as info:
        load_encoder("osnet_x0_25.msmt17-onnx")
    assert "\n" not in str(info.value) and "reid models add osnet_x0_25.msmt17-onnx FILE" in str(info.value)


def test_only_reid_models_are_encoders(cache: Path) -> None:
    assert is_zoo_model("person-reidentification-retail-0288") and not is_zoo_model("yolox_nano.coco")
    with pytest.raises(ModelError, match="yolox_nano.coco is a person-detector, not a person Re-ID model"):
        load_encoder("yolox_nano.coco")


def test_a_torchreid_checkpoint_by_name_is_imported_once_into_the_cache(cache: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from reid.models.osnet import OSNet

    torch.manual_seed(0)
    checkpoint = tmp_path / "osnet_x0_25_market.pth"
    torch.save(OSNet("osnet_x0_25", num_classes=751).state_dict(), checkpoint)
    add("osnet_x0_25.market1501", checkpoint)
    encoder = load_encoder("osnet_x0_25.market1501", device="cpu")
    assert encoder.card.name == "osnet_x0_25.market1501" and encoder.card.neck == "fc" and encoder.dim == 512
    assert (cache / "osnet_x0_25.market1501" / "model" / "card.json").is_file()
    again = load_encoder("osnet_x0_25.market1501", device="cpu")
    assert again.fingerprint == encoder.fingerprint
    image = np.random.default_rng(0).integers(0, 256, (128, 64, 3), dtype=np.uint8)
    np.testing.assert_allclose(again.embed([image]), encoder.embed([image]), atol=1e-6)


def test_a_fastreid_release_file_is_checked_recorded_and_imported_exactly(cache: Path, tmp_path: Path) -> None:
    from test_imports import FastReidBaseline, saved

    from reid.models.pretrained import resolve_start

    checkpoint = saved(FastReidBaseline().eval(), tmp_path / "market_bot_R50.pth")
    (path,) = add("fastreid_bot_r50.market1501", checkpoint)
    assert path.name == "market_bot_R50.pth" and path.with_name(path.name + ".sha256").is_file()
    encoder = load_encoder("fastreid_bot_r50.market1501", device="cpu")
    card = encoder.card
    assert (card.name, card.architecture, card.embedding_dim, card.stem_pool, card.neck) == (
        "fastreid_bot_r50.market1501", "resnet50", 2048, "ceil", "bnneck",
    )
    assert card.metrics["published_market1501_mAP"] == 86.1 and encoder.threshold is None
    # The same name starts training (`reid train --pretrained NAME`).
    start = resolve_start("resnet50", "fastreid_bot_r50.market1501")
    assert start is not None and start.format == "fastreid"


def test_a_published_model_is_calibrated_through_a_folder_holding_its_card(
    cache: Path, tmp_path: Path, market1501_mini: Path
) -> None:
    pytest.importorskip("openvino", reason="the openvino extra is not installed")
    from reid.models import save_card
    from reid.pipeline.calibrate import calibrate_model

    name = "person-reidentification-retail-0288"
    add(name, shared_weights(f"omz/{name}"))
    folder = tmp_path / "omz-0288"
    save_card(load_encoder(name).card, folder)
    paths = sorted((market1501_mini / "query").glob("*.jpg"))[:12]
    lines = [f"{a.name},{b.name},{int(a.name[:4] == b.name[:4])}" for i, a in enumerate(paths) for b in paths[i + 1:]]
    (tmp_path / "pairs.csv").write_text("\n".join(lines) + "\n")
    result = calibrate_model(folder, tmp_path / "pairs.csv", market1501_mini / "query", target_far=None)
    encoder = load_encoder(folder)
    assert encoder.card.name == name and encoder.threshold == pytest.approx(result.choice.threshold)
    assert encoder.fingerprint == load_encoder(name).fingerprint and encoder.card.impostor_quantiles
    # A card of other files is refused by its fingerprint.
    other = tmp_path / "other"
    save_card(replace(encoder.card, fingerprint="0" * 16), other)
    with pytest.raises(ModelError, match="does not describe the cached files of person-reidentification-retail-0288"):
        load_encoder(other)


def test_every_shipped_threshold_source_names_what_was_measured_not_a_script() -> None:
    from reid.models import dlib_face, sface
    from reid.models.zoo import CALIBRATED

    sources = [sface.THRESHOLD_SOURCE, dlib_face.THRESHOLD_SOURCE, *(c.source for c in CALIBRATED.values())]
    for source in sources:
        assert "benchmarks/" not in source and ".py" not in source, source
    for source in (sface.THRESHOLD_SOURCE, *(c.source for c in CALIBRATED.values())):
        # What was measured: the pairs counted, and the rates in the one form every command prints.
        assert "impostor" in source and "%" in source and "FAR 0.0" not in source, source
