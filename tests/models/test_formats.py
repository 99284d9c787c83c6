"""Each checkpoint format is recognised by its names and maps every tensor but its
classifier onto ReidNet."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torchvision
from torch import nn

from reid.errors import ModelError
from reid.models import ModelCard, build_network
from reid.models.formats import CLASSIFIER, FORMATS, NAMED_FORMATS, checkpoint_format
from reid.models.osnet import OSNet
from reid.models.registry import ARTEFACTS


def torchvision_resnet18() -> dict[str, torch.Tensor]:
    return torchvision.models.resnet18(weights=None).state_dict()


def fastreid_resnet18() -> dict[str, torch.Tensor]:
    state = {f"backbone.{k}": v for k, v in torchvision_resnet18().items() if not k.startswith("fc.")}
    state.update({f"heads.bottleneck.0.{k}": v for k, v in nn.BatchNorm2d(512).state_dict().items()})
    state["heads.weight"] = torch.randn(10, 512)
    state["pixel_mean"], state["pixel_std"] = torch.tensor([[[[123.7]], [[116.3]], [[103.5]]]]), torch.full((1, 3, 1, 1), 58.0)
    return state


def torchreid_resnet18() -> dict[str, torch.Tensor]:
    state = {k: v for k, v in torchvision_resnet18().items() if not k.startswith("fc.")}
    state["classifier.weight"], state["classifier.bias"] = torch.randn(10, 512), torch.zeros(10)
    return state


def reid_resnet18() -> dict[str, torch.Tensor]:
    return build_network(ModelCard(name="m", architecture="resnet18", embedding_dim=512, num_classes=10)).state_dict()


SAMPLES = {
    "reid": ("resnet18", reid_resnet18, 1),
    "fastreid": ("resnet18", fastreid_resnet18, 1),
    "torchreid": ("resnet18", torchreid_resnet18, 2),
    "torchvision": ("resnet18", torchvision_resnet18, 2),
}


def test_every_named_format_has_a_sample() -> None:
    assert set(SAMPLES) == set(NAMED_FORMATS)


@pytest.mark.parametrize("name", list(SAMPLES))
def test_each_format_is_recognised_and_mapped(name: str) -> None:
    architecture, make, classifier_tensors = SAMPLES[name]
    state = make()
    fmt = checkpoint_format(state, architecture)
    assert fmt.name == name
    placed = fmt.place(state, architecture)
    assert placed.unplaced == [] and len(placed.classifier) == classifier_tensors
    head = fmt.head(state, architecture, Path("x.pth"))
    network = build_network(ModelCard(
        name="m", architecture=architecture, embedding_dim=head.embedding_dim or 512, neck=head.neck,
        last_stride=head.last_stride, stem_pool=head.stem_pool,
    ))
    assert set(placed.state) == set(network.state_dict()), name
    assert all(placed.state[k].shape == v.shape for k, v in network.state_dict().items())


def test_torchreid_osnet_is_recognised_by_its_architecture() -> None:
    state = OSNet("osnet_x0_25", num_classes=5).state_dict()
    fmt = checkpoint_format(state, "osnet_x0_25")
    head = fmt.head(state, "osnet_x0_25", Path("o.pth"))
    assert (fmt.name, head.neck, head.embedding_dim) == ("torchreid", "fc", 512)
    assert fmt.rename("fc.0.weight", state, lambda key: None)[0] == "reduction.0.weight"
    assert fmt.rename("classifier.weight", state, lambda key: None) == CLASSIFIER


def test_fastreid_normalisation_comes_from_the_file() -> None:
    head = FORMATS["fastreid"].head(fastreid_resnet18(), "resnet18", Path("f.pth"))
    assert head.mean == pytest.approx((123.7 / 255, 116.3 / 255, 103.5 / 255)) and head.stem_pool == "ceil"
    broken = {**fastreid_resnet18(), "pixel_std": torch.ones(2)}
    with pytest.raises(ModelError, match=r"f\.pth: pixel_std has shape \[2\]"):
        FORMATS["fastreid"].head(broken, "resnet18", Path("f.pth"))


def test_registry_checkpoints_name_a_format() -> None:
    for artefact in ARTEFACTS.values():
        assert artefact.layout in FORMATS or artefact.layout in ("tensorflow-frozen-graph", "onnx", "openvino-ir"), artefact.name


def test_an_unknown_format_name_is_one_line() -> None:
    with pytest.raises(ModelError, match="unknown checkpoint format 'caffe'; choose one of reid, fastreid, torchreid, torchvision"):
        checkpoint_format({}, "resnet18", "caffe")
