"""OSNet against torchreid's published implementation.

The reference numbers were produced by torchreid 0.2.5's own ``osnet.py`` /
``osnet_ain.py`` (the PyPI package, installed without its dependencies in a scratch
folder): its parameter count for 751 classes, a hash of its parameter names and shapes in
order, and its eval-mode 512-d feature for the weights :func:`seeded` fills in and a fixed
input. The suite itself never needs torchreid.
"""

from __future__ import annotations

import hashlib

import pytest
import torch

from reid.models import ReidNet
from reid.models.backbones import known_architectures
from reid.models.osnet import OSNET_VARIANTS, OSNet

# name: (parameters with 751 classes, names+shapes hash, feature sum, feature[0, :6])
TORCHREID_REFERENCE = {
    "osnet_x1_0": (2554771, "e90528a2256f0eb5", 44.5483, [0.0, 0.13212, 0.0, 0.0, 0.0, 0.08582]),
    "osnet_x0_75": (1671017, "01aec4ddbc5a03c0", 41.9962, [0.0, 0.10413, 0.0, 0.0, 0.1319, 0.0]),
    "osnet_x0_5": (1015297, "f5bd75684db38898", 44.4780, [0.00822, 0.04695, 0.0, 0.0, 0.0, 0.02228]),
    "osnet_x0_25": (587127, "5f7322bdb7dcc0ac", 38.8383, [0.07126, 0.18158, 0.0, 0.02746, 0.0189, 0.0]),
    "osnet_ain_x1_0": (2554771, "d698d3ce49a2adfa", 43.8821, [0.0, 0.06587, 0.0, 0.09708, 0.0, 0.0]),
}


def seeded(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Deterministic weights in state_dict order: N(0, 0.1), running variances in [0.5, 1.5)."""
    generator = torch.Generator().manual_seed(0)
    filled = {}
    for key, value in state.items():
        if not value.dtype.is_floating_point:
            filled[key] = value
        elif key.endswith("running_var"):
            filled[key] = torch.rand(value.shape, generator=generator) + 0.5
        else:
            filled[key] = torch.randn(value.shape, generator=generator) * 0.1
    return filled


def reference_input() -> torch.Tensor:
    return torch.randn(2, 3, 256, 128, generator=torch.Generator().manual_seed(1))


def test_every_variant_is_an_architecture() -> None:
    assert set(OSNET_VARIANTS) <= set(known_architectures())
    assert set(TORCHREID_REFERENCE) == set(OSNET_VARIANTS)


@pytest.mark.parametrize("name", list(TORCHREID_REFERENCE))
def test_osnet_equals_torchreid(name: str) -> None:
    params, names_hash, feature_sum, first = TORCHREID_REFERENCE[name]
    net = OSNet(name, num_classes=751).eval()
    assert sum(p.numel() for p in net.parameters()) == params
    signature = "\n".join(f"{k}:{tuple(v.shape)}" for k, v in net.state_dict().items())
    assert hashlib.sha256(signature.encode()).hexdigest()[:16] == names_hash
    net.load_state_dict(seeded(net.state_dict()))
    with torch.no_grad():
        feature = net(reference_input())
    assert feature.shape == (2, 512)
    assert feature.sum().item() == pytest.approx(feature_sum, abs=2e-3)
    assert feature[0, :6].tolist() == pytest.approx(first, abs=1e-4)


@pytest.mark.parametrize("name", ["osnet_x0_25", "osnet_ain_x1_0"])
def test_osnet_backbone_in_reidnet(name: str) -> None:
    net = ReidNet(name, num_classes=5)
    channels = OSNET_VARIANTS[name].channels[3]
    out = net(torch.randn(4, 3, 256, 128))
    assert out.feature.shape == (4, channels) and out.logits.shape == (4, 5)
    assert net.backbone(torch.randn(1, 3, 256, 128)).shape == (1, channels, 16, 8)
    # The backbone is torchreid's network without its head: the same parameters, fewer.
    whole = OSNet(name, num_classes=5)
    backbone_params = sum(p.numel() for p in net.backbone.parameters())
    head_params = sum(p.numel() for m in (whole.fc, whole.classifier) for p in m.parameters())
    assert backbone_params == sum(p.numel() for p in whole.parameters()) - head_params
