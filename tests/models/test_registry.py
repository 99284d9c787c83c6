"""The pretrained registry: hashes, the cache, offline errors, and the two ImageNet
artefacts from PyPI wheels placed on their architectures."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from reid.cli import app
from reid.errors import ModelError
from reid.models import ReidNet
from reid.models.backbones import timm_model, torchvision_model
from reid.models.checkpoints import artefact_state
from reid.models.registry import ARTEFACTS, KINDS, Artefact, artefact_path, cached, fetch, fetch_artefact, file_sha256

MILITARY_UNIFORM = 652  # ImageNet class of grace_hopper.jpg


def test_every_entry_is_described() -> None:
    assert len(ARTEFACTS) >= 20
    for artefact in ARTEFACTS.values():
        assert artefact.kind in KINDS
        assert artefact.licence and artefact.description and artefact.origin
        assert artefact.layout in (
            "torchvision", "torchreid", "efficientnet-lite0-ordered", "mobilenetv2-ordered", "tensorflow-frozen-graph",
            "onnx",
        )
        if artefact.source == "wheel":
            assert len(artefact.sha256) == 64 and artefact.member and "==" in artefact.location
            assert not artefact.rewrite or len(artefact.published_sha256) == 64
        if artefact.source == "torchvision":
            assert artefact.sha256 and artefact.filename.endswith(f"-{artefact.sha256}.pth")
    osnets = [a for a in ARTEFACTS.values() if a.architecture.startswith("osnet")]
    assert {a.kind for a in osnets} == {"imagenet-backbone", "person-reid"}
    assert all(a.location.startswith("https://drive.google.com/") for a in osnets)
    assert ARTEFACTS["osnet_x1_0.market1501"].classes == 751


def test_cache_location_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "elsewhere"))
    artefact = ARTEFACTS["efficientnet_lite0.imagenet"]
    assert artefact_path(artefact) == tmp_path / "elsewhere" / artefact.name / artefact.filename


def test_corrupt_cached_file_is_detected_and_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path))
    artefact = ARTEFACTS["efficientnet_lite0.imagenet"]
    path = fetch(artefact.name)
    assert file_sha256(path) == artefact.sha256
    path.write_bytes(b"truncated download")
    assert cached(artefact) is None
    assert fetch(artefact.name) == path
    assert file_sha256(path) == artefact.sha256
    assert not list(path.parent.glob(".*.tmp-*")), "an atomic write leaves no temporary file"


def test_unknown_name_is_one_line() -> None:
    with pytest.raises(ModelError, match="unknown pretrained artefact 'resnet9.imagenet'"):
        fetch("resnet9.imagenet")


def test_url_artefact_offline_error_names_it_and_the_manual_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path))
    # The .invalid top-level domain never resolves (RFC 2606), so this is offline anywhere.
    artefact = dataclasses.replace(ARTEFACTS["osnet_x0_25.imagenet"], name="osnet_x0_25.test", location="https://weights.invalid/osnet.pth")
    with pytest.raises(ModelError) as info:
        fetch_artefact(artefact)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("cannot fetch osnet_x0_25.test from https://weights.invalid/osnet.pth")
    assert str(artefact_path(artefact)) in message
    assert not artefact_path(artefact).exists()


def test_google_drive_artefact_fetches_or_says_how_to_place_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path))
    artefact = ARTEFACTS["osnet_x0_25.market1501"]
    try:
        path = fetch(artefact.name)
    except ModelError as exc:
        message = str(exc)
        assert "\n" not in message and "drive.google.com" in message and str(artefact_path(artefact)) in message
    else:
        # With internet: the first download's hash is recorded and checked from then on.
        assert path.with_name(path.name + ".sha256").read_text().strip() == file_sha256(path)


def test_torchvision_artefact_offline_or_verified() -> None:
    artefact = ARTEFACTS["resnet18.imagenet"]
    try:
        path = fetch(artefact.name)
    except ModelError as exc:
        assert "download.pytorch.org" in str(exc) and "place the file by hand" in str(exc)
    else:
        assert file_sha256(path).startswith(artefact.sha256)


def test_wrong_hash_from_a_source_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, imagenet_wheels: dict[str, Path]) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path))
    artefact = dataclasses.replace(ARTEFACTS["efficientnet_lite0.imagenet"], sha256="0" * 64)
    with pytest.raises(ModelError, match="has SHA-256 .* expected 0000"):
        fetch_artefact(artefact)
    assert not artefact_path(artefact).exists()


def grace_hopper(size: int = 224) -> torch.Tensor:
    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    image = np.asarray(Image.open(path).convert("RGB").resize((size, size), Image.BILINEAR), dtype=np.float32) / 255.0
    return torch.from_numpy(image).permute(2, 0, 1)[None]


def test_efficientnet_lite0_classifies_a_real_photo(imagenet_wheels: dict[str, Path]) -> None:
    artefact: Artefact = ARTEFACTS["efficientnet_lite0.imagenet"]
    model = timm_model("efficientnet_lite0").eval()
    model.load_state_dict(artefact_state(artefact, imagenet_wheels[artefact.name]))
    mean, std = torch.tensor(artefact.mean)[:, None, None], torch.tensor(artefact.std)[:, None, None]
    with torch.no_grad():
        top5 = model((grace_hopper() - mean) / std).topk(5).indices[0].tolist()
    assert MILITARY_UNIFORM in top5


def test_mobilenet_v2_mapping_places_every_tensor(imagenet_wheels: dict[str, Path]) -> None:
    artefact = ARTEFACTS["mobilenet_v2.imagenet-deepsort"]
    state = artefact_state(artefact, imagenet_wheels[artefact.name])
    features = {k: v for k, v in torchvision_model("mobilenet_v2").state_dict().items() if k.startswith("features.")}
    assert list(state) == list(features)
    net = ReidNet("mobilenet_v2", num_classes=3, pretrained=artefact.name)
    for key, tensor in state.items():
        assert torch.equal(net.state_dict()["backbone." + key.removeprefix("features.")], tensor), key
    # Trained BatchNorm statistics, not the fresh (0, 1) ones.
    variances = [v for k, v in state.items() if k.endswith("running_var")]
    means = [v for k, v in state.items() if k.endswith("running_mean")]
    assert len(variances) == 52
    assert all(not torch.allclose(v, torch.ones_like(v)) for v in variances)
    assert all(m.abs().sum() > 0 for m in means)


def test_imagenet_start_is_taken_from_the_cache(imagenet_wheels: dict[str, Path]) -> None:
    net = ReidNet("efficientnet_lite0", num_classes=4, pretrained="imagenet")
    assert net.pretrained_note.startswith("started from efficientnet_lite0.imagenet")
    reference = artefact_state(ARTEFACTS["efficientnet_lite0.imagenet"], imagenet_wheels["efficientnet_lite0.imagenet"])
    assert torch.equal(net.backbone.conv_stem.weight, reference["conv_stem.weight"])


def test_imagenet_never_starts_silently_from_random() -> None:
    """Offline, --pretrained imagenet stops with one line that says how to train from scratch."""
    try:
        net = ReidNet("resnet34", num_classes=2, pretrained="imagenet")
    except ModelError as exc:
        assert "\n" not in str(exc) and str(exc).endswith("or train from scratch with --pretrained none")
    else:
        assert net.pretrained_note.startswith("started from resnet34.imagenet")


def test_models_cli(imagenet_wheels: dict[str, Path], tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["models", "list", "--json", str(tmp_path / "r.json")])
    assert listed.exit_code == 0, listed.output
    rows = {row["name"]: row for row in json.loads((tmp_path / "r.json").read_text())}
    assert rows["efficientnet_lite0.imagenet"]["cached"] is True
    assert rows["osnet_x1_0.market1501"]["licence"].startswith("MIT")
    where = runner.invoke(app, ["models", "path", "mobilenet_v2.imagenet-deepsort"])
    assert where.exit_code == 0 and where.output.strip() == str(imagenet_wheels["mobilenet_v2.imagenet-deepsort"])
    bad = runner.invoke(app, ["models", "fetch", "nothing.here"])
    assert bad.exit_code == 1 and len(bad.output.strip().splitlines()) == 1


def test_unpublished_hash_is_recorded_at_first_download_and_held_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "published.pth"
    torch.save({"w": torch.arange(4.0)}, source)
    artefact = dataclasses.replace(ARTEFACTS["osnet_x0_25.imagenet"], name="local.test", location=source.as_uri(), sha256="")
    path = fetch_artefact(artefact)
    recorded = path.with_name(path.name + ".sha256")
    assert recorded.read_text().strip() == file_sha256(source) == file_sha256(path)
    path.write_bytes(b"bit rot")
    assert fetch_artefact(artefact) == path and file_sha256(path) == file_sha256(source)
    # The publisher replaces the file: a refetch no longer matches what was first recorded.
    torch.save({"w": torch.zeros(4)}, source)
    path.write_bytes(b"bit rot")
    with pytest.raises(ModelError, match="expected"):
        fetch_artefact(artefact)
