"""torchvision backbones, cut before their classifier, with Re-ID's last-stride-1 trick.

ImageNet weights are loaded only from a local file or the torch hub cache: a download
would hang on machines without internet, so a missing file means random initialisation
and a note saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torchvision
from torch import nn

from reid.errors import ConfigError, ModelError


@dataclass(frozen=True)
class BackboneSpec:
    builder: str
    out_dim: int
    weights: str


BACKBONES: dict[str, BackboneSpec] = {
    "resnet18": BackboneSpec("resnet18", 512, "ResNet18_Weights"),
    "resnet34": BackboneSpec("resnet34", 512, "ResNet34_Weights"),
    "resnet50": BackboneSpec("resnet50", 2048, "ResNet50_Weights"),
    "resnet101": BackboneSpec("resnet101", 2048, "ResNet101_Weights"),
    "resnext50_32x4d": BackboneSpec("resnext50_32x4d", 2048, "ResNeXt50_32X4D_Weights"),
    "mobilenet_v3_small": BackboneSpec("mobilenet_v3_small", 576, "MobileNet_V3_Small_Weights"),
    "mobilenet_v3_large": BackboneSpec("mobilenet_v3_large", 960, "MobileNet_V3_Large_Weights"),
}


def _imagenet_weights_file(spec: BackboneSpec) -> Path:
    weights = getattr(torchvision.models, spec.weights).IMAGENET1K_V1
    return Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name


def build_backbone(
    name: str, last_stride: int = 1, pretrained: str | Path | None = "imagenet"
) -> tuple[nn.Module, int, str]:
    """Return ``(feature extractor, output channels, provenance note)``.

    ``pretrained`` is ``"imagenet"`` (use the torch hub cache if it holds the file),
    a path to a state_dict file, or None for random initialisation.
    """
    if name not in BACKBONES:
        raise ConfigError(f"unknown architecture {name!r}; choose one of {', '.join(BACKBONES)}")
    spec = BACKBONES[name]
    model = getattr(torchvision.models, spec.builder)(weights=None)
    note = "random initialisation"
    source: Path | None = None
    if pretrained == "imagenet":
        cached = _imagenet_weights_file(spec)
        if cached.is_file():
            source = cached
        else:
            note = f"random initialisation (no ImageNet weights for {name} at {cached.name} in the torch hub cache)"
    elif pretrained:
        source = Path(pretrained)
        if not source.is_file():
            raise ModelError(f"{source}: pretrained weights file not found")
    if source is not None:
        try:
            state = torch.load(source, map_location="cpu", weights_only=True)
            model.load_state_dict(state)
        except Exception as exc:
            raise ModelError(f"{source}: cannot load as {name} weights ({exc})") from exc
        note = f"ImageNet weights from {source.name}"

    if name.startswith(("resnet", "resnext")):
        if last_stride == 1:
            block = model.layer4[0]
            strided = block.conv2 if hasattr(block, "conv3") else block.conv1
            strided.stride = (1, 1)
            block.downsample[0].stride = (1, 1)
        features = nn.Sequential(*list(model.children())[:-2])
    else:
        features = model.features
    return features, spec.out_dim, note
