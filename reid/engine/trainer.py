"""The training loop: one loop for every loss, P x K batches, checkpoint and resume.

The network's pre-BN feature feeds the metric loss and its classifier logits feed the
identity cross-entropy (BNNeck); the total is ``ce_weight * CE + metric_weight * metric``.
Every epoch ends with an atomic checkpoint (``checkpoint.pt``) from which ``resume``
continues bit-for-bit in the data order; the finished model lands as a model folder.
The folder also holds the run's effective config (``config.yaml``, what a resumed run is
checked against) and its record (``history.jsonl``, ``curves.png``; see
:mod:`reid.engine.history`).

Started by ``torchrun`` the same loop runs in every process under DistributedDataParallel:
each process trains on its own P identities of every global step, gradients are averaged
over the processes, and rank 0 alone calls the callbacks, evaluates and writes files.
"""

from __future__ import annotations

import contextlib
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
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from reid.data import ReidDataset, load_dataset, read_image, relabel
from reid.data.sampler import PKSampler
from reid.data.transforms import AugmentConfig, augment, resize_chw
from reid.engine.config import TrainConfig, check_resume_config, write_config
from reid.engine.distributed import DistributedContext, distributed_session, gather_rows
from reid.engine.history import TrainingLog, require_tensorboard
from reid.errors import DataError, ModelError, ReidError
from reid.evaluation import RankingResult, evaluate_encoder
from reid.losses import build_loss
from reid.losses.registry import loss_options, typed_options
from reid.models.card import ModelCard, atomic_write_bytes, remove_stale_temporaries
from reid.models.encoder import Encoder, TorchEncoder
from reid.models.folder import save_model
from reid.models.network import ReidNet
from reid.models.pretrained import resolve_start
from reid.paths import check_output_folder

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
    """Progress hooks; in a run of several processes only rank 0 calls them."""

    on_start: Callable[[dict[str, Any]], None] | None = None
    on_step: Callable[[StepInfo], None] | None = None
    on_epoch: Callable[[int, dict[str, Any]], None] | None = None
    on_eval_progress: Callable[[int, int], None] | None = None


@dataclass
class TrainResult:
    """What :func:`train` returns on every process; rank 0 wrote the model folder and
    ``network`` is the trained network as this process holds it."""

    model_dir: Path
    card: ModelCard
    history: list[dict[str, Any]] = field(default_factory=list)
    skipped_images: list[tuple[Path, str]] = field(default_factory=list)
    seconds: float = 0.0
    pretrained_note: str = ""
    network: ReidNet | None = None
    rank: int = 0
    world_size: int = 1


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
    if not config.uses_metric_loss:
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
        mean=network.input_mean,
        std=network.input_std,
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


class TrainingObjective(nn.Module):
    """The network and its losses as one module, so that DistributedDataParallel sees every
    parameter it must keep in step (a metric loss's own centers included) used in forward.

    Returns the identity cross-entropy of this process's batch and the metric loss, the
    latter over the global batch when ``gather`` collects the features of every process.
    """

    def __init__(
        self,
        network: ReidNet,
        metric: nn.Module | None,
        label_smoothing: float,
        use_amp: bool,
        gather: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        self.network = network
        self.metric = metric
        self.label_smoothing = label_smoothing
        self.use_amp = use_amp
        self.gather = gather

    def forward(self, images: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(images.device.type, enabled=self.use_amp):
            output = self.network(images)
        zero = torch.zeros((), device=images.device)
        ce = F.cross_entropy(output.logits.float(), targets, label_smoothing=self.label_smoothing) if output.logits is not None else zero
        if self.metric is None:
            return ce, zero
        feature = output.feature.float()
        if self.gather is not None:
            feature, targets = self.gather(feature), self.gather(targets)
        return ce, self.metric(feature, targets)


def _read_resume_state(checkpoint_path: Path, ctx: DistributedContext, config: TrainConfig) -> dict[str, Any]:
    """Rank 0 checks ``config`` against the run's saved config, reads the checkpoint and
    sends it to every process, so that other machines resume without a copy of rank 0's
    files; a missing or broken file or a config that trains something else stops every
    process."""
    state: dict[str, Any] | None = None
    error: ReidError | None = None
    if ctx.is_main:
        try:
            if not checkpoint_path.is_file():
                raise ModelError(f"{checkpoint_path}: no checkpoint to resume from")
            check_resume_config(config, checkpoint_path.parent)
            state = _load_checkpoint(checkpoint_path)
        except ModelError as exc:
            error = exc
    error = ctx.broadcast(error)
    if error is not None:
        raise error
    return ctx.broadcast(state)


def train(config: TrainConfig, callbacks: TrainCallbacks | None = None) -> TrainResult:
    """Train an encoder as ``config`` says and write it to ``config.out``.

    Under ``torchrun`` every process calls this; it joins the process group the launcher
    describes and leaves it on return or error.
    """
    config.validate()
    check_output_folder(Path(config.out), "--out")
    if config.tensorboard is not None:
        require_tensorboard(config.tensorboard)
    with distributed_session(config.device, config.sync_bn) as ctx, contextlib.ExitStack() as resources:
        return _train(config, callbacks or TrainCallbacks(), ctx, resources)


def _train(
    config: TrainConfig, callbacks: TrainCallbacks, ctx: DistributedContext, resources: contextlib.ExitStack
) -> TrainResult:
    started = time.perf_counter()
    device = ctx.device
    if not ctx.is_main:
        callbacks = TrainCallbacks()
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    out = Path(config.out)
    checkpoint_path = out / CHECKPOINT_FILE
    if ctx.is_main and out.is_dir():
        # A run killed mid-write left its temporary checkpoint (as large as the model and
        # optimizer state) behind.
        remove_stale_temporaries(out)
    state = _read_resume_state(checkpoint_path, ctx, config) if config.resume else None
    # Resolved before the images are decoded, so a missing ImageNet download fails at once.
    start = resolve_start(config.architecture, config.pretrained)

    dataset = ctx.rank_zero_first(lambda: load_dataset(config.data))
    images, kept, skipped = load_images(dataset.train, tuple(config.input_size))
    records = [dataset.train[i] for i in kept]
    labels_list, _ = relabel(records)
    labels = torch.tensor(labels_list)
    num_classes = int(labels.max()) + 1
    ctx.check_same((len(records), num_classes), "the number of readable training images and identities")

    network = ReidNet(
        config.architecture,
        num_classes=num_classes if config.ce_weight > 0 else 0,
        embedding_dim=config.embedding_dim,
        pooling=config.pooling,
        last_stride=config.last_stride,
        pretrained=start,
    ).to(device)
    if config.sync_bn and ctx.distributed:
        network = nn.SyncBatchNorm.convert_sync_batchnorm(network)
    metric = _build_metric(config, num_classes, network.embedding_dim)
    if metric is not None:
        metric.to(device)
    optimizer = _build_optimizer(config, network, metric)
    sampler = PKSampler(labels_list, config.p, config.k, seed=config.seed, rank=ctx.rank, world_size=ctx.world_size)
    use_amp = config.amp and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

    card = build_card(config, dataset, num_classes, network, network.pretrained_note)
    history: list[dict[str, Any]] = []
    start_epoch = 0
    steps_per_epoch = len(sampler)
    step_total = 0
    if state is not None:
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
        step_total = int(state.get("global_step", start_epoch * steps_per_epoch))
        history = list(state.get("history", []))

    gather = gather_rows if config.gather_embeddings and ctx.distributed else None
    objective = TrainingObjective(network, metric, config.label_smoothing, use_amp, gather)
    model: nn.Module = objective
    if ctx.distributed:
        # Without cross-entropy the classifier is absent and the BNNeck weight gets no gradient.
        model = DistributedDataParallel(
            objective,
            device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=config.ce_weight == 0,
        )

    if callbacks.on_start:
        callbacks.on_start({
            "device": str(device),
            "train_images": len(records),
            "identities": num_classes,
            "skipped": len(skipped),
            "steps_per_epoch": steps_per_epoch,
            "pretrained": network.pretrained_note,
            "start_epoch": start_epoch,
            "world_size": ctx.world_size,
            "backend": ctx.backend,
            "global_batch": ctx.world_size * config.p * config.k,
            "checkpoint_world_size": None if state is None else state.get("world_size", 1),
        })

    log: TrainingLog | None = None
    if ctx.is_main:
        write_config(config, out)
        log = resources.enter_context(TrainingLog(out, history, config.tensorboard, step_total))

    generator = torch.Generator().manual_seed(config.seed)
    aug = AugmentConfig()
    batch_size = config.p * config.k
    for epoch in range(start_epoch, config.epochs):
        generator.manual_seed(config.seed * 7919 + epoch)
        sampler.set_epoch(epoch)
        objective.train()
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
            # Every process draws the augmentation of the whole global batch and applies its
            # own rows, so the global batch is augmented as one process would augment it.
            rows = (ctx.rank * batch_size, ctx.world_size * batch_size)
            batch = augment(images[index], card.mean, card.std, aug, generator, rows).to(device, non_blocking=True)
            target = labels[index].to(device)
            ce, metric_value = model(batch, target)
            loss = config.ce_weight * ce + config.metric_weight * metric_value
            # The mean over processes: a NaN anywhere stops every process at the same step.
            loss_value, ce_value, metric_mean = ctx.mean(torch.stack([loss, ce, metric_value])).tolist()
            if not math.isfinite(loss_value):
                kept_note = f"; the last good checkpoint is {checkpoint_path}" if checkpoint_path.is_file() else ""
                raise TrainingDiverged(
                    f"loss became {loss_value} at epoch {epoch + 1} step {step + 1} (lower --lr or enable --grad-clip){kept_note}"
                )
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if config.grad_clip:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(network.parameters(), config.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            step_total += 1
            seen += len(batch_indices) * ctx.world_size
            sums["loss"] += loss_value
            sums["ce"] += ce_value
            sums["metric"] += metric_mean
            if callbacks.on_step:
                callbacks.on_step(StepInfo(
                    epoch=epoch, epochs=config.epochs, step=step, steps_per_epoch=steps_per_epoch,
                    loss=loss_value, ce=ce_value, metric=metric_mean,
                    lr=optimizer.param_groups[0]["lr"],
                    images_per_second=seen / max(time.perf_counter() - epoch_start, 1e-9),
                ))
        steps_done = max(1, min(steps_per_epoch, seen // (batch_size * ctx.world_size)))
        entry: dict[str, Any] = {k: v / steps_done for k, v in sums.items()}
        entry["epoch"] = epoch + 1
        entry["images_per_second"] = seen / max(time.perf_counter() - epoch_start, 1e-9)
        entry["lr"] = optimizer.param_groups[0]["lr"]
        entry["step"] = step_total
        entry["world_size"] = ctx.world_size
        last_epoch = epoch + 1 == config.epochs or (config.max_steps is not None and step_total >= config.max_steps)
        if config.eval_every and ((epoch + 1) % config.eval_every == 0 or last_epoch):
            evaluation = None
            if ctx.is_main:
                result = evaluate_dataset(TorchEncoder(network, card, device), dataset, config.eval_batch_size, callbacks.on_eval_progress)
                network.train()
                evaluation = result.to_dict()
            # The other processes wait here while rank 0 evaluates.
            entry["eval"] = ctx.broadcast(evaluation)
        history.append(entry)
        if ctx.is_main:
            checkpoint: dict[str, Any] = {
                "model": network.state_dict(),
                "optimizer": optimizer.state_dict(),
                "optimizer_name": config.optimizer,
                "epoch": epoch,
                "global_step": step_total,
                "world_size": ctx.world_size,
                "history": history,
            }
            if metric is not None:
                checkpoint["metric"] = metric.state_dict()
            _save_checkpoint(checkpoint_path, checkpoint)
        if log is not None:
            log.epoch_done(entry)
        if callbacks.on_epoch:
            callbacks.on_epoch(epoch, entry)
        if last_epoch:
            break

    network.eval()
    card.training["history"] = history
    final_eval = next((h["eval"] for h in reversed(history) if "eval" in h), None)
    if final_eval:
        card.metrics = {"dataset": config.data, "protocol": "market1501", **final_eval}
    if ctx.is_main:
        card = save_model(network, card, out)
    if log is not None:
        log.finish()
    # Every process returns once the model folder is written, with the card as saved.
    card = ctx.broadcast(card)
    return TrainResult(
        out, card, history, skipped, time.perf_counter() - started, network.pretrained_note,
        network=network, rank=ctx.rank, world_size=ctx.world_size,
    )
