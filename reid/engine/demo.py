"""The main job on built-in data: synthetic set, untrained score, training, trained score."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from reid.data import ReidDataset, load_dataset
from reid.engine.config import TrainConfig
from reid.engine.trainer import TrainCallbacks, TrainResult, build_card, evaluate_dataset, train
from reid.evaluation import RankingResult
from reid.models.encoder import TorchEncoder
from reid.models.card import save_card
from reid.models.folder import default_device, load_encoder
from reid.models.network import ReidNet


def demo_config(out: Path = Path("models/demo")) -> TrainConfig:
    """The demo's training recipe: small, fast on two CPU cores, far better than untrained."""
    return TrainConfig(
        data="synthetic",
        out=out,
        name="demo",
        architecture="resnet18",
        input_size=(64, 32),
        p=16,
        k=4,
        epochs=20,
        lr=3e-3,
        warmup_epochs=1,
        schedule="cosine",
        eval_every=0,
        metric_options={"mining": "hard", "margin": 0.3},
    )


@dataclass
class DemoResult:
    untrained: RankingResult
    trained: RankingResult
    seconds: float
    model_dir: Path
    train: TrainResult
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "untrained": self.untrained.to_dict(),
            "trained": self.trained.to_dict(),
            "seconds": round(self.seconds, 1),
            "model": str(self.model_dir),
        }


def untrained_encoder(config: TrainConfig, dataset: ReidDataset) -> TorchEncoder:
    """The network exactly as training starts from it (same seed, same architecture)."""
    torch.manual_seed(config.seed)
    initial = ReidNet(
        config.architecture,
        num_classes=dataset.num_train_ids,
        embedding_dim=config.embedding_dim,
        pooling=config.pooling,
        last_stride=config.last_stride,
        pretrained=config.pretrained,
    )
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
    result = train(replace(config, eval_every=0), callbacks)
    encoder = load_encoder(result.model_dir, config.device)
    trained = evaluate_dataset(encoder, dataset, config.eval_batch_size, callbacks.on_eval_progress)
    result.card.metrics = {"dataset": config.data, "protocol": "market1501", **trained.to_dict()}
    save_card(result.card, result.model_dir)
    return DemoResult(untrained, trained, time.perf_counter() - started, result.model_dir, result)
