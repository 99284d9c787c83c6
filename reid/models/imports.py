"""``reid import``: turn a checkpoint from elsewhere (torchreid, fast-reid, DataParallel
wrappers) into a model folder that every command takes like one trained here."""

from __future__ import annotations

from pathlib import Path

from reid.errors import ModelError
from reid.models.backbones import backbone_spec
from reid.models.card import IMAGENET_MEAN, IMAGENET_STD, ModelCard
from reid.models.checkpoints import SOURCES, detect_layout, read_state
from reid.models.folder import check_model_output, save_model
from reid.models.network import ReidNet
from reid.models.pretrained import Start, load_start
from reid.paths import check_output_folder


def _width(state: dict, key: str, dims: int, path: Path) -> int:
    """The output width of the layer tensor ``key``, which must have ``dims`` dimensions."""
    tensor = state[key]
    if tensor.dim() != dims or tensor.shape[0] < 1:
        raise ModelError(f"{path}: {key} has shape {list(tensor.shape)}; a layer of this kind has {dims} dimension(s)")
    return int(tensor.shape[0])


def _head(state: dict, architecture: str, layout: str, path: Path) -> tuple[str, int | None, int]:
    """``(neck, embedding_dim, last_stride)`` of the network the checkpoint was saved from."""
    if layout == "fastreid":
        key = "heads.bottleneck.0.weight"
        return "bnneck", _width(state, key, 1, path) if key in state else None, 1
    if layout == "reid":
        if "bnneck.weight" not in state:
            raise ModelError(f"{path}: a model-folder checkpoint without bnneck.weight")
        return "bnneck", _width(state, "bnneck.weight", 1, path), 1
    if backbone_spec(architecture).family == "osnet" and "fc.0.weight" in state:
        return "fc", _width(state, "fc.0.weight", 2, path), 1
    # torchreid's plain ResNets keep ResNet's last stride 2 and embed the pooled feature.
    return "none", None, 2


def import_model(
    path: Path,
    architecture: str,
    out: Path,
    source: str | None = None,
    last_stride: int | None = None,
    input_size: tuple[int, int] = (256, 128),
    overwrite: bool = False,
) -> ModelCard:
    """Write ``out`` as a model folder holding the checkpoint's weights and a card.

    The card carries the source's preprocessing (RGB, ``input_size`` HxW, ImageNet
    mean/std, as torchreid and fast-reid train) and a neck that reproduces the source's
    eval-mode feature: torchreid's OSNet ``fc`` output, torchreid's ResNet pooled feature,
    fast-reid's BNNeck feature. The classifier is dropped. Raises ModelError (one line
    naming the file) for a file that is not a state_dict or does not fit ``architecture``,
    and ConfigError, before reading it, when ``out`` holds a finished model and
    ``overwrite`` is False. The folder is replaced whole (:func:`save_model`).
    """
    path, out = Path(path), Path(out)
    check_output_folder(out, "--out")
    check_model_output(out, "--out", overwrite)
    state = read_state(path)
    layout = SOURCES[source] if source else detect_layout(state)
    neck, embedding_dim, default_stride = _head(state, architecture, layout, path)
    stride = default_stride if last_stride is None else last_stride
    network = ReidNet(architecture, num_classes=0, embedding_dim=embedding_dim, last_stride=stride, neck=neck).eval()
    load_start(network, Start(state, layout, str(path)))
    card = ModelCard(
        name=out.name,
        architecture=architecture,
        embedding_dim=network.embedding_dim,
        input_size=input_size,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        channel_order="rgb",
        neck=neck,
        last_stride=stride,
        num_classes=0,
        pretrained=network.pretrained_note,
        training_data={"imported_from": path.name, "format": source or layout},
    )
    return save_model(network, card, out)
