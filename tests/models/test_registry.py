"""The pretrained registry: hashes, the cache, offline errors, and the two ImageNet
artefacts from PyPI wheels placed on their architectures."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
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
from reid.models.formats import artefact_state
from reid.engine.demo import demo_config
from reid.models import registry
from reid.models.osnet import OSNet
from reid.models.registry import (
    ARTEFACTS,
    KINDS,
    RUNTIMES,
    STALE_PARTIAL_SECONDS,
    SOURCES,
    Artefact,
    artefact_path,
    cache_state,
    cached,
    fetch,
    fetch_artefact,
    file_sha256,
    remove_fetch_leftovers,
)

from starting import started

ROOT = Path(__file__).resolve().parents[2]
MILITARY_UNIFORM = 652  # ImageNet class of grace_hopper.jpg


def test_every_entry_is_described() -> None:
    assert len(ARTEFACTS) >= 20
    for artefact in ARTEFACTS.values():
        assert artefact.kind in KINDS
        assert artefact.licence and artefact.description and artefact.origin
        assert artefact.layout in RUNTIMES and artefact.runtime in ("torch", "onnxruntime", "openvino", "opencv")
        assert len(artefact.input_size) == 2 and artefact.channel_order in ("rgb", "bgr")
        if artefact.source == "wheel":
            assert len(artefact.sha256) == 64 and artefact.member and "==" in artefact.location
            assert not artefact.rewrite or len(artefact.published_sha256) == 64
        if artefact.source == "torchvision":
            assert artefact.sha256 and artefact.filename.endswith(f"-{artefact.sha256}.pth")
    osnets = [a for a in ARTEFACTS.values() if a.architecture.startswith("osnet") and a.source == "url"]
    assert {a.kind for a in osnets} == {"imagenet-backbone", "person-reid"}
    assert all(a.location.startswith("https://drive.google.com/") for a in osnets)
    assert ARTEFACTS["osnet_x1_0.market1501"].classes == 751


def test_each_source_is_known_in_one_table() -> None:
    fields = dataclasses.asdict(ARTEFACTS["resnet18.imagenet"])
    with pytest.raises(ValueError, match="source 'ftp' is not one of torchvision, url, release, wheel"):
        Artefact(**{**fields, "source": "ftp"})
    assert set(SOURCES) == {a.source for a in ARTEFACTS.values()}
    for artefact in ARTEFACTS.values():
        assert artefact.in_torch_hub == (artefact.source == "torchvision")
        member = artefact.installed_member()
        if artefact.source != "wheel":
            assert member is None  # no installed package supplies a torchvision or URL file
        elif member is not None:
            assert member.is_file() and member.as_posix().endswith(artefact.member)


def test_cache_location_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "elsewhere"))
    artefact = ARTEFACTS["efficientnet_lite0.imagenet"]
    assert artefact_path(artefact) == tmp_path / "elsewhere" / artefact.name / artefact.filename


def test_a_cached_file_failing_its_check_is_named_and_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path))
    artefact = ARTEFACTS["efficientnet_lite0.imagenet"]
    path = fetch(artefact.name)
    assert file_sha256(path) == artefact.sha256
    path.write_bytes(b"truncated download")
    assert cached(artefact) is None and cache_state(artefact) == "check failed"
    with pytest.raises(ModelError) as info:
        fetch(artefact.name)
    message = str(info.value)
    assert message.startswith(f"{path}: is not {artefact.name} (18 bytes with SHA-256 ")
    assert f"expected SHA-256 {artefact.sha256}" in message and artefact.location in message and "left as it is" in message
    assert path.read_bytes() == b"truncated download", "a file the program did not write is never replaced"
    path.unlink()
    assert fetch(artefact.name) == path and file_sha256(path) == artefact.sha256
    assert not list(path.parent.glob(".*.tmp-*")), "an atomic write leaves no temporary file"


def test_a_torchvision_file_placed_by_hand_with_another_hash_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    for name in ("resnet18.imagenet", "mobilenet_v2.imagenet"):
        artefact = ARTEFACTS[name]
        path = artefact_path(artefact)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"placed by hand")
        for _ in range(2):
            with pytest.raises(ModelError, match=f"expected a SHA-256 starting {artefact.sha256}"):
                fetch(name)
        assert path.read_bytes() == b"placed by hand"


def test_stale_temporaries_of_a_killed_fetch_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    artefact = ARTEFACTS["efficientnet_lite0.imagenet"]
    folder = artefact_path(artefact).parent
    folder.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = folder / f".{artefact.filename}.tmp-{int(dead.stdout)}"
    stale.write_bytes(b"half")
    mine = folder / "notes.txt"
    mine.write_text("mine")
    fetch(artefact.name)
    assert not stale.exists() and mine.read_text() == "mine"
    torchvision_artefact = ARTEFACTS["resnet18.imagenet"]
    hub = artefact_path(torchvision_artefact).parent
    hub.mkdir(parents=True)
    old = hub / f"{torchvision_artefact.filename}.{'a' * 32}.partial"
    fresh = hub / f"{torchvision_artefact.filename}.{'b' * 32}.partial"
    other = hub / f"{torchvision_artefact.filename}.mine.partial"
    for leftover in (old, fresh, other):
        leftover.write_bytes(b"part")
    os.utime(old, (time.time() - 2 * STALE_PARTIAL_SECONDS,) * 2)
    os.utime(other, (time.time() - 2 * STALE_PARTIAL_SECONDS,) * 2)
    assert remove_fetch_leftovers(torchvision_artefact) == [old]
    assert fresh.exists() and other.exists()


def test_huge_cached_files_are_never_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path))
    hashed: list[Path] = []
    monkeypatch.setattr(registry, "file_sha256", lambda path: hashed.append(path) or "0" * 64)
    for name in ("efficientnet_lite0.imagenet", "osnet_x0_25.imagenet"):
        path = artefact_path(ARTEFACTS[name])
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            handle.truncate(30 << 30)  # sparse: 30 GB on paper, nothing on disk
        assert cached(ARTEFACTS[name]) is None and cache_state(ARTEFACTS[name]) == "check failed"
        with pytest.raises(ModelError, match="larger than any artefact"):
            fetch(name)
    demo_config(verify=False)
    assert hashed == []


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
    net = started(ReidNet("mobilenet_v2", num_classes=3), artefact.name)
    for key, tensor in state.items():
        assert torch.equal(net.state_dict()["backbone." + key.removeprefix("features.")], tensor), key
    # Trained BatchNorm statistics, not the fresh (0, 1) ones.
    variances = [v for k, v in state.items() if k.endswith("running_var")]
    means = [v for k, v in state.items() if k.endswith("running_mean")]
    assert len(variances) == 52
    assert all(not torch.allclose(v, torch.ones_like(v)) for v in variances)
    assert all(m.abs().sum() > 0 for m in means)


def test_imagenet_start_is_taken_from_the_cache(imagenet_wheels: dict[str, Path]) -> None:
    net = started(ReidNet("efficientnet_lite0", num_classes=4), "imagenet")
    assert net.pretrained_note.startswith("started from efficientnet_lite0.imagenet")
    reference = artefact_state(ARTEFACTS["efficientnet_lite0.imagenet"], imagenet_wheels["efficientnet_lite0.imagenet"])
    assert torch.equal(net.backbone.conv_stem.weight, reference["conv_stem.weight"])


def test_imagenet_never_starts_silently_from_random() -> None:
    """Offline, --pretrained imagenet stops with one line that says how to train from scratch."""
    try:
        net = started(ReidNet("resnet34", num_classes=2), "imagenet")
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


def osnet_file(path: Path, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    torch.save(OSNet("osnet_x0_25", num_classes=10).state_dict(), path)
    return path


def test_unpublished_hash_is_recorded_once_the_file_checks_as_a_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "cache"))
    source = osnet_file(tmp_path / "published.pth")
    artefact = dataclasses.replace(ARTEFACTS["osnet_x0_25.imagenet"], name="local.test", location=source.as_uri(), sha256="")
    path = fetch_artefact(artefact)
    recorded = path.with_name(path.name + ".sha256")
    assert recorded.read_text().strip() == file_sha256(source) == file_sha256(path)
    path.write_bytes(b"bit rot")
    with pytest.raises(ModelError, match="expected SHA-256"):
        fetch_artefact(artefact)
    assert path.read_bytes() == b"bit rot"
    # A download that is not the architecture's checkpoint is never recorded.
    (tmp_path / "wrong.pth").write_bytes(b"")
    torch.save({"w": torch.arange(4.0)}, tmp_path / "wrong.pth")
    wrong = dataclasses.replace(artefact, name="wrong.test", location=(tmp_path / "wrong.pth").as_uri())
    with pytest.raises(ModelError, match="is not its checkpoint"):
        fetch_artefact(wrong)
    assert not artefact_path(wrong).exists()


@pytest.mark.parametrize("placed", ["truncated", "another network"])
def test_a_file_placed_by_hand_without_a_published_hash_is_checked_before_it_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, placed: str
) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "cache"))
    artefact = ARTEFACTS["osnet_x0_25.market1501"]
    path = artefact_path(artefact)
    path.parent.mkdir(parents=True)
    good = osnet_file(tmp_path / "good.pth")
    if placed == "truncated":
        path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    else:
        torch.save(torchvision_model("resnet18").state_dict(), path)
    before = path.read_bytes()
    assert cached(artefact) is None and cache_state(artefact) == "unchecked"
    with pytest.raises(ModelError) as info:
        fetch(artefact.name)
    assert str(info.value).startswith(f"{path}: is not {artefact.name} (") and "left as it is" in str(info.value)
    assert path.read_bytes() == before and not path.with_name(path.name + ".sha256").exists()
    listed = CliRunner().invoke(app, ["models", "list", "--json", str(tmp_path / "list.json")])
    assert listed.exit_code == 0, listed.output
    row = next(row for row in json.loads((tmp_path / "list.json").read_text()) if row["name"] == artefact.name)
    assert row["cached"] is False and row["cache_state"] == "unchecked"
    path.write_bytes(good.read_bytes())
    assert fetch(artefact.name) == path and cache_state(artefact) == "yes"


def test_a_file_an_installed_wheel_carries_is_listed_as_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Such a file is used offline (copied from the package on first use): never "no"."""
    artefact = ARTEFACTS["efficientnet_lite0.imagenet"]
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "cache"))
    if artefact.installed_member() is None:
        pytest.skip("the efficientnet_lite0 wheel is not installed")
    assert cache_state(artefact) == "installed"
    listed = CliRunner().invoke(app, ["models", "list", "--json", str(tmp_path / "list.json")])
    assert listed.exit_code == 0, listed.output
    row = next(row for row in json.loads((tmp_path / "list.json").read_text()) if row["name"] == artefact.name)
    assert row["cache_state"] == "installed"
    assert any(line.split()[:1] == [artefact.name] and line.split()[-1] == "installed" for line in listed.output.splitlines())


def test_models_show_names_the_detector_that_runs_a_detectors_file() -> None:
    shown = CliRunner().invoke(app, ["models", "show", "yolox_nano.coco"])
    assert shown.exit_code == 0, shown.output
    assert "run it with: --detector yolox-nano (or --detector yolox_nano.coco)" in shown.output.splitlines()
    shown = CliRunner().invoke(app, ["models", "show", "osnet_x0_25.msmt17"])
    assert shown.exit_code == 0 and "run it with" not in shown.output


def test_models_list_never_cuts_names_in_a_pipe() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "reid", "models", "list"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"},
        cwd=ROOT, timeout=600,
    )
    assert listed.returncode == 0, listed.stderr
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
    found = [line for line in listed.stdout.splitlines() if "osnet" in line]
    for name in ARTEFACTS:
        assert any(name in line.split() for line in listed.stdout.splitlines()), name
    assert len(found) >= 15


def test_paths_with_terminal_codes_are_printed_as_text(tmp_path: Path) -> None:
    cache = tmp_path / "cache\x1b[2J\x1b[31mred\x07"
    for args in (["models", "path", "osnet_x0_25.imagenet"], ["models", "fetch", "osnet_x0_25.imagenet"]):
        result = CliRunner().invoke(app, args, env={"REID_CACHE_DIR": str(cache)})
        assert "\x1b" not in result.output and "\x07" not in result.output
        assert "\\x1b[2J\\x1b[31mred\\x07" in result.output, result.output


def test_add_brings_a_single_file_artefact_and_refuses_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "cache"))
    artefact = ARTEFACTS["osnet_x0_25.imagenet"]
    wrong = tmp_path / "resnet18.pth"
    torch.save(torchvision_model("resnet18").state_dict(), wrong)
    result = CliRunner().invoke(app, ["models", "add", artefact.name, str(wrong)])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"{wrong}: refused as {artefact.name} (" in result.output and "left where it is" in result.output
    assert wrong.is_file() and not artefact_path(artefact).exists()
    good = osnet_file(tmp_path / "osnet.pth")
    (path,) = registry.add(artefact.name, good)
    assert path == artefact_path(artefact) and file_sha256(path) == file_sha256(good) and good.is_file()
    assert cache_state(artefact) == "yes"


def test_the_torchvision_files_stated_are_torchvisions_own() -> None:
    import torchvision

    from reid.models.registry import TORCHVISION_URLS

    for location, url in TORCHVISION_URLS.items():
        enum_name, _, member = location.partition(".")
        assert getattr(getattr(torchvision.models, enum_name), member).url == url, location
    assert {a.location for a in ARTEFACTS.values() if a.source == "torchvision"} == set(TORCHVISION_URLS)


@pytest.mark.parametrize(
    "env", [{}, {"TORCH_HOME": "/opt/th"}, {"XDG_CACHE_HOME": "/var/xc"}, {"TORCH_HOME": "~/th", "XDG_CACHE_HOME": "/x"}],
    ids=lambda e: " ".join(e) or "none",
)
def test_the_torch_hub_folder_is_torchs_own_without_loading_torch(env: dict[str, str]) -> None:
    base = {k: v for k, v in os.environ.items() if k not in ("TORCH_HOME", "XDG_CACHE_HOME")}
    probe = (
        "import sys\nfrom reid.models.registry import torch_hub_dir\nlight = torch_hub_dir()\n"
        "assert 'torch' not in sys.modules\nimport torch\nprint(light == __import__('pathlib').Path(torch.hub.get_dir()))"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env={**base, **env, "PYTHONPATH": str(root)},
        timeout=120, check=True,
    )
    assert done.stdout.strip() == "True"
