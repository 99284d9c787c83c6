"""What a training run records as it goes: ``history.jsonl``, ``curves.png`` and,
when asked, TensorBoard event files.

One history entry per epoch holds the epoch's mean loss parts (``loss``, ``ce``,
``metric``), the learning rate of its last step (``lr``), ``images_per_second``, the
global ``step`` it ended at and, when the epoch was evaluated, ``eval`` (Rank-k, mAP,
mINP as fractions 0..1). The checkpoint carries the same list, so the file is rewritten
whole from it after every epoch: a resumed run continues the file without a duplicated
or a missing epoch, even when the last run stopped between the checkpoint and the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from reid.errors import ConfigError, ModelError
from reid.evaluation.plots import plot_training_curves
from reid.paths import write_bytes_atomic

HISTORY_FILE = "history.jsonl"
CURVES_FILE = "curves.png"
TRAIN_SCALARS = ("loss", "ce", "metric", "lr", "images_per_second", "epoch")
EVAL_SCALARS = ("rank1", "rank5", "rank10", "mAP", "mINP")


def write_history(folder: Path, history: list[dict[str, Any]]) -> Path:
    """Write ``folder/history.jsonl`` atomically, one JSON object per epoch."""
    path = Path(folder) / HISTORY_FILE
    write_bytes_atomic(path, "".join(json.dumps(entry) + "\n" for entry in history).encode())
    return path


def read_history(folder: Path) -> list[dict[str, Any]]:
    """The entries of ``folder/history.jsonl`` in order.

    Raises:
        ModelError: the file is missing, or a line is not a JSON object with an epoch;
            one line naming the file and the line number.
    """
    path = Path(folder) / HISTORY_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ModelError(f"{path}: no training history") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: training history cannot be read ({exc.__class__.__name__})") from None
    history = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            raise ModelError(f"{path}: line {number} is not JSON") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("epoch"), int):
            raise ModelError(f"{path}: line {number} is not an epoch entry (a JSON object with an integer epoch)")
        history.append(entry)
    return history


def write_curves(folder: Path, history: list[dict[str, Any]], title: str = "") -> Path:
    """Draw ``history`` as ``folder/curves.png``: the loss parts and the learning rate
    against the global step, Rank-1 and mAP against the epoch."""
    return plot_training_curves(history, Path(folder) / CURVES_FILE, title or Path(folder).name)


def require_tensorboard(folder: Path) -> type:
    """torch's TensorBoard SummaryWriter class, or a ConfigError naming the extra to install."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ConfigError(
            f"--tensorboard {folder}: writing TensorBoard files needs the tensorboard package, "
            'which is not installed: pip install "reid[tensorboard]"'
        ) from None
    return SummaryWriter


def _event_writer(folder: Path, purge_step: int | None) -> Any:
    """A SummaryWriter into ``folder``; ``purge_step`` hides the events a stopped run wrote
    at or after that step."""
    writer_class = require_tensorboard(folder)
    try:
        return writer_class(log_dir=str(folder), purge_step=purge_step)
    except OSError as exc:
        raise ConfigError(f"--tensorboard {folder}: cannot write there ({exc.strerror or exc.__class__.__name__})") from None


@dataclass
class TrainingLog:
    """Rank 0's record of a run in its model folder, continued from ``history``.

    Use as a context manager so the event files are closed on any exit.
    """

    folder: Path
    history: list[dict[str, Any]]
    tensorboard: Path | None = None
    start_step: int = 0
    _writer: Any = field(default=None, init=False, repr=False)

    def __enter__(self) -> TrainingLog:
        if self.tensorboard is not None:
            # The epoch the run resumes after was logged at start_step itself; later steps are stale.
            self._writer = _event_writer(self.tensorboard, self.start_step + 1 if self.start_step > 0 else None)
        write_history(self.folder, self.history)
        return self

    def epoch_done(self, entry: dict[str, Any]) -> None:
        """Record the entry ``history`` just received; the curves are redrawn when it
        holds an evaluation."""
        write_history(self.folder, self.history)
        if self._writer is not None:
            step = int(entry["step"])
            for key in TRAIN_SCALARS:
                if isinstance(entry.get(key), (int, float)) and math.isfinite(entry[key]):
                    self._writer.add_scalar(f"train/{key}", entry[key], step)
            for key in EVAL_SCALARS:
                if key in entry.get("eval", {}):
                    self._writer.add_scalar(f"eval/{key}", entry["eval"][key], step)
            self._writer.flush()
        if "eval" in entry:
            write_curves(self.folder, self.history)

    def finish(self) -> Path:
        """Draw the final curves; returns their path."""
        return write_curves(self.folder, self.history)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._writer is not None:
            self._writer.close()
