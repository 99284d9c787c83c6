"""``reid import``: turn a checkpoint from elsewhere (torchreid, fast-reid, a plain or
DataParallel state_dict) into a model folder that every command takes like one trained
here, reproducing the source network's own eval forward or refusing the file."""

from __future__ import annotations

from pathlib import Path

import torch

from reid.errors import ModelError
from reid.models.backbones import backbone_spec
from reid.models.card import IMAGENET_MEAN, IMAGENET_STD, POOLINGS, ModelCard
from reid.models.checkpoints import read_state
from reid.models.folder import check_model_output, save_model
from reid.models.formats import Head, checkpoint_format, fit, prepared
from reid.models.network import ReidNet
from reid.paths import check_output_folder

# fast-reid's fixed GeM (``gempool``) stores no exponent; its p is 3.
FIXED_GEM_P = 3.0


def _pooling(head: Head, pooling: str | None, path: Path) -> str:
    """The pooling the file says, else the one given; a given one that contradicts the file is refused."""
    if pooling is None:
        return head.pooling
    if pooling not in POOLINGS:
        raise ModelError(f"unknown pooling {pooling!r}; choose {' or '.join(POOLINGS)}")
    if head.pooling == "gem" and pooling != "gem":
        raise ModelError(f"{path}: holds a learned GeM exponent, so its pooling is gem, not {pooling}")
    return pooling


def _describe(source: str, architecture: str, head: Head, pooling: str, stride: int, embedding_dim: int) -> str:
    neck = {"bnneck": "BNNeck", "fc": "fc (Linear + BatchNorm + ReLU)", "none": "no neck"}[head.neck]
    parts = [f"{architecture}", f"{'GeM' if pooling == 'gem' else 'average'} pooling", neck, f"{embedding_dim}-d", f"last stride {stride}"]
    if head.stem_pool == "ceil":
        parts.append("fast-reid's stem max-pool")
    if head.mean is not None or head.std is not None:
        parts.append("its pixel mean/std")
    return f"{source}: {', '.join(parts)}"


def import_model(
    path: Path,
    architecture: str,
    out: Path,
    source: str | None = None,
    last_stride: int | None = None,
    input_size: tuple[int, int] = (256, 128),
    overwrite: bool = False,
    pooling: str | None = None,
) -> ModelCard:
    """Write ``out`` as a model folder holding the checkpoint's weights and a card.

    The format (:mod:`reid.models.formats`) is recognised from the tensor names unless
    ``source`` names it. The network is built with the source's head (pooling, neck,
    last stride, stem max-pool) and every one of its tensors must come from the file, and
    every tensor of the file but its classifier must find a place: the import reproduces
    the source's eval forward, or it is refused. ``pooling`` says what the file cannot
    (fast-reid's fixed GeM leaves no tensor; ``gem`` then means p = 3). The card carries the
    source's preprocessing: RGB, ``input_size`` HxW, the file's pixel mean/std when it
    holds them (fast-reid), else ImageNet's, as torchreid trains.

    Raises ModelError (one line naming the file) for a file that is not a state_dict, or
    whose tensors do not make ``architecture`` with its head (naming the tensors), and
    ConfigError, before reading it, for an unknown architecture or when ``out`` holds a
    finished model and ``overwrite`` is False. The folder is replaced whole
    (:func:`save_model`).
    """
    path, out = Path(path), Path(out)
    backbone_spec(architecture)
    check_output_folder(out, "--out")
    check_model_output(out, "--out", overwrite)
    state = read_state(path)
    fmt = checkpoint_format(state, architecture, source)
    state = prepared(fmt, state, architecture, path)
    head = fmt.head(state, architecture, path)
    pool = _pooling(head, pooling, path)
    stride = head.last_stride if last_stride is None else last_stride
    placed = fmt.place(state, architecture)
    if pool == "gem" and "pool.p" not in placed.state:
        placed.state["pool.p"], placed.origin["pool.p"] = torch.tensor(FIXED_GEM_P), "pool.p"
    network = ReidNet(architecture, 0, head.embedding_dim, pool, stride, head.neck, head.stem_pool).eval()
    notes = fit(network, placed, architecture, path, exact=True)
    described = _describe(fmt.source, architecture, head, pool, stride, network.embedding_dim)
    card = ModelCard(
        name=out.name,
        architecture=architecture,
        embedding_dim=network.embedding_dim,
        input_size=input_size,
        mean=head.mean or IMAGENET_MEAN,
        std=head.std or IMAGENET_STD,
        channel_order="rgb",
        pooling=pool,
        neck=head.neck,
        last_stride=stride,
        stem_pool=head.stem_pool,
        num_classes=0,
        pretrained=f"imported from {path.name} ({described})" + "".join(f"; {note}" for note in notes),
        training_data={"imported_from": path.name, "format": fmt.name},
    )
    return save_model(network, card, out)
