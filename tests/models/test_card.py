"""Model cards: every field validated on load, and a fingerprint over everything that
changes an embedding."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from bad_inputs import good_jpg
from typer.testing import CliRunner

from reid.cli.app import app
from reid.errors import GalleryError, ModelError
from reid.gallery import EmbeddingModel, Gallery
from reid.models import ModelCard, build_network, load_card, load_encoder, load_model, save_card, save_model
from reid.models.card import (
    CARD_FILE,
    EMBEDDING_FIELDS,
    LATER_EMBEDDING_FIELDS,
    WEIGHTS_FILE,
    file_fingerprint,
    seal_card,
    validate_card,
)


def tiny_card(**changes: Any) -> ModelCard:
    values: dict[str, Any] = dict(
        name="t", architecture="resnet18", embedding_dim=32, input_size=(64, 32), num_classes=5, threshold=0.7
    )
    values.update(changes)
    return ModelCard(**values)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    card = tiny_card()
    folder = tmp_path_factory.mktemp("card") / "m"
    save_model(build_network(card), card, folder)
    return folder


def copy_model(saved: Path, to: Path, **edits: Any) -> Path:
    """A copy of the saved model folder with ``edits`` written into its card.json."""
    to.mkdir()
    (to / WEIGHTS_FILE).write_bytes((saved / WEIGHTS_FILE).read_bytes())
    data = json.loads((saved / CARD_FILE).read_text())
    data.update(edits)
    (to / CARD_FILE).write_text(json.dumps(data))
    return to


# One changed value per field the fingerprint covers: each changes what the encoder returns.
EDITS = {
    "format": "onnx",
    "architecture": "resnet34",
    "embedding_dim": 16,
    "input_size": [128, 64],
    "mean": [0.5, 0.5, 0.5],
    "std": [0.5, 0.5, 0.5],
    "channel_order": "bgr",
    "pooling": "gem",
    "neck": "none",
    "last_stride": 2,
    "normalized_output": False,
    "stem_pool": "ceil",
}


def test_every_embedding_field_is_covered() -> None:
    assert set(EDITS) == set(EMBEDDING_FIELDS) | set(LATER_EMBEDDING_FIELDS)


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_edited_card_is_refused(saved: Path, tmp_path: Path, name: str) -> None:
    folder = copy_model(saved, tmp_path / "m", **{name: EDITS[name]})
    with pytest.raises(ModelError, match=r"m/card\.json: card fields that change embeddings .* differ") as caught:
        load_model(folder)
    assert "\n" not in str(caught.value)


def test_fields_outside_the_fingerprint_may_change(saved: Path, tmp_path: Path) -> None:
    folder = copy_model(saved, tmp_path / "m", threshold=0.5, name="renamed", metrics={"note": "edited"})
    _, card = load_model(folder)
    assert card.threshold == 0.5 and card.fingerprint == load_model(saved)[1].fingerprint


BAD_VALUES = [
    ("embedding_dim", -4, "embedding_dim"),
    ("embedding_dim", "512", "embedding_dim"),
    ("embedding_dim", True, "embedding_dim"),
    ("input_size", [100000, 100000], r"input_size\[0\]"),
    ("input_size", [256, 128, 3], "input_size"),
    ("input_size", [0, 128], r"input_size\[0\]"),
    ("mean", [0.5, 0.5], r"mean\[2\]"),
    ("mean", [0.5, "x", 0.5], r"mean\[1\]"),
    ("std", [0.2, 0.0, 0.2], r"std\[1\]"),
    ("threshold", "0.5", "threshold"),
    ("threshold", -0.1, "threshold"),
    ("threshold", 2.5, "threshold"),
    ("channel_order", "RGB", "channel_order"),
    ("last_stride", 3, "last_stride"),
    ("pooling", "max", "pooling"),
    ("num_classes", -1, "num_classes"),
    ("fingerprint", "not-a-fingerprint", "fingerprint"),
    ("normalized_output", "yes", "normalized_output"),
]


@pytest.mark.parametrize(("name", "value", "where"), BAD_VALUES)
def test_out_of_range_fields_are_refused_naming_card_and_field(
    saved: Path, tmp_path: Path, name: str, value: Any, where: str
) -> None:
    folder = copy_model(saved, tmp_path / "m", **{name: value})
    for load in (load_card, load_encoder):
        with pytest.raises(ModelError, match=rf"m/card\.json: field {where}:") as caught:
            load(folder)
        assert "\n" not in str(caught.value)


def test_a_nan_threshold_in_the_file_is_refused(saved: Path, tmp_path: Path) -> None:
    folder = copy_model(saved, tmp_path / "m")
    text = (folder / CARD_FILE).read_text().replace('"threshold": 0.7', '"threshold": NaN')
    assert "NaN" in text
    (folder / CARD_FILE).write_text(text)
    with pytest.raises(ModelError, match=r"card\.json: field threshold: input should be a finite number"):
        load_card(folder)


def test_a_huge_value_is_shortened_in_the_message() -> None:
    with pytest.raises(ModelError) as caught:
        validate_card({"name": "x", "architecture": "a", "embedding_dim": "9" * 10_000}, "card.json")
    assert len(str(caught.value)) < 200


def test_a_card_without_fingerprint_accepts_no_weights(saved: Path, tmp_path: Path) -> None:
    other = tiny_card(embedding_dim=32, num_classes=5)
    save_model(build_network(other), other, tmp_path / "other")
    folder = copy_model(saved, tmp_path / "m", fingerprint="")
    (folder / WEIGHTS_FILE).write_bytes((tmp_path / "other" / WEIGHTS_FILE).read_bytes())
    with pytest.raises(ModelError, match="model card has no fingerprint"):
        load_model(folder)


def test_other_weights_under_a_card_are_refused(saved: Path, tmp_path: Path) -> None:
    other = tiny_card()
    save_model(build_network(other), other, tmp_path / "other")
    folder = copy_model(saved, tmp_path / "m")
    (folder / WEIGHTS_FILE).write_bytes((tmp_path / "other" / WEIGHTS_FILE).read_bytes())
    with pytest.raises(ModelError, match=r"weights\.pt: weights fingerprint \w+ does not match the card's"):
        load_model(folder)


def test_a_card_of_the_weights_only_fingerprint_is_refused_and_its_galleries_open_with_a_sealed_card(
    saved: Path, tmp_path: Path
) -> None:
    weights = file_fingerprint(saved / WEIGHTS_FILE)
    data = json.loads((saved / CARD_FILE).read_text())
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / WEIGHTS_FILE).write_bytes((saved / WEIGHTS_FILE).read_bytes())
    # Written before version 2 (no version), or a version-2 card rewritten to version 1
    # with an embedding field changed: neither can vouch for its fields.
    old = {k: v for k, v in data.items() if k not in ("fingerprint_version", "weights_fingerprint")}
    downgraded = {**data, "fingerprint_version": 1, "fingerprint": weights, "std": [0.5, 0.5, 0.5]}
    for card in (old | {"fingerprint": weights}, downgraded):
        (folder / CARD_FILE).write_text(json.dumps(card))
        with pytest.raises(ModelError) as caught:
            load_encoder(folder, device="cpu")
        line = str(caught.value)
        assert line.startswith(str(folder / CARD_FILE)) and "fingerprint version 1 vouches for the weights alone" in line
        assert "\n" not in line
        photos = [str(good_jpg(tmp_path / f"{n}.jpg", seed=n)) for n in range(2)]
        result = CliRunner().invoke(app, ["verify", *photos, "--model", str(folder)])
        assert result.exit_code == 1 and "fingerprint version 1" in result.output and result.output.count("\n") == 1

    # A gallery made before the fingerprint covered the card recorded the weights' alone,
    # and opens with the model's version-2 card.
    legacy = Gallery.create(tmp_path / "legacy", EmbeddingModel("t", weights, 32))
    legacy.close()
    with Gallery.open(tmp_path / "legacy") as gallery:
        gallery.check_model(load_encoder(saved, device="cpu").card)


def test_a_gallery_refuses_a_model_whose_card_changed(saved: Path, tmp_path: Path) -> None:
    encoder = load_encoder(saved, device="cpu")
    Gallery.create(tmp_path / "g", encoder.card).close()
    # Even a card edited together with its fingerprint (so that it loads) is another model.
    edited = copy_model(saved, tmp_path / "m", last_stride=2)
    resealed = seal_card(load_card(edited), file_fingerprint(edited / WEIGHTS_FILE))
    (edited / CARD_FILE).write_text(json.dumps(resealed.to_dict()))
    other = load_encoder(edited, device="cpu")
    assert other.card.weights_fingerprint == encoder.card.weights_fingerprint
    with Gallery.open(tmp_path / "g") as gallery:
        gallery.check_model(encoder.card)
        with pytest.raises(GalleryError, match="gallery was made with model"):
            gallery.check_model(other.card)


def test_a_link_planted_as_the_temporary_card_is_not_followed(saved: Path, tmp_path: Path) -> None:
    folder = copy_model(saved, tmp_path / "m")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (folder / f".{CARD_FILE}.tmp-{os.getpid()}").symlink_to(victim)
    save_card(load_card(folder), folder)
    assert victim.read_text() == "keep" and load_card(folder).name == "t"
    assert not (folder / f".{CARD_FILE}.tmp-{os.getpid()}").exists()


@pytest.mark.parametrize("shape", ["deep", "huge", "deep-in-a-field"])
def test_a_deep_or_huge_card_is_refused_before_it_is_parsed(saved: Path, tmp_path: Path, shape: str) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / WEIGHTS_FILE).write_bytes((saved / WEIGHTS_FILE).read_bytes())
    card = folder / CARD_FILE
    if shape == "deep":
        card.write_text("[" * 100_000 + "]" * 100_000)
        problem = "a model card nested deeper than 32 levels"
    elif shape == "deep-in-a-field":
        data = json.loads((saved / CARD_FILE).read_text())
        data["training"] = {"history": json.loads("[" * 40 + "1" + "]" * 40)}
        card.write_text(json.dumps(data))
        problem = "a model card nested deeper than 32 levels"
    else:
        with open(card, "wb") as handle:
            handle.truncate(30 << 30)
        problem = "32,212,254,720 bytes, more than the 67,108,864 a model card may have"
    with pytest.raises(ModelError) as caught:
        load_model(folder)
    assert str(caught.value) == f"{card}: {problem}; not read"
