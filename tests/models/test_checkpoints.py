"""Checkpoints from elsewhere: every supported format imports and embeds exactly as the
network it came from; every bad file gives one line naming the file and the misfit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import zipfile
import warnings
from pathlib import Path

import pytest
import torch
import torchvision
from torch import nn
from typer.testing import CliRunner

from reid.cli import app
from reid.errors import ConfigError, ModelError
from reid.models import ReidNet, load_encoder, load_model
from reid.models.card import IMAGENET_MEAN
from reid.models import checkpoints
from reid.models.checkpoints import MAX_CHECKPOINT_MEMBERS, MAX_STATE_KEYS, read_state
from reid.models.imports import import_model
from reid.models.osnet import OSNet
from reid.paths import STAGING_MARK

from starting import started
from test_osnet import seeded

ARCH = "osnet_x0_25"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def torchreid_net() -> OSNet:
    """A torchreid-layout OSNet trained on 751 identities (seeded weights and BN statistics)."""
    net = OSNet(ARCH, num_classes=751)
    net.load_state_dict(seeded(net.state_dict()))
    return net.eval()


def images(seed: int = 3) -> torch.Tensor:
    return torch.randn(3, 3, 256, 128, generator=torch.Generator().manual_seed(seed))


FORMATS = {
    "bare": lambda state: state,
    "dataparallel": lambda state: {f"module.{k}": v for k, v in state.items()},
    "wrapped-state_dict": lambda state: {"state_dict": {f"module.{k}": v for k, v in state.items()}, "epoch": 60},
    "wrapped-model": lambda state: {"model": state, "optimizer": {}},
}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_torchreid_formats_import_with_the_same_embeddings(fmt: str, torchreid_net: OSNet, tmp_path: Path) -> None:
    torch.save(FORMATS[fmt](torchreid_net.state_dict()), tmp_path / "osnet.pth")
    card = import_model(tmp_path / "osnet.pth", ARCH, tmp_path / "model")
    assert (card.architecture, card.embedding_dim, card.neck, card.num_classes) == (ARCH, 512, "fc", 0)
    assert card.input_size == (256, 128) and card.mean == IMAGENET_MEAN and card.channel_order == "rgb"
    assert "classifier of 751 classes dropped" in card.pretrained
    network, loaded = load_model(tmp_path / "model")
    assert loaded.fingerprint == card.fingerprint
    with torch.no_grad():
        assert torch.allclose(network.eval()(images()).embedding, torchreid_net(images()), atol=1e-5)


def fastreid_checkpoint(tmp_path: Path) -> tuple[Path, nn.Module, nn.BatchNorm1d]:
    """fast-reid's BoT layout on a ResNet-18: backbone./heads. names, last stride 1, BNNeck."""
    torch.manual_seed(5)
    backbone = torchvision.models.resnet18(weights=None)
    bottleneck = nn.BatchNorm1d(512)
    for bn in [m for m in backbone.modules() if isinstance(m, nn.BatchNorm2d)] + [bottleneck]:
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.data.uniform_(0.5, 1.5)
    state = {f"backbone.{k}": v for k, v in backbone.state_dict().items() if not k.startswith("fc.")}
    state.update({f"heads.bottleneck.0.{k}": v for k, v in bottleneck.state_dict().items()})
    state["heads.classifier.weight"] = torch.randn(751, 512)
    state["pixel_mean"] = torch.tensor([123.675, 116.28, 103.53]).view(1, -1, 1, 1)
    state["pixel_std"] = torch.tensor([58.395, 57.12, 57.375]).view(1, -1, 1, 1)
    torch.save({"model": state, "iteration": 1000}, tmp_path / "bot.pth")
    backbone.layer4[0].conv1.stride = (1, 1)
    backbone.layer4[0].downsample[0].stride = (1, 1)
    backbone.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)  # fast-reid's stem
    return tmp_path / "bot.pth", backbone.eval(), bottleneck.eval()


def test_fastreid_bot_imports_with_the_same_embeddings(tmp_path: Path) -> None:
    path, backbone, bottleneck = fastreid_checkpoint(tmp_path)
    card = import_model(path, "resnet18", tmp_path / "model")
    assert (card.neck, card.last_stride, card.embedding_dim, card.stem_pool) == ("bnneck", 1, 512, "ceil")
    network, _ = load_model(tmp_path / "model")
    x = images()
    with torch.no_grad():
        body = nn.Sequential(*list(backbone.children())[:-2])
        expected = bottleneck(body(x).mean(dim=(2, 3)))
        assert torch.allclose(network.eval()(x).embedding, expected, atol=1e-4)
    encoder = load_encoder(tmp_path / "model", device="cpu")
    rows = encoder.embed([torch.randint(0, 255, (300, 120, 3), dtype=torch.uint8).numpy()])
    assert rows.shape == (1, 512) and abs(float((rows**2).sum()) - 1.0) < 1e-4


def test_torchreid_resnet_keeps_its_last_stride(tmp_path: Path) -> None:
    reference = torchvision.models.resnet18(weights=None).eval()
    state = {k: v for k, v in reference.state_dict().items() if not k.startswith("fc.")}
    state["classifier.weight"], state["classifier.bias"] = torch.randn(751, 512), torch.zeros(751)
    torch.save(state, tmp_path / "r18.pth")
    card = import_model(tmp_path / "r18.pth", "resnet18", tmp_path / "model", source="torchreid")
    assert (card.neck, card.last_stride) == ("none", 2)
    network, _ = load_model(tmp_path / "model")
    reference.fc = nn.Identity()
    with torch.no_grad():
        assert torch.allclose(network.eval()(images()).embedding, reference(images()), atol=1e-5)


def test_fine_tuning_from_a_torchreid_file_drops_the_classifier(torchreid_net: OSNet, tmp_path: Path) -> None:
    torch.save({"state_dict": torchreid_net.state_dict()}, tmp_path / "osnet.pth.tar")
    net = started(ReidNet(ARCH, num_classes=10), str(tmp_path / "osnet.pth.tar"))
    assert "its classifier of 751 classes dropped" in net.pretrained_note
    assert "7 head tensors of the file (fc.0.weight and 6 more) not used" in net.pretrained_note
    assert net.pretrained_note.count("dropped") == 1, "only the classifier is said to be dropped"
    assert net.pretrained_note.count(";") == 1, "one note, not a list of keys"
    assert torch.equal(net.backbone.conv1.conv.weight, torchreid_net.conv1.conv.weight)
    assert net.classifier.weight.shape == (10, 128)


class Whole(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 2)


def bad_files(tmp_path: Path, torchreid_net: OSNet) -> dict[str, tuple[Path, str]]:
    torch.save(Whole(), tmp_path / "whole.pth")
    (tmp_path / "notes.pth").write_text("these are not weights\n")
    torch.save({"epoch": 3, "lr": 0.1}, tmp_path / "meta.pth")
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), tmp_path / "resnet.pth")
    wider = OSNet("osnet_x0_5", num_classes=751)
    torch.save(wider.state_dict(), tmp_path / "wider.pth")
    state = torchreid_net.state_dict()
    torch.save({**state, "fc.0.weight": torch.tensor(1.0)}, tmp_path / "scalar.pth")
    torch.save({**state, "fc.0.weight": torch.empty(512, 512, device="meta")}, tmp_path / "meta-tensor.pth")
    torch.save({**state, "conv1.conv.weight": state["conv1.conv.weight"].to_sparse()}, tmp_path / "sparse.pth")
    torch.save({**state, "fc.0.weight": state["fc.0.weight"].to(torch.complex64)}, tmp_path / "complex.pth")
    return {
        "pickled": (tmp_path / "whole.pth", "test_checkpoints.Whole), not weights"),
        "text": (tmp_path / "notes.pth", "not a PyTorch checkpoint"),
        "no tensors": (tmp_path / "meta.pth", "without any tensor"),
        "other architecture": (tmp_path / "resnet.pth", "122 tensors of the file have no place: bn1.weight, bn1.bias and 120 more"),
        "other width": (tmp_path / "wider.pth", "layer conv1.conv.weight is [32, 3, 7, 7] in the file but [16, 3, 7, 7] here"),
        "0-d layer": (tmp_path / "scalar.pth", "fc.0.weight has shape []; a layer of this kind has 2 dimension(s)"),
        "meta tensor": (tmp_path / "meta-tensor.pth", "fc.0.weight is a meta tensor (no values)"),
        "sparse tensor": (tmp_path / "sparse.pth", "conv1.conv.weight is a torch.sparse_coo tensor"),
        # Copying it into float weights would drop the imaginary part, with PyTorch's warning.
        "complex tensor": (tmp_path / "complex.pth", "fc.0.weight holds torch.complex64 values; weights are real numbers"),
    }


def test_each_bad_file_gives_one_line(torchreid_net: OSNet, tmp_path: Path) -> None:
    for label, (path, expected) in bad_files(tmp_path, torchreid_net).items():
        with pytest.raises(ModelError) as info, warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            import_model(path, ARCH, tmp_path / f"out-{label}")
        assert label != "complex tensor" or not warned, [str(w.message) for w in warned]
        message = str(info.value)
        assert message.startswith(str(path)), label
        assert expected in message, (label, message)
        assert "\n" not in message and "\x1b" not in message and len(message) < 300, (label, message)
        assert not (tmp_path / f"out-{label}").exists(), label


def test_import_cli(torchreid_net: OSNet, tmp_path: Path) -> None:
    torch.save({f"module.{k}": v for k, v in torchreid_net.state_dict().items()}, tmp_path / "osnet.pth")
    runner = CliRunner()
    done = runner.invoke(app, ["import", str(tmp_path / "osnet.pth"), "--arch", ARCH, "--out", str(tmp_path / "m"), "--from", "torchreid"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "m" / "weights.pt").is_file() and (tmp_path / "m" / "card.json").is_file()
    exported = runner.invoke(app, ["export", "--model", str(tmp_path / "m"), "--format", "onnx", "--out", str(tmp_path / "m.onnx")])
    assert exported.exit_code == 0, exported.output
    onnx_rows = load_encoder(tmp_path / "m.onnx", device="cpu").embed([torch.zeros(256, 128, 3, dtype=torch.uint8).numpy()])
    torch_rows = load_encoder(tmp_path / "m", device="cpu").embed([torch.zeros(256, 128, 3, dtype=torch.uint8).numpy()])
    assert abs(onnx_rows - torch_rows).max() < 1e-4
    torch.save(Whole(), tmp_path / "whole.pth")
    bad = runner.invoke(app, ["import", str(tmp_path / "whole.pth"), "--arch", ARCH, "--out", str(tmp_path / "w")])
    assert bad.exit_code == 1
    assert len(bad.output.strip().splitlines()) == 1 and "pickled whole model" in bad.output
    wrong = runner.invoke(app, ["import", str(tmp_path / "osnet.pth"), "--arch", ARCH, "--out", str(tmp_path / "x"), "--from", "caffe"])
    assert wrong.exit_code == 1 and "--from 'caffe'" in wrong.output


def test_import_prints_a_file_name_holding_terminal_escapes_escaped(torchreid_net: OSNet, tmp_path: Path) -> None:
    folder = tmp_path / "\x1b[2Jwiped"
    folder.mkdir()
    torch.save(torchreid_net.state_dict(), folder / "osnet\x07.pth")
    done = CliRunner().invoke(app, ["import", str(folder / "osnet\x07.pth"), "--arch", ARCH, "--out", str(folder / "m")])
    assert done.exit_code == 0, done.output
    assert "\x1b" not in done.output and "\x07" not in done.output
    assert "\\x1b[2Jwiped/m" in done.output and "osnet\\x07.pth" in done.output.replace("\n", "")


def test_import_refuses_to_replace_a_finished_model_unless_told(torchreid_net: OSNet, tmp_path: Path) -> None:
    torch.save(torchreid_net.state_dict(), tmp_path / "osnet.pth")
    first = import_model(tmp_path / "osnet.pth", ARCH, tmp_path / "m")
    before = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    runner = CliRunner()
    refused = runner.invoke(app, ["import", str(tmp_path / "osnet.pth"), "--arch", ARCH, "--out", str(tmp_path / "m")])
    assert refused.exit_code == 1 and len(refused.output.strip().splitlines()) == 1, refused.output
    assert "holds a finished model" in refused.output and "--overwrite" in refused.output
    assert {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()} == before
    reference = torchvision.models.resnet18(weights=None).eval()
    torch.save({k: v for k, v in reference.state_dict().items() if not k.startswith("fc.")}, tmp_path / "r18.pth")
    with pytest.raises(ConfigError, match="holds a finished model"):
        import_model(tmp_path / "r18.pth", "resnet18", tmp_path / "m", source="torchreid")
    (tmp_path / "m" / "notes.txt").write_text("mine")
    card = import_model(tmp_path / "r18.pth", "resnet18", tmp_path / "m", source="torchreid", overwrite=True)
    assert card.architecture == "resnet18" and card.fingerprint != first.fingerprint
    assert load_model(tmp_path / "m")[1].fingerprint == card.fingerprint
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine", "the folder's other files are carried over"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "osnet.pth", "r18.pth"], "nothing left beside it"


KILLED_MID_SAVE = """
import os, signal, sys
import warnings
from pathlib import Path
import torch
from reid.paths import replaced_folder
folder = Path(sys.argv[1])
with replaced_folder(folder, ("weights.pt", "card.json")) as stage:
    torch.save({"x": torch.zeros(3)}, stage / "weights.pt")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_model_folder_is_replaced_whole_or_not_at_all(torchreid_net: OSNet, tmp_path: Path) -> None:
    torch.save(torchreid_net.state_dict(), tmp_path / "osnet.pth")
    card = import_model(tmp_path / "osnet.pth", ARCH, tmp_path / "m")
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_SAVE, str(tmp_path / "m")], env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert killed.returncode == -signal.SIGKILL
    assert load_model(tmp_path / "m")[1].fingerprint == card.fingerprint, "the old model still loads"
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".m")]
    assert len(leftovers) == 1 and (leftovers[0] / STAGING_MARK).is_file()
    import_model(tmp_path / "osnet.pth", ARCH, tmp_path / "m", overwrite=True)
    assert not leftovers[0].exists(), "a killed run's half-written folder is removed by the next save"
    assert load_model(tmp_path / "m")[1].fingerprint == card.fingerprint


def zip_bomb(path: Path, unpacked: int) -> Path:
    """A checkpoint whose tensor storage is ``unpacked`` bytes of zeros, deflated to a few kB."""
    torch.save({"w": torch.zeros(4)}, path)
    with zipfile.ZipFile(path) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w") as bomb:
        for info, payload in members:
            if info.filename.endswith("data/0"):
                deflated = zipfile.ZipInfo(info.filename)
                deflated.compress_type = zipfile.ZIP_DEFLATED
                with bomb.open(deflated, "w", force_zip64=True) as member:
                    zeros = bytes(1 << 20)
                    for _ in range(unpacked >> 20):
                        member.write(zeros)
            else:
                bomb.writestr(info, payload)
    return path


def test_bombs_and_huge_state_dicts_are_refused_before_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "MAX_CHECKPOINT_BYTES", 32 << 20)
    bomb = tmp_path / "bomb.pth"
    zip_bomb(bomb, 64 << 20)
    assert bomb.stat().st_size < 1 << 20
    with zipfile.ZipFile(bomb) as archive:  # deflated for real: the small file unpacks large
        assert sum(i.file_size for i in archive.infolist()) > 64 << 20
    with pytest.raises(ModelError, match=r"bomb.pth: unpacks to 67,1.* bytes, more than the 33,554,432 a checkpoint may have"):
        read_state(bomb)
    with open(tmp_path / "huge.pth", "wb") as handle:
        handle.truncate(40 << 20)
    with pytest.raises(ModelError, match=r"huge.pth: 41,943,040 bytes, more than the 33,554,432"):
        import_model(tmp_path / "huge.pth", ARCH, tmp_path / "m")
    many = {f"t{i}": torch.zeros(1) for i in range(MAX_CHECKPOINT_MEMBERS + 10)}
    torch.save(many, tmp_path / "many.pth")
    with pytest.raises(ModelError, match=r"many.pth: 50,0.* entries, more than the 50,000 a checkpoint may have"):
        read_state(tmp_path / "many.pth")
    shared = torch.zeros(MAX_STATE_KEYS + 10)
    torch.save({f"t{i}": shared[i : i + 1] for i in range(MAX_STATE_KEYS + 10)}, tmp_path / "views.pth")
    with pytest.raises(ModelError, match=r"views.pth: 20,010 entries, more than the 20,000 a network's state_dict may have"):
        read_state(tmp_path / "views.pth")
    assert not (tmp_path / "m").exists()
