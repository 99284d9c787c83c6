"""The training loop: one loop for every loss, P x K batches, checkpoint and resume.

A run reads as setup (data, network, losses, optimizer), restore (``resume``), epochs (the
steps of each, an evaluation when due, a checkpoint), and save (the model folder). The
parts live in their own modules: the optimizer and schedule in :mod:`reid.engine.optim`,
the checkpoint in :mod:`reid.engine.state`, the objective (``ce_weight * CE +
metric_weight * metric`` over the BNNeck network) in :mod:`reid.engine.objective`, and
image decoding in :mod:`reid.engine.loading`.

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
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from reid.data import ReidDataset, load_dataset, relabel
from reid.data.sampler import PKSampler
from reid.data.transforms import AugmentConfig, augment
from reid.engine.config import TrainConfig, write_config
from reid.engine.distributed import DistributedContext, distributed_session, gather_rows
from reid.engine.history import TrainingLog, require_tensorboard
from reid.engine.loading import load_images
from reid.engine.objective import TrainingObjective, build_metric, metric_options
from reid.engine.optim import HEAD_GROUP, build_optimizer, lr_factor, set_learning_rate
from reid.engine.wise import blend, blended, start_weights, wise_alpha
from reid.engine.state import CHECKPOINT_FILE, ResumePoint, capture_state, read_resume_state, restore_state, save_checkpoint
from reid.detect import build_detector
from reid.errors import ConfigValueError, DataError, ReidError
from reid.evaluation import RankingResult
from reid.pipeline.embed import evaluate_encoder
from reid.models.card import ModelCard
from reid.paths import remove_stale_temporaries
from reid.models.encoder import Encoder, TorchEncoder
from reid.models.folder import check_model_output, save_model
from reid.models.network import ReidNet
from reid.models.pretrained import load_start, resolve_start, start_neck
from reid.paths import check_output_folder
from reid.pipeline.calibrate import choose_on_dataset, describe_dataset_choice, record_choice
from reid.pipeline.subject import ALIGNING_FACE_DETECTOR, SubjectRule

__all__ = [
    "CHECKPOINT_FILE",
    "StepInfo",
    "TrainCallbacks",
    "TrainResult",
    "TrainingDiverged",
    "build_card",
    "evaluate_dataset",
    "train",
]

# The augmentation generator of epoch e is seeded with ``seed * AUGMENT_SEED_STRIDE + e``:
# every epoch draws new augmentations, a resumed run draws the same ones as an unbroken
# run, and runs with neighbouring seeds do not share an epoch's stream (a prime stride
# keeps the sequences of seeds s and s + 1 apart for 7919 epochs).
AUGMENT_SEED_STRIDE = 7919

# Guards the images-per-second rate against a zero elapsed time.
_MIN_SECONDS = 1e-9


class TrainingDiverged(ReidError):
    """The loss became NaN or infinite; the message names the epoch and step and the last
    good checkpoint, which is left as it was."""


@dataclass
class StepInfo:
    """What a progress callback sees after every step: 0-based ``epoch`` and ``step``, the
    step's losses (means over the processes), the network's learning rate and the images
    per second of the epoch so far (over all processes)."""

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
    """Progress hooks; in a run of several processes only rank 0 calls them.

    ``on_start`` gets a summary of the run (device, images, identities, steps per epoch,
    where it starts); ``on_step`` a :class:`StepInfo`; ``on_epoch`` the 0-based epoch and
    its history entry; ``on_eval_progress`` (done, total) images embedded.
    """

    on_start: Callable[[dict[str, Any]], None] | None = None
    on_step: Callable[[StepInfo], None] | None = None
    on_epoch: Callable[[int, dict[str, Any]], None] | None = None
    on_eval_progress: Callable[[int, int], None] | None = None


@dataclass
class TrainResult:
    """What :func:`train` returns on every process; rank 0 wrote the model folder and
    ``network`` is the trained network as this process holds it.

    ``history`` has one entry per epoch (mean ``loss``, ``ce``, ``metric``, ``lr``,
    ``step``, and ``eval`` where evaluated); ``skipped_images`` names each unreadable
    training image with its reason; ``seconds`` is the wall time of the run;
    ``threshold_note`` says why the card has no threshold ("" when it has one).
    """

    model_dir: Path
    card: ModelCard
    history: list[dict[str, Any]] = field(default_factory=list)
    skipped_images: list[tuple[Path, str]] = field(default_factory=list)
    seconds: float = 0.0
    pretrained_note: str = ""
    network: ReidNet | None = None
    rank: int = 0
    world_size: int = 1
    threshold_note: str = ""


def evaluate_dataset(
    encoder: Encoder, dataset: ReidDataset, batch_size: int = TrainConfig.eval_batch_size, on_progress: Callable[[int, int], None] | None = None
) -> RankingResult:
    """Rank-k, mAP and mINP of ``encoder`` on the dataset's query/gallery split
    (Market-1501 protocol; distances are Euclidean between unit embeddings, 0..2)."""
    return evaluate_encoder(encoder, dataset.query, dataset.gallery, batch_size=batch_size, on_progress=on_progress).result


def build_card(
    config: TrainConfig,
    dataset: ReidDataset,
    num_classes: int,
    network: ReidNet,
    pretrained_note: str,
    faces_not_found: int | None = None,
    alpha: float = 1.0,
) -> ModelCard:
    """The model card of a network trained by ``config`` on ``dataset``; for faces it says
    ``kind`` "face" with 5-point alignment, and ``faces_not_found`` counts the training
    photos without a face (dealt with as ``config.no_face`` says)."""
    faces = config.kind == "face"
    options = metric_options(config, num_classes, network.embedding_dim, network.embedding_start)
    metric = {} if options is None else {"name": config.metric_loss, "weight": config.metric_weight, **options}
    return ModelCard(
        name=config.name or Path(config.out).name,
        architecture=config.architecture,
        embedding_dim=network.embedding_dim,
        input_size=tuple(config.input_size),
        mean=network.input_mean,
        std=network.input_std,
        pooling=config.pooling,
        neck=network.neck,
        last_stride=config.last_stride,
        # The card describes the saved network: without cross-entropy it has no classifier.
        num_classes=network.classifier.out_features if network.classifier is not None else 0,
        pretrained=pretrained_note + (f"; saved as {alpha:g} x trained + {1 - alpha:g} x start (WiSE-FT)" if alpha < 1 else ""),
        loss={
            "cross_entropy": {"weight": config.ce_weight, "label_smoothing": config.label_smoothing},
            "metric": metric,
        },
        training_data={
            "spec": config.data,
            "name": dataset.name,
            "train_images": len(dataset.train),
            "train_identities": num_classes,
            **({"faces_not_found": faces_not_found or 0, "no_face": config.no_face} if faces else {}),
        },
        training=config.to_dict(),
        kind=config.kind,
        face_alignment="5-point" if faces else "none",
    )


def train(config: TrainConfig, callbacks: TrainCallbacks | None = None) -> TrainResult:
    """Train an encoder as ``config`` says and write it to ``config.out``.

    Under ``torchrun`` every process calls this; it joins the process group the launcher
    describes and leaves it on return or error.

    Raises:
        ConfigError: a value of ``config`` is out of range, the output folder is unusable,
            or the training split has fewer identities than P.
        DataError: the dataset cannot be read, or none of its training images.
        ModelError: ``resume`` without a usable checkpoint, or a pretrained start that
            cannot be had.
        TrainingDiverged: the loss became NaN or infinite; the last checkpoint is kept.
    """
    config.validate()
    check_output_folder(Path(config.out), "--out")
    if not config.resume:
        check_model_output(Path(config.out), "--out", config.overwrite, keep="continue it with --resume")
    if config.tensorboard is not None:
        require_tensorboard(config.tensorboard)
    with distributed_session(config.device, config.sync_bn) as ctx, contextlib.ExitStack() as resources:
        return _train(config, callbacks or TrainCallbacks(), ctx, resources)


@dataclass
class _Run:
    """Everything the epochs of one run work with, built by :func:`_setup`."""

    dataset: ReidDataset
    images: torch.Tensor
    labels: torch.Tensor
    num_classes: int
    skipped: list[tuple[Path, str]]
    network: ReidNet
    metric: nn.Module | None
    optimizer: torch.optim.Optimizer
    sampler: PKSampler
    scaler: torch.amp.GradScaler
    card: ModelCard
    # The start's tensors and the share of the trained ones in the saved model
    # (reid.engine.wise); alpha 1 saves the trained weights as they are.
    start: dict[str, torch.Tensor] = field(default_factory=dict)
    alpha: float = 1.0


def _train(
    config: TrainConfig, callbacks: TrainCallbacks, ctx: DistributedContext, resources: contextlib.ExitStack
) -> TrainResult:
    started = time.perf_counter()
    if not ctx.is_main:
        callbacks = TrainCallbacks()
    out = Path(config.out)
    checkpoint_path = out / CHECKPOINT_FILE
    state = _prepare(config, ctx, out, checkpoint_path)
    run = _setup(config, ctx)
    resume = ResumePoint()
    if state is not None:
        resume = restore_state(state, checkpoint_path, config, run.network, run.metric, run.optimizer, len(run.sampler))
    model = _objective(config, ctx, run)
    if callbacks.on_start:
        callbacks.on_start(_start_summary(config, ctx, run, resume))

    log: TrainingLog | None = None
    if ctx.is_main:
        write_config(config, out)
        log = resources.enter_context(TrainingLog(out, resume.history, config.tensorboard, resume.global_step))
    history, step_total = resume.history, resume.global_step
    generator = torch.Generator().manual_seed(config.seed)
    for epoch in range(resume.start_epoch, config.epochs):
        generator.manual_seed(config.seed * AUGMENT_SEED_STRIDE + epoch)
        entry, step_total = _train_epoch(config, ctx, run, model, generator, epoch, step_total, checkpoint_path, callbacks)
        last_epoch = epoch + 1 == config.epochs or (config.max_steps is not None and step_total >= config.max_steps)
        if config.eval_every and ((epoch + 1) % config.eval_every == 0 or last_epoch):
            entry["eval"] = _evaluate(config, ctx, run, callbacks)
        history.append(entry)
        if ctx.is_main:
            save_checkpoint(
                checkpoint_path,
                capture_state(config, run.network, run.optimizer, run.metric, epoch, step_total, ctx.world_size, history),
            )
        if log is not None:
            log.epoch_done(entry)
        if callbacks.on_epoch:
            callbacks.on_epoch(epoch, entry)
        if last_epoch:
            break
    card, threshold_note = _save(config, ctx, run, history, out, callbacks)
    if log is not None:
        log.finish()
    # Every process returns once the model folder is written, with the card as saved.
    card = ctx.broadcast(card)
    return TrainResult(
        out, card, history, run.skipped, time.perf_counter() - started, run.network.pretrained_note,
        network=run.network, rank=ctx.rank, world_size=ctx.world_size, threshold_note=threshold_note,
    )


def _prepare(config: TrainConfig, ctx: DistributedContext, out: Path, checkpoint_path: Path) -> dict[str, Any] | None:
    """Threads and seed; clears a killed run's temporaries; reads the checkpoint to resume."""
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    if ctx.is_main and out.is_dir():
        # A run killed mid-write left its temporary checkpoint (as large as the model and
        # optimizer state) behind.
        remove_stale_temporaries(out)
    return read_resume_state(checkpoint_path, ctx, config) if config.resume else None


def _setup(config: TrainConfig, ctx: DistributedContext) -> _Run:
    """The data, the network, the losses and the optimizer, in the order that fixes what
    the seed draws (network, then a metric loss's centers)."""
    # The data is listed first, so that a wrong path is named before any download; the
    # start is resolved before the images are decoded, so a failed download fails at once.
    dataset = ctx.rank_zero_first(lambda: load_dataset(config.data))
    _check_training_data(config, dataset)
    start = resolve_start(config.architecture, config.pretrained)
    subject = _subject_rule(config)
    images, kept, skipped, unfound = load_images(dataset.train, tuple(config.input_size), subject=subject)
    records = [dataset.train[i] for i in kept]
    labels_list, _ = relabel(records)
    labels = torch.tensor(labels_list)
    num_classes = int(labels.max()) + 1
    ctx.check_same((len(records), num_classes), "the number of readable training images and identities")

    neck, embedding_dim = start_neck(start, config.architecture, config.keep_fc, config.embedding_dim)
    network = ReidNet(
        config.architecture,
        num_classes=num_classes if config.ce_weight > 0 else 0,
        embedding_dim=embedding_dim,
        pooling=config.pooling,
        last_stride=config.last_stride,
        neck=neck,
    )
    load_start(network, start)
    network = network.to(ctx.device)
    if config.sync_bn and ctx.distributed:
        network = nn.SyncBatchNorm.convert_sync_batchnorm(network)
    alpha = wise_alpha(config, network)
    metric = build_metric(config, num_classes, network.embedding_dim, getattr(network, "embedding_start", False))
    if metric is not None:
        metric.to(ctx.device)
    return _Run(
        dataset=dataset,
        images=images,
        labels=labels,
        num_classes=num_classes,
        skipped=skipped,
        network=network,
        metric=metric,
        optimizer=build_optimizer(config, network, metric),
        sampler=PKSampler(labels_list, config.p, config.k, seed=config.seed, rank=ctx.rank, world_size=ctx.world_size),
        scaler=torch.amp.GradScaler("cuda", enabled=_uses_amp(config, ctx)),
        card=build_card(config, dataset, num_classes, network, network.pretrained_note, unfound if subject else None, alpha),
        start=start_weights(network) if alpha < 1 else {},
        alpha=alpha,
    )


def _subject_rule(config: TrainConfig) -> SubjectRule | None:
    """For face training, the one crop rule cutting each photo to the aligned chip of its
    largest face (YuNet and its five landmarks); None for people, taken as they are."""
    if config.kind != "face":
        return None
    return SubjectRule(
        build_detector(ALIGNING_FACE_DETECTOR, "face"), none_found=config.no_face, align_to=tuple(config.input_size)
    )


def _check_training_data(config: TrainConfig, dataset: ReidDataset) -> None:
    """Refuse, before any image is decoded, an evaluation during training on the training
    identities themselves (a plain identity folder's query and gallery are its training
    images), and a pair or triplet loss on identities of one image each (its positives would be
    copies of that image)."""
    if config.eval_every:
        shared_ids, shared_images = dataset.evaluation_overlap()
        if shared_ids or shared_images:
            raise ConfigValueError(
                "eval_every",
                f"{config.eval_every}: the query and gallery of {config.data} hold {shared_ids} of its training "
                f"identities ({shared_images} training images), so the figures would be on the training data; "
                "give the folder train/, query/ and gallery/ of different identities, or evaluate with `reid eval` "
                "on held-out data (eval_every 0)",
                sep=" ",
            )
    if config.needs_positives and dataset.train:
        per_identity: dict[int, int] = {}
        for record in dataset.train:
            per_identity[record.pid] = per_identity.get(record.pid, 0) + 1
        if max(per_identity.values()) < 2:
            raise ConfigValueError(
                "data",
                f"{config.data}: every one of its {len(per_identity)} training identities has one image, so "
                f"the metric loss ({config.metric_loss}) would only see copies of one image as positives; give "
                "identities several images, or train with no metric loss (loss none)",
                sep=" ",
            )


def _uses_amp(config: TrainConfig, ctx: DistributedContext) -> bool:
    return config.amp and ctx.device.type == "cuda"


def _objective(config: TrainConfig, ctx: DistributedContext, run: _Run) -> nn.Module:
    """The objective to call at every step, wrapped in DistributedDataParallel under torchrun."""
    gather = gather_rows if config.gather_embeddings and ctx.distributed else None
    objective = TrainingObjective(run.network, run.metric, config, _uses_amp(config, ctx), gather)
    if not ctx.distributed:
        return objective
    # Without cross-entropy the classifier is absent and the BNNeck weight gets no gradient.
    return DistributedDataParallel(
        objective,
        device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
        find_unused_parameters=config.ce_weight == 0,
    )


def _start_summary(config: TrainConfig, ctx: DistributedContext, run: _Run, resume: ResumePoint) -> dict[str, Any]:
    return {
        "device": str(ctx.device),
        "train_images": len(run.labels),
        "identities": run.num_classes,
        "skipped": len(run.skipped),
        "steps_per_epoch": len(run.sampler),
        "pretrained": run.network.pretrained_note,
        "start_epoch": resume.start_epoch,
        "world_size": ctx.world_size,
        "backend": ctx.backend,
        "global_batch": ctx.world_size * config.p * config.k,
        "checkpoint_world_size": resume.checkpoint_world_size,
        "coverage": run.sampler.coverage(),
        "p": config.p,
    }


def _train_epoch(
    config: TrainConfig,
    ctx: DistributedContext,
    run: _Run,
    model: nn.Module,
    generator: torch.Generator,
    epoch: int,
    step_total: int,
    checkpoint_path: Path,
    callbacks: TrainCallbacks,
) -> tuple[dict[str, Any], int]:
    """The steps of one epoch; returns its history entry and the global step reached."""
    run.sampler.set_epoch(epoch)
    model.train()
    steps_per_epoch = len(run.sampler)
    batch_size = config.p * config.k
    aug = AugmentConfig()
    sums = {"loss": 0.0, "ce": 0.0, "metric": 0.0}
    epoch_start = time.perf_counter()
    seen = 0
    for step, batch_indices in enumerate(run.sampler):
        if config.max_steps is not None and step_total >= config.max_steps:
            break
        set_learning_rate(run.optimizer, lr_factor(config, epoch + step / steps_per_epoch))
        index = torch.tensor(batch_indices)
        # Every process draws the augmentation of the whole global batch and applies its
        # own rows, so the global batch is augmented as one process would augment it.
        rows = (ctx.rank * batch_size, ctx.world_size * batch_size)
        batch = augment(run.images[index], run.card.mean, run.card.std, aug, generator, rows).to(ctx.device, non_blocking=True)
        loss, ce, metric_value = model(batch, run.labels[index].to(ctx.device))
        # The mean over processes: a NaN anywhere stops every process at the same step.
        loss_value, ce_value, metric_mean = ctx.mean(torch.stack([loss, ce, metric_value])).tolist()
        if not math.isfinite(loss_value):
            kept_note = f"; the last good checkpoint is {checkpoint_path}" if checkpoint_path.is_file() else ""
            raise TrainingDiverged(
                f"loss became {loss_value} at epoch {epoch + 1} step {step + 1} (lower --lr or enable --grad-clip){kept_note}"
            )
        _optimizer_step(config, run, loss)
        step_total += 1
        seen += len(batch_indices) * ctx.world_size
        sums["loss"] += loss_value
        sums["ce"] += ce_value
        sums["metric"] += metric_mean
        if callbacks.on_step:
            callbacks.on_step(StepInfo(
                epoch=epoch, epochs=config.epochs, step=step, steps_per_epoch=steps_per_epoch,
                loss=loss_value, ce=ce_value, metric=metric_mean,
                lr=run.optimizer.param_groups[HEAD_GROUP]["lr"],
                images_per_second=seen / max(time.perf_counter() - epoch_start, _MIN_SECONDS),
            ))
    steps_done = max(1, min(steps_per_epoch, seen // (batch_size * ctx.world_size)))
    entry: dict[str, Any] = {k: v / steps_done for k, v in sums.items()}
    entry["epoch"] = epoch + 1
    entry["images_per_second"] = seen / max(time.perf_counter() - epoch_start, _MIN_SECONDS)
    entry["lr"] = run.optimizer.param_groups[HEAD_GROUP]["lr"]
    entry["step"] = step_total
    entry["world_size"] = ctx.world_size
    drawn, total = run.sampler.coverage()
    # The share of the training images this epoch's batches drew (P distinct identities a
    # batch leave images of large identities undrawn when there are few identities).
    entry["coverage"] = drawn / max(1, total)
    return entry, step_total


def _optimizer_step(config: TrainConfig, run: _Run, loss: torch.Tensor) -> None:
    """Backward through the (possibly scaled) loss, clip, and step."""
    run.optimizer.zero_grad(set_to_none=True)
    run.scaler.scale(loss).backward()
    if config.grad_clip:
        run.scaler.unscale_(run.optimizer)
        torch.nn.utils.clip_grad_norm_(run.network.parameters(), config.grad_clip)
    run.scaler.step(run.optimizer)
    run.scaler.update()


def _evaluate(config: TrainConfig, ctx: DistributedContext, run: _Run, callbacks: TrainCallbacks) -> dict[str, Any] | None:
    """Rank 0 ranks the dataset's query/gallery split; every process gets the figures."""
    evaluation = None
    if ctx.is_main:
        with blended(run.network, run.start, run.alpha) as network:
            encoder = TorchEncoder(network, run.card, ctx.device)
            result = evaluate_dataset(encoder, run.dataset, config.eval_batch_size, callbacks.on_eval_progress)
        run.network.train()
        evaluation = {**result.to_dict(), "computed_on": run.dataset.evaluation_split()}
    # The other processes wait here while rank 0 evaluates.
    return ctx.broadcast(evaluation)


def _save(
    config: TrainConfig,
    ctx: DistributedContext,
    run: _Run,
    history: list[dict[str, Any]],
    out: Path,
    callbacks: TrainCallbacks,
) -> tuple[ModelCard, str]:
    """Rank 0 writes the model folder with the history, the last evaluation and the
    threshold chosen on held-out identities (:func:`_held_out_threshold`) on its card (the
    network saved, and measured for it, is the blend with its start where ``run.alpha`` is
    below 1: :mod:`reid.engine.wise`), and returns the card as saved with why it has no
    threshold ("" when it has one); the other processes return theirs unsaved."""
    run.network.eval()
    if run.alpha < 1:
        blend(run.network, run.start, run.alpha)
    card = run.card
    card.training["history"] = history
    final_eval = next((h["eval"] for h in reversed(history) if "eval" in h), None)
    if final_eval:
        card.metrics = {"dataset": config.data, "protocol": "market1501", **final_eval}
    note = ""
    if ctx.is_main:
        note = _held_out_threshold(config, ctx, run, callbacks)
        card = save_model(run.network, card, out)
    return card, note


def _held_out_threshold(config: TrainConfig, ctx: DistributedContext, run: _Run, callbacks: TrainCallbacks) -> str:
    """Write on ``run.card`` the threshold at ``config.threshold_far`` on the query x gallery
    pairs of the data set's identities held out of training, with the pairs it was chosen on
    and the impostor quantiles --far reads; return "" then, else one line saying why none
    was chosen (the evaluation split shares identities with training, or gives no pairs)."""
    shared_ids, shared_images = run.dataset.evaluation_overlap()
    if shared_ids or shared_images or not run.dataset.query or not run.dataset.gallery:
        return (
            f"{config.data} holds no identities outside its training split, so no threshold was chosen; run "
            f"'reid calibrate --model {config.out} --data KIND:PATH' on labelled images of other people"
        )
    encoder = TorchEncoder(run.network, run.card, ctx.device)
    try:
        choice, pairs = choose_on_dataset(
            encoder,
            run.dataset,
            config.threshold_far,
            batch_size=config.eval_batch_size,
            on_progress=callbacks.on_eval_progress,
            subject=_subject_rule(config),
            no_face=config.no_face,
        )
    except DataError as exc:
        return f"no threshold was chosen ({exc}); run 'reid calibrate --model {config.out} --data KIND:PATH'"
    source = describe_dataset_choice("reid train", config.data, pairs, choice, held_out=True)
    record_choice(run.card, choice, pairs.scores, source, f"{config.data} query x gallery")
    return ""
