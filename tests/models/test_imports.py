"""Imports are exact or refused: each checkpoint below is built here from the source
toolkit's own layer names (torchreid's ``resnet.py``, fast-reid's ``Baseline`` with its
ResNet backbone and ``EmbeddingHead``, or the older ``BNneckHead``), with seeded random
weights and BatchNorm statistics measured on random images; the imported model folder
must embed images as the source's own eval forward does (cosine >= 0.9999 per image),
or the import must stop with one line naming the tensors it cannot place."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from torch import nn
from typer.testing import CliRunner

from reid.cli import app
from reid.errors import ModelError
from reid.models import load_encoder
from reid.models.imports import import_model

SIZE = (128, 64)
CLASSES = 751
PIXEL_MEAN = (123.675, 116.28, 103.53)
PIXEL_STD = (58.395, 57.12, 57.375)
COSINE = 0.9999


def resnet_body(depth: int, last_stride: int, ceil_stem: bool) -> nn.Sequential:
    """A ResNet up to its last stage under the names torchreid and fast-reid share
    (conv1, bn1, relu, maxpool, layer1..4; stride on the 3x3 conv)."""
    net = getattr(torchvision.models, f"resnet{depth}")(weights=None)
    if last_stride == 1:
        net.layer4[0].conv2.stride = (1, 1)
        net.layer4[0].downsample[0].stride = (1, 1)
    if ceil_stem:
        net.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)  # fast-reid's stem
    names = ("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4")
    return nn.Sequential(OrderedDict((name, getattr(net, name)) for name in names))


class TorchreidResNet(nn.Module):
    """torchreid's ResNet (``resnet50`` and ``resnet50_fc512``): global average pooling,
    then ``fc`` (Linear + BatchNorm1d + ReLU) when it has one, then ``classifier``."""

    def __init__(self, fc_dim: int | None, last_stride: int) -> None:
        super().__init__()
        body = resnet_body(50, last_stride, ceil_stem=False)
        for name, module in body.named_children():
            setattr(self, name, module)
        self.global_avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = (
            nn.Sequential(nn.Linear(2048, fc_dim), nn.BatchNorm1d(fc_dim), nn.ReLU(inplace=True)) if fc_dim else None
        )
        self.classifier = nn.Linear(fc_dim or 2048, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x / 255.0 - torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)) / torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        for name in ("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4"):
            x = getattr(self, name)(x)
        v = self.global_avgpool(x).flatten(1)
        return self.fc(v) if self.fc is not None else v


class GeMP(nn.Module):
    """fast-reid's GeneralizedMeanPoolingP: a learned exponent of shape [1]."""

    def __init__(self) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.ones(1) * 3.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.adaptive_avg_pool2d(x.clamp(min=1e-6).pow(self.p), 1).pow(1.0 / self.p)


class FixedGeM(nn.Module):
    """fast-reid's GeneralizedMeanPooling (``gempool``): p = 3, no tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.adaptive_avg_pool2d(x.clamp(min=1e-6).pow(3.0), 1).pow(1.0 / 3.0)


class EmbeddingHead(nn.Module):
    """fast-reid's EmbeddingHead in eval (the BN feature), or with ``old_names`` the older
    BNneckHead (``bnneck``, ``classifier``)."""

    def __init__(self, pool: str, embedding_dim: int, old_names: bool) -> None:
        super().__init__()
        self.pool_layer = {"avg": nn.AdaptiveAvgPool2d(1), "gem": GeMP(), "fixed-gem": FixedGeM()}[pool]
        dim = embedding_dim or 2048
        self.old_names = old_names
        if old_names:
            self.bnneck = nn.BatchNorm2d(2048)
            self.classifier = nn.Linear(2048, CLASSES, bias=False)
        else:
            layers = [nn.Conv2d(2048, embedding_dim, 1, 1, bias=False)] if embedding_dim else []
            self.bottleneck = nn.Sequential(*layers, nn.BatchNorm2d(dim))
            self.weight = nn.Parameter(torch.randn(CLASSES, dim) * 0.01)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        pooled = self.pool_layer(features)
        return (self.bnneck if self.old_names else self.bottleneck)(pooled)[..., 0, 0]


class FastReidBaseline(nn.Module):
    """fast-reid's Baseline: pixel normalisation (0..255), ResNet backbone with last
    stride 1 and its stem max-pool (3x3, stride 2, ceil_mode, no padding), the head."""

    def __init__(self, pool: str = "avg", embedding_dim: int = 0, old_names: bool = False) -> None:
        super().__init__()
        self.register_buffer("pixel_mean", torch.tensor(PIXEL_MEAN).view(1, -1, 1, 1))
        self.register_buffer("pixel_std", torch.tensor(PIXEL_STD).view(1, -1, 1, 1))
        self.backbone = resnet_body(50, 1, ceil_stem=True)
        self.heads = EmbeddingHead(pool, embedding_dim, old_names)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.heads(self.backbone((images - self.pixel_mean) / self.pixel_std))


def calibrated(network: nn.Module, seed: int) -> nn.Module:
    """Seeded weights, random BatchNorm affine parameters and BatchNorm statistics
    measured on random images (so activations keep a sensible scale), in eval mode."""
    torch.manual_seed(seed)
    for module in network.modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(module.weight)
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.2, 0.2)
            module.reset_running_stats()
            module.momentum = None  # a plain average over the calibration batches
    network.train()
    with torch.no_grad():
        for _ in range(2):
            network(torch.rand(6, 3, *SIZE) * 255)
    return network.eval()


def photos(seed: int = 9) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (4, *SIZE, 3), dtype=np.uint8)


def cosines(folder: Path, source: nn.Module) -> np.ndarray:
    """Per image: cosine between the imported model's embedding and the source's own forward."""
    images = photos()
    ours = load_encoder(folder, device="cpu").embed(list(images))
    with torch.no_grad():
        theirs = source(torch.from_numpy(images).permute(0, 3, 1, 2).float()).numpy()
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    return (ours * theirs).sum(axis=1)


def saved(network: nn.Module, path: Path, wrap: bool = True) -> Path:
    state = network.state_dict()
    torch.save({"model": state, "iteration": 100} if wrap else state, path)
    return path


def test_torchreid_resnet50_fc512_imports_its_embedding_layer(tmp_path: Path) -> None:
    source = calibrated(TorchreidResNet(fc_dim=512, last_stride=1), seed=1)
    card = import_model(saved(source, tmp_path / "fc512.pth", wrap=False), "resnet50", tmp_path / "m", input_size=SIZE)
    assert (card.neck, card.embedding_dim, card.last_stride, card.stem_pool) == ("fc", 512, 1, "padded")
    assert "its classifier of 751 classes dropped" in card.pretrained and "tensors) dropped" not in card.pretrained
    assert cosines(tmp_path / "m", source).min() >= COSINE


def test_torchreid_resnet50_embeds_its_pooled_feature(tmp_path: Path) -> None:
    source = calibrated(TorchreidResNet(fc_dim=None, last_stride=2), seed=2)
    card = import_model(saved(source, tmp_path / "r50.pth"), "resnet50", tmp_path / "m", input_size=SIZE)
    assert (card.neck, card.embedding_dim, card.last_stride) == ("none", 2048, 2)
    assert cosines(tmp_path / "m", source).min() >= COSINE


FASTREID = {
    # name: (pool, EMBEDDING_DIM, older head names, --pooling, card pooling, embedding_dim)
    "bot": ("avg", 0, False, None, "avg", 2048),
    "bot-older-names": ("avg", 0, True, None, "avg", 2048),
    "learned-gem": ("gem", 0, False, None, "gem", 2048),
    "fixed-gem": ("fixed-gem", 0, False, "gem", "gem", 2048),
    "embedding-dim": ("avg", 256, False, None, "avg", 256),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FASTREID))
def test_fastreid_heads_import_exactly(name: str, tmp_path: Path) -> None:
    pool, embedding_dim, old_names, pooling, card_pooling, dim = FASTREID[name]
    source = calibrated(FastReidBaseline(pool, embedding_dim, old_names), seed=3)
    card = import_model(saved(source, tmp_path / "bot.pth"), "resnet50", tmp_path / "m", input_size=SIZE, pooling=pooling)
    assert (card.neck, card.pooling, card.embedding_dim, card.last_stride, card.stem_pool) == ("bnneck", card_pooling, dim, 1, "ceil")
    assert card.mean == pytest.approx(tuple(v / 255 for v in PIXEL_MEAN)) and card.std == pytest.approx(tuple(v / 255 for v in PIXEL_STD))
    assert card.pretrained.endswith("its classifier of 751 classes dropped"), card.pretrained
    assert cosines(tmp_path / "m", source).min() >= COSINE


@pytest.mark.slow
def test_fastreid_stem_max_pool_is_what_makes_it_exact(tmp_path: Path) -> None:
    """torchvision's padded max-pool in place of fast-reid's would give other embeddings."""
    source = calibrated(FastReidBaseline(), seed=4)
    import_model(saved(source, tmp_path / "bot.pth"), "resnet50", tmp_path / "m", input_size=SIZE)
    assert cosines(tmp_path / "m", source).min() >= COSINE
    source.backbone.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
    assert cosines(tmp_path / "m", source).min() < COSINE


def ibn_state(source: FastReidBaseline) -> dict[str, torch.Tensor]:
    """fast-reid's R50-ibn names: the first BatchNorm of each block in layer1..3 is an IBN
    (``bn1.IN`` instance norm on half the channels, ``bn1.BN`` on the rest)."""
    state = {}
    for key, value in source.state_dict().items():
        parts = key.split(".")
        if len(parts) > 4 and parts[1] in ("layer1", "layer2", "layer3") and parts[3] == "bn1":
            half = value.shape[0] // 2 if value.dim() else value
            if parts[4] in ("weight", "bias"):
                state[".".join(parts[:4] + ["IN", parts[4]])] = value[:half]
            state[".".join(parts[:4] + ["BN", parts[4]])] = value if not value.dim() else value[half:]
        else:
            state[key] = value
    return state


def nl_state(source: FastReidBaseline) -> dict[str, torch.Tensor]:
    """fast-reid's SBS R50 names (WITH_NL): non-local blocks ``NL_2``, ``NL_3`` beside the stages."""
    state = dict(source.state_dict())
    for stage, channels in (("NL_2", 512), ("NL_3", 1024)):
        for block in range(2):
            for part in ("g", "theta", "phi"):
                state[f"backbone.{stage}.{block}.{part}.weight"] = torch.randn(channels // 2, channels, 1, 1)
                state[f"backbone.{stage}.{block}.{part}.bias"] = torch.zeros(channels // 2)
            state[f"backbone.{stage}.{block}.W.0.weight"] = torch.randn(channels, channels // 2, 1, 1)
    return state


@pytest.mark.parametrize(
    "variant,names,why",
    [("R50-ibn", "backbone.layer1.0.bn1.IN.weight", "IBN"), ("SBS R50 (non-local)", "backbone.NL_2.0.g.weight", "non-local")],
)
def test_fastreid_networks_reid_cannot_build_are_refused_by_name(variant: str, names: str, why: str, tmp_path: Path) -> None:
    source = FastReidBaseline("gem").eval()
    state = ibn_state(source) if why == "IBN" else nl_state(source)
    torch.save({"model": state}, tmp_path / "sbs.pth")
    with pytest.raises(ModelError) as info:
        import_model(tmp_path / "sbs.pth", "resnet50", tmp_path / "m", input_size=SIZE)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'sbs.pth'}: weights do not fit resnet50") and names in message, message
    assert why in message and "\n" not in message and len(message) < 400, message
    assert "dropped" not in message and not (tmp_path / "m").exists()


def test_a_head_tensor_without_a_place_is_refused_not_dropped(tmp_path: Path) -> None:
    source = calibrated(TorchreidResNet(fc_dim=512, last_stride=1), seed=5)
    state = dict(source.state_dict())
    state["fc.4.weight"], state["fc.4.bias"] = torch.randn(256, 512), torch.zeros(256)  # a second fc layer
    torch.save(state, tmp_path / "two-fc.pth")
    with pytest.raises(ModelError, match=r"2 tensors of the file have no place: fc\.4\.weight, fc\.4\.bias"):
        import_model(tmp_path / "two-fc.pth", "resnet50", tmp_path / "m", input_size=SIZE)
    torch.save({k: v for k, v in source.state_dict().items() if not k.startswith("fc.1.")}, tmp_path / "no-bn.pth")
    with pytest.raises(ModelError, match=r"not in the file \(first reduction\.1\.weight\)"):
        import_model(tmp_path / "no-bn.pth", "resnet50", tmp_path / "m", input_size=SIZE)


def test_import_summary_is_plain_text(tmp_path: Path) -> None:
    source = calibrated(TorchreidResNet(fc_dim=512, last_stride=1), seed=6)
    saved(source, tmp_path / "fc512.pth")
    done = CliRunner().invoke(app, ["import", str(tmp_path / "fc512.pth"), "--arch", "resnet50", "--out", str(tmp_path / "m")])
    assert done.exit_code == 0, done.output
    text = " ".join(done.output.split())
    assert "[bold]" not in text and "[/]" not in text and "\x1b" not in text
    assert "512-d, neck fc" in text and "its classifier of 751 classes dropped" in text
