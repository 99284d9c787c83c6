"""Backbones cut before their classifier: torchvision's (ResNet with Re-ID's last-stride-1
trick), timm's EfficientNet-Lite0 and OSNet.

A backbone maps (N, 3, H, W) float images to an (N, C, h, w) feature map. Each backbone
also knows how the parameter names of its source implementation (torchvision, timm,
torchreid) become ours, so pretrained weights and imported checkpoints load by name.
Weights are never loaded here; see :mod:`reid.models.pretrained`.
"""

from __future__ import annotations

import importlib.util
from collections import OrderedDict
from collections.abc import Callable

import torchvision
from torch import nn

from reid.errors import ConfigError
# The table of architectures, stated where the command line lists them without PyTorch.
from reid.models.names import BACKBONES as BACKBONES, BackboneSpec as BackboneSpec, known_architectures as known_architectures
from reid.models.osnet import osnet_features


# timm's EfficientNet, up to its last BatchNorm+activation, under timm's own names.
_TIMM_STAGES = ("conv_stem", "bn1", "blocks", "conv_head", "bn2")


def architecture_available(name: str) -> bool:
    """False when an architecture needs a library this installation lacks (timm)."""
    return backbone_spec(name).family != "timm" or importlib.util.find_spec("timm") is not None


def backbone_spec(name: str) -> BackboneSpec:
    """The spec of ``name``; raises ConfigError naming the choices for an unknown one."""
    if name not in BACKBONES:
        raise ConfigError(f"unknown architecture {name!r}; choose one of {', '.join(BACKBONES)}")
    return BACKBONES[name]


def torchvision_model(name: str) -> nn.Module:
    """The whole torchvision classifier of a torchvision-family architecture, random weights."""
    return getattr(torchvision.models, backbone_spec(name).builder)(weights=None)


def timm_model(name: str) -> nn.Module:
    """The whole timm classifier of a timm-family architecture, random weights.

    Raises ConfigError when timm is not installed (it comes with the ``pretrained`` extra).
    """
    if not architecture_available(name):
        raise ConfigError(f"architecture {name} needs timm: pip install 'reid-toolkit[pretrained]'")
    import timm

    return timm.create_model(backbone_spec(name).builder, pretrained=False)


def _is_resnet(name: str) -> bool:
    return name.startswith(("resnet", "resnext"))


def build_backbone(name: str, last_stride: int = 1, stem_pool: str = "padded") -> tuple[nn.Module, int]:
    """Return ``(feature extractor, output channels)`` with random weights; reads no file.

    ``last_stride`` 1 removes the stride of ResNet's last stage (Luo et al. 2019): twice the
    feature-map resolution for the same parameters. ``stem_pool`` ``ceil`` makes a ResNet's
    first max-pool fast-reid's (3x3, stride 2, no padding, ``ceil_mode``) instead of
    torchvision's (padding 1): the same weights, other windows. Raises ConfigError for an
    unknown name, and for ``ceil`` on a network without that max-pool.
    """
    spec = backbone_spec(name)
    if stem_pool != "padded" and not _is_resnet(name):
        raise ConfigError(f"stem pool {stem_pool!r} is a ResNet's; {name} has no such max-pool")
    if spec.family == "osnet":
        return osnet_features(name), spec.out_dim
    if spec.family == "timm":
        model = timm_model(name)
        return nn.Sequential(OrderedDict((stage, getattr(model, stage)) for stage in _TIMM_STAGES)), spec.out_dim
    model = torchvision_model(name)
    if _is_resnet(name):
        if last_stride == 1:
            block = model.layer4[0]
            strided = block.conv2 if hasattr(block, "conv3") else block.conv1
            strided.stride = (1, 1)
            block.downsample[0].stride = (1, 1)
        if stem_pool == "ceil":
            model.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=0, ceil_mode=True)
        return nn.Sequential(*list(model.children())[:-2]), spec.out_dim
    return model.features, spec.out_dim


def source_key_mapper(name: str) -> Callable[[str], str | None]:
    """How a parameter name of the architecture's source implementation (torchvision,
    timm or torchreid, without any prefix) becomes a name inside our backbone; None for
    parameters outside the backbone (the source's pooling, fc and classifier)."""
    spec = backbone_spec(name)
    if spec.family == "osnet":
        # Our OSNet backbone is a Sequential of torchreid's own stage names.
        stages = tuple(f"{stage}." for stage in ("conv1", "maxpool", "conv2", "pool2", "conv3", "pool3", "conv4", "conv5"))
        return lambda key: key if key.startswith(stages) else None
    if spec.family == "timm":
        stages = tuple(f"{stage}." for stage in _TIMM_STAGES)
        return lambda key: key if key.startswith(stages) else None
    if _is_resnet(name):
        # The backbone is Sequential(children[:-2]): conv1 -> 0, bn1 -> 1, layer1 -> 4, ...
        index = {child: str(i) for i, child in enumerate(("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4"))}

        def resnet_key(key: str) -> str | None:
            head, _, rest = key.partition(".")
            return f"{index[head]}.{rest}" if head in index else None

        return resnet_key
    return lambda key: key.removeprefix("features.") if key.startswith("features.") else None
