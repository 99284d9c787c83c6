"""What a training run keeps between epochs: the checkpoint, and resuming from it.

Every epoch ends with ``checkpoint.pt`` in the model folder, written atomically: the
network, the optimizer (and its name), a metric loss's own parameters, the epoch and
global step reached, the number of processes that wrote it and the history so far.
``train --resume`` reads it back and continues bit for bit in the data order.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from reid.engine.config import TrainConfig, check_resume_config
from reid.engine.distributed import DistributedContext
from reid.engine.optim import reset_base_lrs
from reid.errors import ModelError, ReidError
from reid.models.checkpoints import load_checkpoint_file
from reid.paths import write_bytes_atomic

CHECKPOINT_FILE = "checkpoint.pt"


@dataclass
class ResumePoint:
    """Where the epochs start: the first epoch to train (0-based), the global step
    reached, the history of the epochs done, and how many processes wrote the checkpoint
    (None for a fresh run)."""

    start_epoch: int = 0
    global_step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    checkpoint_world_size: int | None = None


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` with ``torch.save`` atomically: a crash mid-write keeps the last one."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    write_bytes_atomic(path, buffer.getvalue())


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint as tensors and plain values (``weights_only=True``, never pickled code).

    Raises:
        ModelError: the file cannot be read as a checkpoint; one line naming it.
    """
    try:
        loaded = load_checkpoint_file(path, "training checkpoint")
    except ModelError as exc:
        reason = str(exc).removeprefix(f"{path}: ")
        raise ModelError(f"{path}: checkpoint cannot be read ({reason}); remove it or train without --resume") from None
    if not isinstance(loaded, dict):
        raise ModelError(f"{path}: checkpoint cannot be read (holds a {type(loaded).__name__}); remove it or train without --resume")
    return loaded


def capture_state(
    config: TrainConfig,
    network: nn.Module,
    optimizer: torch.optim.Optimizer,
    metric: nn.Module | None,
    epoch: int,
    global_step: int,
    world_size: int,
    history: list[dict[str, Any]],
) -> dict[str, Any]:
    """The checkpoint after ``epoch`` (0-based) as :func:`restore_state` reads it."""
    state: dict[str, Any] = {
        "model": network.state_dict(),
        "optimizer": optimizer.state_dict(),
        "optimizer_name": config.optimizer,
        "epoch": epoch,
        "global_step": global_step,
        "world_size": world_size,
        "history": history,
    }
    if metric is not None:
        state["metric"] = metric.state_dict()
    return state


def read_resume_state(checkpoint_path: Path, ctx: DistributedContext, config: TrainConfig) -> dict[str, Any]:
    """Rank 0 checks ``config`` against the run's saved config, reads the checkpoint and
    sends it to every process, so that other machines resume without a copy of rank 0's
    files; a missing or broken file or a config that trains something else stops every
    process.

    Raises:
        ModelError: no checkpoint, an unreadable one, or a config that differs from the
            saved one in a key a resumed run must keep; one line naming the file.
    """
    state: dict[str, Any] | None = None
    error: ReidError | None = None
    if ctx.is_main:
        try:
            if not checkpoint_path.is_file():
                raise ModelError(f"{checkpoint_path}: no checkpoint to resume from")
            check_resume_config(config, checkpoint_path.parent)
            state = load_checkpoint(checkpoint_path)
        except ModelError as exc:
            error = exc
    error = ctx.broadcast(error)
    if error is not None:
        raise error
    return ctx.broadcast(state)


def restore_state(
    state: dict[str, Any],
    checkpoint_path: Path,
    config: TrainConfig,
    network: nn.Module,
    metric: nn.Module | None,
    optimizer: torch.optim.Optimizer,
    steps_per_epoch: int,
) -> ResumePoint:
    """Load a checkpoint into the network, the metric loss and the optimizer, keeping the
    base learning rates of ``config``; returns where the epochs continue.

    Raises:
        ModelError: the checkpoint was made with another optimizer or does not fit the
            network or loss this config builds; one line naming the file.
    """
    if state.get("optimizer_name", config.optimizer) != config.optimizer:
        raise ModelError(
            f"{checkpoint_path}: checkpoint was made with optimizer {state['optimizer_name']}, not {config.optimizer}"
        )
    try:
        network.load_state_dict(state["model"])
        if metric is not None and "metric" in state:
            metric.load_state_dict(state["metric"])
        optimizer.load_state_dict(state["optimizer"])
        reset_base_lrs(optimizer, config, network, metric)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise ModelError(
            f"{checkpoint_path}: checkpoint does not match this configuration ({exc.__class__.__name__}: {str(exc).splitlines()[0]})"
        ) from exc
    start_epoch = int(state["epoch"]) + 1
    return ResumePoint(
        start_epoch=start_epoch,
        global_step=int(state.get("global_step", start_epoch * steps_per_epoch)),
        history=list(state.get("history", [])),
        checkpoint_world_size=state.get("world_size", 1),
    )
