"""The main job on built-in data: synthetic set, untrained score, training, trained score."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from reid.data import ReidDataset, load_dataset
from reid.decision import similarity_to_distance
from reid.engine.config import TrainConfig
from reid.engine.trainer import TrainCallbacks, TrainResult, build_card, evaluate_dataset, train
from reid.evaluation import EncoderEvaluation, RankingResult, ThresholdChoice, choose_threshold, evaluate_encoder
from reid.models.backbones import backbone_spec
from reid.models.card import ModelCard, save_card
from reid.models.encoder import TorchEncoder
from reid.models.folder import default_device, load_encoder
from reid.models.stand_in import untrained_network


def demo_config() -> TrainConfig:
    """The demo's training recipe: small, fast on two CPU cores, far better than untrained
    (``configs/demo.yaml`` spells it out as a file).

    It trains from scratch: its learning rate suits random initialisation, and fine-tuning
    an ImageNet start with it (EfficientNet-Lite0) collapsed to Rank-1 0.0."""
    return TrainConfig(
        data="synthetic",
        out=Path("models/demo"),
        name="demo",
        architecture="resnet18",
        pretrained=None,
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
            "threshold": self.train.card.threshold,
            "model": str(self.model_dir),
            "start": self.train.pretrained_note,
        }


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


def split_threshold(evaluation: EncoderEvaluation, dataset: ReidDataset, target_far: float = 1e-2) -> ThresholdChoice:
    """A verification threshold from the query x gallery pairs of the evaluation split.

    Pairs of the same identity seen by the same camera are left out, as in ranking, so the
    genuine pairs are the cross-camera ones the threshold has to accept.
    """
    q_pids = np.array([r.pid for r in dataset.query])
    g_pids = np.array([r.pid for r in dataset.gallery])
    q_cams = np.array([r.camid for r in dataset.query])
    g_cams = np.array([r.camid for r in dataset.gallery])
    similarity = evaluation.query_features @ evaluation.gallery_features.T
    distances = similarity_to_distance(similarity)
    same = q_pids[:, None] == g_pids[None, :]
    keep = ~(same & (q_cams[:, None] == g_cams[None, :]))
    return choose_threshold(distances[keep], same[keep], target_far)


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
    evaluation = evaluate_encoder(
        encoder, dataset.query, dataset.gallery, batch_size=config.eval_batch_size, on_progress=callbacks.on_eval_progress
    )
    choice = split_threshold(evaluation, dataset)
    result.card.metrics = {"dataset": config.data, "protocol": "market1501", **evaluation.result.to_dict()}
    result.card.threshold = choice.threshold
    result.card.threshold_source = (
        f"reid demo: {choice.criterion} on the query x gallery pairs of {config.data} "
        f"({choice.num_genuine} genuine, {choice.num_impostor} impostor); TAR {choice.tar:.4f}"
    )
    save_card(result.card, result.model_dir)
    return DemoResult(untrained, evaluation.result, time.perf_counter() - started, result.model_dir, result)
