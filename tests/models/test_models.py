from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from reid.errors import ConfigError, ModelError
from reid.models import ModelCard, ReidNet, build_network, load_card, load_encoder, load_model, save_model
from reid.models.card import WEIGHTS_FILE, file_fingerprint, seal_card

from starting import started


def tiny_card(**changes: object) -> ModelCard:
    values = dict(name="t", architecture="resnet18", embedding_dim=32, input_size=(64, 32), num_classes=5)
    values.update(changes)
    return ModelCard(**values)


def test_bnneck_outputs_and_last_stride() -> None:
    torch.manual_seed(0)
    net = ReidNet("resnet18", num_classes=7, embedding_dim=32)
    net.train()
    out = net(torch.randn(4, 3, 64, 32))
    assert out.feature.shape == out.embedding.shape == (4, 32) and out.logits.shape == (4, 7)
    assert not net.bnneck.bias.requires_grad
    net.eval()
    assert net(torch.randn(2, 3, 64, 32)).logits is None
    fmap = net.backbone(torch.randn(1, 3, 64, 32))
    assert fmap.shape[-2:] == (4, 2), "last stride 1 keeps a 1/16 feature map"


def test_gem_pooling_and_unknown_options() -> None:
    net = ReidNet("resnet18", num_classes=0, pooling="gem").eval()
    assert net(torch.rand(1, 3, 64, 32)).embedding.shape == (1, 512)
    with pytest.raises(ConfigError, match="unknown pooling"):
        ReidNet("resnet18", 2, pooling="max")
    with pytest.raises(ConfigError, match="unknown architecture 'vgg'"):
        ReidNet("vgg", 2)


def test_missing_pretrained_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="pretrained weights file not found"):
        started(ReidNet("resnet18", 2), str(tmp_path / "none.pth"))


def test_local_weights_file_is_loaded(tmp_path: Path) -> None:
    import torchvision

    reference = torchvision.models.resnet18(weights=None)
    torch.save(reference.state_dict(), tmp_path / "r18.pth")
    net = started(ReidNet("resnet18", 2), str(tmp_path / "r18.pth"))
    assert torch.equal(net.backbone[0].weight, reference.conv1.weight)
    assert "r18.pth" in net.pretrained_note
    assert "its classifier of 1000 classes dropped" in net.pretrained_note


def test_model_folder_round_trip(tmp_path: Path) -> None:
    card = tiny_card()
    net = build_network(card)
    saved = save_model(net, card, tmp_path / "m")
    assert len(saved.fingerprint) == 16
    loaded, loaded_card = load_model(tmp_path / "m")
    assert loaded_card.to_dict() == saved.to_dict()
    for key, value in net.state_dict().items():
        assert torch.equal(value, loaded.state_dict()[key])
    encoder = load_encoder(tmp_path / "m")
    images = [np.random.default_rng(i).integers(0, 255, (100, 40, 3), dtype=np.uint8) for i in range(3)]
    emb = encoder.embed(images)
    assert emb.dtype == np.float32 and emb.shape == (3, 32)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
    assert encoder.embed([]).shape == (0, 32)


def test_card_and_weights_errors(tmp_path: Path) -> None:
    card = tiny_card()
    save_model(build_network(card), card, tmp_path / "m")
    with pytest.raises(ModelError, match="model folder not found"):
        load_model(tmp_path / "missing")
    with pytest.raises(ModelError, match="no such model folder"):
        load_encoder(tmp_path / "missing")

    other = tiny_card(embedding_dim=16)
    save_model(build_network(other), other, tmp_path / "o")
    (tmp_path / "m" / WEIGHTS_FILE).write_bytes((tmp_path / "o" / WEIGHTS_FILE).read_bytes())
    with pytest.raises(ModelError, match="does not match the card's"):
        load_model(tmp_path / "m")

    data = json.loads((tmp_path / "o" / "card.json").read_text())
    data["fingerprint"] = ""
    (tmp_path / "o" / "card.json").write_text(json.dumps(data))
    with pytest.raises(ModelError, match="o/card.json: model card has no fingerprint"):
        load_model(tmp_path / "o")

    resealed = seal_card(tiny_card(embedding_dim=64), file_fingerprint(tmp_path / "o" / WEIGHTS_FILE))
    (tmp_path / "o" / "card.json").write_text(json.dumps(resealed.to_dict()))
    with pytest.raises(ModelError, match="weights do not fit resnet18"):
        load_model(tmp_path / "o")

    (tmp_path / "o" / WEIGHTS_FILE).write_bytes(b"garbage")
    with pytest.raises(ModelError, match="not a readable PyTorch state_dict"):
        load_model(tmp_path / "o")
    (tmp_path / "o" / "card.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_card(tmp_path / "o")
    (tmp_path / "o" / "card.json").write_text("{}")
    with pytest.raises(ModelError, match="lacks name, architecture, embedding_dim"):
        load_card(tmp_path / "o")
