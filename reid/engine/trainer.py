"""The training loop: one loop for every loss, P x K batches, checkpoint and resume.

The network's pre-BN feature feeds the metric loss and its classifier logits feed the
identity cross-entropy (BNNeck); the total is ``ce_weight * CE + metric_weight * metric``.
Every epoch ends with an atomic checkpoint (``checkpoint.pt``) from which ``resume``
continues bit-for-bit in the data order; the finished model lands as a model folder.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from reid.data import ReidDataset, load_dataset, read_image, relabel
from reid.data.sampler import PKSampler
from reid.data.transforms import AugmentConfig, augment, resize_chw
from reid.engine.config import TrainConfig
from reid.errors import DataError, ModelError, ReidError
from reid.evaluation import RankingResult, evaluate_encoder
from reid.losses import build_loss
from reid.losses.registry import loss_options, typed_options
from reid.models.card import IMAGENET_MEAN, IMAGENET_STD, ModelCard, atomic_write_bytes
from reid.models.encoder import Encoder, TorchEncoder
from reid.models.folder import default_device, save_model
from reid.models.network import ReidNet

CHECKPOINT_FILE = "checkpoint.pt"


class TrainingDiverged(ReidError):
    """The loss became NaN or infinite."""


@dataclass
class StepInfo:
    """What a progress callback sees after every step."""

    epoch: int
    epochs: int
    step: int
    steps_per_epoch: int
    loss: float
    ce: float
    metric: float
    lr: float
    images_per_second: float


@dataclass
class TrainCallbacks:
    on_start: Callable[[dict[str, Any]], None] | None = None
    on_step: Callable[[StepInfo], None] | None = None
    on_epoch: Callable[[int, dict[str, Any]], None] | None = None
    on_eval_progress: Callable[[int, int], None] | None = None


@dataclass
class TrainResult:
    model_dir: Path
    card: ModelCard
    history: list[dict[str, Any]] = field(default_factory=list)
    skipped_images: list[tuple[Path, str]] = field(default_factory=list)
    seconds: float = 0.0
    pretrained_note: str = ""


def load_images(
    records: list, size: tuple[int, int], on_progress: Callable[[int, int], None] | None = None
) -> tuple[torch.Tensor, list[int], list[tuple[Path, str]]]:
    """Decode and resize every training image once into one uint8 tensor.

    Unreadable images are skipped and returned with their reason, so one bad file does
    not stop a training run.
    """
    def read(record: Any) -> Any:
        try:
            return resize_chw(read_image(record.path), size)
        except DataError as exc:
            return str(exc)

    images, kept, failed = [], [], []
    with ThreadPoolExecutor(max_workers=4) as pool:
        for i, result in enumerate(pool.map(read, records)):
            if isinstance(result, str):
                failed.append((records[i].path, result))
            else:
                images.append(result)
                kept.append(i)
            if on_progress and (i + 1) % 256 == 0:
                on_progress(i + 1, len(records))
    if not images:
        raise DataError(f"no readable training image among {len(records)} files")
    return torch.stack(images), kept, failed


def evaluate_dataset(
    encoder: Encoder, dataset: ReidDataset, batch_size: int = 128, on_progress: Callable[[int, int], None] | None = None
) -> RankingResult:
    """Rank-k, mAP and mINP of ``encoder`` on the dataset's query/gallery split."""
    return evaluate_encoder(encoder, dataset.query, dataset.gallery, batch_size=batch_size, on_progress=on_progress).result


def _lr_factor(config: TrainConfig, epoch_progress: float) -> float:
    """Linear warm-up from 10% then step or cosine decay; ``epoch_progress`` is fractional."""
    if config.warmup_epochs > 0 and epoch_progress < config.warmup_epochs:
        return 0.1 + 0.9 * epoch_progress / config.warmup_epochs
    if config.schedule == "cosine":
        span = max(config.epochs - config.warmup_epochs, 1e-9)
        t = min((epoch_progress - config.warmup_epochs) / span, 1.0)
        return 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * t))
    if config.schedule == "step":
        return config.gamma ** sum(epoch_progress >= m for m in config.milestones)
    return 1.0


def _has_parameters(module: torch.nn.Module | None) -> bool:
    return module is not None and any(True for _ in module.parameters())


def _base_lrs(config: TrainConfig, metric: torch.nn.Module | None) -> list[float]:
    """Learning rate of each parameter group: the network, then a loss's own centers."""
    lrs = [config.lr]
    if _has_parameters(metric):
        lrs.append(float(getattr(metric, "center_lr", config.lr)))
    return lrs


def _build_optimizer(config: TrainConfig, network: ReidNet, metric: torch.nn.Module | None) -> torch.optim.Optimizer:
    lrs = _base_lrs(config, metric)
    groups = [{"params": [p for p in network.parameters() if p.requires_grad], "lr": lrs[0], "base_lr": lrs[0]}]
    if _has_parameters(metric):
        groups.append({"params": list(metric.parameters()), "lr": lrs[1], "base_lr": lrs[1], "weight_decay": 0.0})
    if config.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay, nesterov=True)
    cls = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    return cls(groups, lr=config.lr, weight_decay=config.weight_decay)


def metric_options(config: TrainConfig, num_classes: int, dim: int) -> dict[str, Any] | None:
    """The metric loss's typed options, with the class count and dimension a loss with
    its own centers needs; None when no metric loss is used."""
    if config.metric_weight == 0 or not config.metric_loss or config.metric_loss == "none":
        return None
    options = dict(config.metric_options)
    accepted = loss_options(config.metric_loss)
    if "num_classes" in accepted:
        options.setdefault("num_classes", num_classes)
    if "embedding_dim" in accepted:
        options.setdefault("embedding_dim", dim)
    return typed_options(config.metric_loss, **options)


def _build_metric(config: TrainConfig, num_classes: int, dim: int) -> torch.nn.Module | None:
    options = metric_options(config, num_classes, dim)
    return None if options is None else build_loss(config.metric_loss, **options)


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def _load_checkpoint(path: Path) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ModelError(f"{path}: checkpoint cannot be read ({exc.__class__.__name__}); remove it or train without --resume") from exc


def build_card(config: TrainConfig, dataset: ReidDataset, num_classes: int, network: ReidNet, pretrained_note: str) -> ModelCard:
    options = metric_options(config, num_classes, network.embedding_dim)
    metric = {} if options is None else {"name": config.metric_loss, "weight": config.metric_weight, **options}
    return ModelCard(
        name=config.name or Path(config.out).name,
        architecture=config.architecture,
        embedding_dim=network.embedding_dim,
        input_size=tuple(config.input_size),
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        pooling=config.pooling,
        last_stride=config.last_stride,
        # The card describes the saved network: without cross-entropy it has no classifier.
        num_classes=network.classifier.out_features if network.classifier is not None else 0,
        pretrained=pretrained_note,
        loss={
            "cross_entropy": {"weight": config.ce_weight, "label_smoothing": config.label_smoothing},
            "metric": metric,
        },
        training_data={
            "spec": config.data,
            "name": dataset.name,
            "train_images": len(dataset.train),
            "train_identities": num_classes,
        },
        training=config.to_dict(),
    )


def train(config: TrainConfig, callbacks: TrainCallbacks | None = None) -> TrainResult:
    """Train an encoder as ``config`` says and write it to ``config.out``."""
    config.validate()
    callbacks = callbacks or TrainCallbacks()
    started = time.perf_counter()
    device = torch.device(config.device or default_device())
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    out = Path(config.out)
    checkpoint_path = out / CHECKPOINT_FILE
    if config.resume and not checkpoint_path.is_file():
        raise ModelError(f"{checkpoint_path}: no checkpoint to resume from")

    dataset = load_dataset(config.data)
    images, kept, skipped = load_images(dataset.train, tuple(config.input_size))
    records = [dataset.train[i] for i in kept]
    labels_list, _ = relabel(records)
    labels = torch.tensor(labels_list)
    num_classes = int(labels.max()) + 1

    network = ReidNet(
        config.architecture,
        num_classes=num_classes if config.ce_weight > 0 else 0,
        embedding_dim=config.embedding_dim,
        pooling=config.pooling,
        last_stride=config.last_stride,
        pretrained=config.pretrained,
    ).to(device)
    metric = _build_metric(config, num_classes, network.embedding_dim)
    if metric is not None:
        metric.to(device)
    optimizer = _build_optimizer(config, network, metric)
    sampler = PKSampler(labels_list, config.p, config.k, seed=config.seed)
    use_amp = config.amp and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

    card = build_card(config, dataset, num_classes, network, network.pretrained_note)
    history: list[dict[str, Any]] = []
    start_epoch = 0
    if config.resume:
        state = _load_checkpoint(checkpoint_path)
        if state.get("optimizer_name", config.optimizer) != config.optimizer:
            raise ModelError(
                f"{checkpoint_path}: checkpoint was made with optimizer {state['optimizer_name']}, not {config.optimizer}"
            )
        try:
            network.load_state_dict(state["model"])
            if metric is not None and "metric" in state:
                metric.load_state_dict(state["metric"])
            optimizer.load_state_dict(state["optimizer"])
            # The checkpoint restores the old learning rates; the command line's win.
            for group, lr in zip(optimizer.param_groups, _base_lrs(config, metric)):
                group["base_lr"] = lr
        except (KeyError, RuntimeError, ValueError) as exc:
            raise ModelError(f"{checkpoint_path}: checkpoint does not match this configuration ({exc.__class__.__name__}: {str(exc).splitlines()[0]})") from exc
        start_epoch = int(state["epoch"]) + 1
        history = list(state.get("history", []))

    steps_per_epoch = len(sampler)
    if callbacks.on_start:
        callbacks.on_start({
            "device": str(device),
            "train_images": len(records),
            "identities": num_classes,
            "skipped": len(skipped),
            "steps_per_epoch": steps_per_epoch,
            "pretrained": network.pretrained_note,
            "start_epoch": start_epoch,
        })

    generator = torch.Generator().manual_seed(config.seed)
    aug = AugmentConfig()
    step_total = start_epoch * steps_per_epoch
    for epoch in range(start_epoch, config.epochs):
        generator.manual_seed(config.seed * 7919 + epoch)
        sampler.set_epoch(epoch)
        network.train()
        sums = {"loss": 0.0, "ce": 0.0, "metric": 0.0}
        epoch_start = time.perf_counter()
        seen = 0
        for step, batch_indices in enumerate(sampler):
            if config.max_steps is not None and step_total >= config.max_steps:
                break
            factor = _lr_factor(config, epoch + step / steps_per_epoch)
            for group in optimizer.param_groups:
                group["lr"] = group["base_lr"] * factor
            index = torch.tensor(batch_indices)
            batch = augment(images[index], IMAGENET_MEAN, IMAGENET_STD, aug, generator).to(device, non_blocking=True)
            target = labels[index].to(device)
            with torch.autocast(device.type, enabled=use_amp):
                output = network(batch)
            ce = F.cross_entropy(output.logits.float(), target, label_smoothing=config.label_smoothing) if output.logits is not None else torch.zeros((), device=device)
            metric_value = metric(output.feature.float(), target) if metric is not None else torch.zeros((), device=device)
            loss = config.ce_weight * ce + config.metric_weight * metric_value
            if not torch.isfinite(loss):
                kept_note = f"; the last good checkpoint is {checkpoint_path}" if checkpoint_path.is_file() else ""
                raise TrainingDiverged(
                    f"loss became {loss.item()} at epoch {epoch + 1} step {step + 1} (lower --lr or enable --grad-clip){kept_note}"
                )
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if config.grad_clip:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(network.parameters(), config.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            step_total += 1
            seen += len(batch_indices)
            sums["loss"] += loss.item()
            sums["ce"] += ce.item()
            sums["metric"] += metric_value.item()
            if callbacks.on_step:
                callbacks.on_step(StepInfo(
                    epoch=epoch, epochs=config.epochs, step=step, steps_per_epoch=steps_per_epoch,
                    loss=loss.item(), ce=ce.item(), metric=metric_value.item(),
                    lr=optimizer.param_groups[0]["lr"],
                    images_per_second=seen / max(time.perf_counter() - epoch_start, 1e-9),
                ))
        steps_done = max(1, min(steps_per_epoch, seen // (config.p * config.k)))
        entry: dict[str, Any] = {k: v / steps_done for k, v in sums.items()}
        entry["epoch"] = epoch + 1
        entry["images_per_second"] = seen / max(time.perf_counter() - epoch_start, 1e-9)
        last_epoch = epoch + 1 == config.epochs or (config.max_steps is not None and step_total >= config.max_steps)
        if config.eval_every and ((epoch + 1) % config.eval_every == 0 or last_epoch):
            result = evaluate_dataset(TorchEncoder(network, card, device), dataset, config.eval_batch_size, callbacks.on_eval_progress)
            network.train()
            entry["eval"] = result.to_dict()
        history.append(entry)
        state = {
            "model": network.state_dict(),
            "optimizer": optimizer.state_dict(),
            "optimizer_name": config.optimizer,
            "epoch": epoch,
            "history": history,
        }
        if metric is not None:
            state["metric"] = metric.state_dict()
        _save_checkpoint(checkpoint_path, state)
        if callbacks.on_epoch:
            callbacks.on_epoch(epoch, entry)
        if last_epoch:
            break

    network.eval()
    card.training["history"] = history
    final_eval = next((h["eval"] for h in reversed(history) if "eval" in h), None)
    if final_eval:
        card.metrics = {"dataset": config.data, "protocol": "market1501", **final_eval}
    card = save_model(network, card, out)
    return TrainResult(out, card, history, skipped, time.perf_counter() - started, network.pretrained_note)
