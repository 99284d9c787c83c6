"""The names and defaults of the model commands' choices, in a module that imports no
engine (PyTorch, ONNX), so that their help answers at once: the architectures
(:data:`BACKBONES`, built by :mod:`reid.models.backbones`), the export formats and the
export's tolerance (:mod:`reid.models.export`), and the checkpoint formats a file is
recognised as (:mod:`reid.models.formats`, which checks that its table names the same)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OSNetSpec:
    """Channel widths of one OSNet variant; ``ain`` selects the OSNet-AIN layout."""

    channels: tuple[int, int, int, int]
    ain: bool = False


OSNET_VARIANTS: dict[str, OSNetSpec] = {
    "osnet_x1_0": OSNetSpec((64, 256, 384, 512)),
    "osnet_x0_75": OSNetSpec((48, 192, 288, 384)),
    "osnet_x0_5": OSNetSpec((32, 128, 192, 256)),
    "osnet_x0_25": OSNetSpec((16, 64, 96, 128)),
    "osnet_ain_x1_0": OSNetSpec((64, 256, 384, 512), ain=True),
}


@dataclass(frozen=True)
class BackboneSpec:
    """An architecture: its family (torchvision, timm or osnet), builder name and output channels."""

    family: str
    builder: str
    out_dim: int


BACKBONES: dict[str, BackboneSpec] = {
    "resnet18": BackboneSpec("torchvision", "resnet18", 512),
    "resnet34": BackboneSpec("torchvision", "resnet34", 512),
    "resnet50": BackboneSpec("torchvision", "resnet50", 2048),
    "resnet101": BackboneSpec("torchvision", "resnet101", 2048),
    "resnext50_32x4d": BackboneSpec("torchvision", "resnext50_32x4d", 2048),
    "mobilenet_v2": BackboneSpec("torchvision", "mobilenet_v2", 1280),
    "mobilenet_v3_small": BackboneSpec("torchvision", "mobilenet_v3_small", 576),
    "mobilenet_v3_large": BackboneSpec("torchvision", "mobilenet_v3_large", 960),
    "efficientnet_lite0": BackboneSpec("timm", "efficientnet_lite0", 1280),
    **{name: BackboneSpec("osnet", name, spec.channels[3]) for name, spec in OSNET_VARIANTS.items()},
}


def known_architectures() -> list[str]:
    """Every architecture name ``--arch``, model cards and imports accept."""
    return list(BACKBONES)


# What ``reid export --format`` writes; the first is the default.
EXPORT_FORMATS = ("onnx", "torchscript")
# The largest max abs difference from PyTorch an export is accepted with.
DEFAULT_TOLERANCE = 1e-4
# What ``reid import --from`` accepts: the checkpoint formats a file is recognised as.
NAMED_FORMATS = ("reid", "fastreid", "torchreid", "torchvision")

# The face encoders that come ready-made, by the name ``--model`` takes.
SFACE = "sface"
DLIB_FACE = "dlib-face"
READY_MADE_FACES = (SFACE, DLIB_FACE)
