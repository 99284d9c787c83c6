"""OSNet, the omni-scale network for person Re-ID (Zhou et al., "Omni-Scale Feature
Learning for Person Re-Identification", ICCV 2019), and OSNet-AIN (Zhou et al.,
"Learning Generalisable Omni-Scale Representations for Person Re-Identification",
TPAMI 2021).

Module and parameter names follow torchreid's published implementation exactly, so a
torchreid checkpoint loads key for key and gives the same eval-mode output: the 512-d
feature after ``fc`` (Linear + BatchNorm1d + ReLU on the globally pooled conv5 map).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

# The variants' widths, stated where the command line lists the architectures without PyTorch.
from reid.models.names import OSNET_VARIANTS as OSNET_VARIANTS, OSNetSpec as OSNetSpec


class ConvLayer(nn.Module):
    """k x k convolution + BatchNorm (or affine InstanceNorm) + ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, instance_norm: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False)
        self.bn: nn.Module = nn.InstanceNorm2d(out_channels, affine=True) if instance_norm else nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class Conv1x1(nn.Module):
    """1x1 convolution + BatchNorm + ReLU."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class Conv1x1Linear(nn.Module):
    """1x1 convolution + optional BatchNorm, no non-linearity."""

    def __init__(self, in_channels: int, out_channels: int, bn: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels) if bn else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        return x if self.bn is None else self.bn(x)


class LightConv3x3(nn.Module):
    """Pointwise (linear) then depthwise 3x3 + BatchNorm + ReLU."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False, groups=out_channels)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv2(self.conv1(x))))


class LightConvStream(nn.Module):
    """``depth`` LightConv3x3 in a row: one receptive-field scale of OSNet-AIN."""

    def __init__(self, in_channels: int, out_channels: int, depth: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            LightConv3x3(in_channels, out_channels), *(LightConv3x3(out_channels, out_channels) for _ in range(depth - 1))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class ChannelGate(nn.Module):
    """The unified aggregation gate: channel weights from the pooled input (eq. 3)."""

    def __init__(self, in_channels: int, reduction: int = 16) -> None:
        super().__init__()
        self.global_avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(in_channels, in_channels // reduction, 1, bias=True)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(in_channels // reduction, in_channels, 1, bias=True)
        self.gate_activation = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gates = self.gate_activation(self.fc2(self.relu(self.fc1(self.global_avgpool(x)))))
        return x * gates


class OSBlock(nn.Module):
    """Omni-scale residual block of OSNet: four streams of 1-4 LightConv3x3, one shared gate."""

    def __init__(self, in_channels: int, out_channels: int, bottleneck_reduction: int = 4) -> None:
        super().__init__()
        mid = out_channels // bottleneck_reduction
        self.conv1 = Conv1x1(in_channels, mid)
        self.conv2a = LightConv3x3(mid, mid)
        self.conv2b = nn.Sequential(*(LightConv3x3(mid, mid) for _ in range(2)))
        self.conv2c = nn.Sequential(*(LightConv3x3(mid, mid) for _ in range(3)))
        self.conv2d = nn.Sequential(*(LightConv3x3(mid, mid) for _ in range(4)))
        self.gate = ChannelGate(mid)
        self.conv3 = Conv1x1Linear(mid, out_channels)
        self.downsample = Conv1x1Linear(in_channels, out_channels) if in_channels != out_channels else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.conv1(x)
        x2 = self.gate(self.conv2a(x1)) + self.gate(self.conv2b(x1)) + self.gate(self.conv2c(x1)) + self.gate(self.conv2d(x1))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(self.conv3(x2) + identity)


class AINBlock(nn.Module):
    """Omni-scale block of OSNet-AIN; with ``instance_norm`` the residual branch ends in an
    affine InstanceNorm instead of BatchNorm (the "INin" block of the paper)."""

    def __init__(self, in_channels: int, out_channels: int, instance_norm: bool, reduction: int = 4, streams: int = 4) -> None:
        super().__init__()
        mid = out_channels // reduction
        self.conv1 = Conv1x1(in_channels, mid)
        self.conv2 = nn.ModuleList(LightConvStream(mid, mid, t) for t in range(1, streams + 1))
        self.gate = ChannelGate(mid)
        self.conv3 = Conv1x1Linear(mid, out_channels, bn=not instance_norm)
        self.downsample = Conv1x1Linear(in_channels, out_channels) if in_channels != out_channels else None
        self.IN = nn.InstanceNorm2d(out_channels, affine=True) if instance_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.conv1(x)
        x2 = sum(self.gate(stream(x1)) for stream in self.conv2)
        x3 = self.conv3(x2)
        if self.IN is not None:
            x3 = self.IN(x3)
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(x3 + identity)


# Which OSNet-AIN blocks carry InstanceNorm, stage by stage (TPAMI 2021, Fig. 5).
_AIN_INSTANCE_NORM = ((True, True), (False, True), (True, False))


def _transition(channels: int) -> nn.Sequential:
    return nn.Sequential(Conv1x1(channels, channels), nn.AvgPool2d(2, stride=2))


def osnet_stages(name: str) -> OrderedDict[str, nn.Module]:
    """The convolutional stages of an OSNet variant, named as torchreid names them
    (``conv1`` ... ``conv5``; OSNet-AIN adds ``pool2`` and ``pool3``)."""
    spec = OSNET_VARIANTS[name]
    c = spec.channels
    stages: OrderedDict[str, nn.Module] = OrderedDict()
    stages["conv1"] = ConvLayer(3, c[0], 7, stride=2, padding=3, instance_norm=spec.ain)
    stages["maxpool"] = nn.MaxPool2d(3, stride=2, padding=1)
    if spec.ain:
        for stage, (cin, cout, norms) in enumerate(zip(c[:3], c[1:], _AIN_INSTANCE_NORM), start=2):
            stages[f"conv{stage}"] = nn.Sequential(AINBlock(cin, cout, norms[0]), AINBlock(cout, cout, norms[1]))
            if stage < 4:
                stages[f"pool{stage}"] = _transition(cout)
    else:
        for stage, (cin, cout) in enumerate(zip(c[:3], c[1:]), start=2):
            blocks = [OSBlock(cin, cout), OSBlock(cout, cout)]
            stages[f"conv{stage}"] = nn.Sequential(*blocks, *([_transition(cout)] if stage < 4 else []))
    stages["conv5"] = Conv1x1(c[3], c[3])
    return stages


def init_osnet(module: nn.Module) -> None:
    """torchreid's initialisation: Kaiming (fan-out) convolutions, unit norms, N(0, 0.01) linears."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d, nn.InstanceNorm2d)) and m.weight is not None:
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def osnet_features(name: str) -> nn.Sequential:
    """OSNet up to conv5: (N, 3, H, W) float -> (N, C, H/16, W/16), C = 512 for x1_0."""
    features = nn.Sequential(osnet_stages(name))
    init_osnet(features)
    return features


class OSNet(nn.Module):
    """The whole network as torchreid builds it: stages, global average pooling, ``fc``
    (Linear -> BatchNorm1d -> ReLU to ``feature_dim``) and a ``classifier`` with bias.

    ``forward`` in eval mode returns the (N, feature_dim) float feature; in training mode
    the (N, num_classes) logits.
    """

    def __init__(self, name: str, num_classes: int = 1000, feature_dim: int = 512) -> None:
        super().__init__()
        stages = osnet_stages(name)
        for stage, module in stages.items():
            self.add_module(stage, module)
        self.global_avgpool = nn.AdaptiveAvgPool2d(1)
        channels = OSNET_VARIANTS[name].channels[3]
        self.fc = nn.Sequential(nn.Linear(channels, feature_dim), nn.BatchNorm1d(feature_dim), nn.ReLU(inplace=True))
        self.classifier = nn.Linear(feature_dim, num_classes)
        self._stages = list(stages)
        init_osnet(self)

    def featuremaps(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self._stages:
            x = getattr(self, stage)(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feature = self.fc(self.global_avgpool(self.featuremaps(x)).flatten(1))
        return feature if not self.training else self.classifier(feature)
