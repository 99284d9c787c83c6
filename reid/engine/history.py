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

from reid.errors import ConfigError, ConfigValueError, ModelError
from reid.evaluation.names import RANKING_METRICS
from reid.evaluation.plots import plot_training_curves
from reid.paths import JSON_NUMBERS, MAX_NESTING, LongNumber, nesting_depth, read_text_bounded, write_bytes_atomic
from reid.text import MAX_NUMBER_TEXT

HISTORY_FILE = "history.jsonl"
CURVES_FILE = "curves.png"
TRAIN_SCALARS = ("loss", "ce", "metric", "lr", "images_per_second", "epoch")
EVAL_SCALARS = tuple(RANKING_METRICS)


def write_history(folder: Path, history: list[dict[str, Any]]) -> Path:
    """Write ``folder/history.jsonl`` atomically, one JSON object per epoch."""
    path = Path(folder) / HISTORY_FILE
    write_bytes_atomic(path, "".join(json.dumps(entry) + "\n" for entry in history).encode())
    return path


# A history line is under 1 kB; a run of a million epochs stays far below this.
MAX_HISTORY_BYTES = 256 << 20
# What each recorded value must be: counts are whole numbers >= 0 (the epoch >= 1), the
# rest numbers (a loss may be NaN in a run that diverged); evaluation figures fractions.
COUNT_KEYS = {"epoch": 1, "step": 0, "world_size": 1}
NUMBER_KEYS = ("loss", "ce", "metric", "lr", "images_per_second", "coverage")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def entry_problem(entry: Any) -> str | None:
    """What is wrong with one history entry, in words (None when nothing is): not an
    object, a count that is not a whole number in range, a figure that is not a number,
    an evaluation whose rates are not fractions 0..1."""
    if not isinstance(entry, dict):
        return f"not an epoch entry (a JSON object), but a {type(entry).__name__}"
    if "epoch" not in entry:
        return "not an epoch entry (it has no epoch)"
    for key, least in COUNT_KEYS.items():
        if key in entry and not (isinstance(entry[key], int) and not isinstance(entry[key], bool) and entry[key] >= least):
            return f"{key} is {entry[key]!r}, not a whole number >= {least}"
    for key in NUMBER_KEYS:
        if key in entry and entry[key] is not None and not _is_number(entry[key]):
            return f"{key} is {entry[key]!r}, not a number"
    if "eval" in entry and entry["eval"] is not None:
        figures = entry["eval"]
        if not isinstance(figures, dict):
            return f"eval is {figures!r}, not an object of figures"
        for key in EVAL_SCALARS:
            value = figures.get(key)
            if key in figures and not (_is_number(value) and 0.0 <= value <= 1.0):
                return f"eval {key} is {value!r}, not a fraction between 0 and 1"
    return None


def check_history(history: Any, where: str) -> list[dict[str, Any]]:
    """``history`` (a list of epoch entries, as a card keeps it) with every entry checked
    (:func:`entry_problem`); raises ModelError naming ``where`` and the first bad entry."""
    if not isinstance(history, list):
        raise ModelError(f"{where}: the training history is a {type(history).__name__}, not a list of epochs")
    for number, entry in enumerate(history, start=1):
        problem = entry_problem(entry)
        if problem is not None:
            raise ModelError(f"{where}: history entry {number}: {problem}")
    return history


def read_history(folder: Path) -> list[dict[str, Any]]:
    """The entries of ``folder/history.jsonl`` in order, every value checked
    (:func:`entry_problem`); the file is bounded to :data:`MAX_HISTORY_BYTES` and each
    line's nesting (:data:`reid.paths.MAX_NESTING`) once parsed.

    Raises:
        ModelError: the file is missing, too large, or a line is not a JSON object with an
            epoch and values in range; one line naming the file and the line number.
    """
    path = Path(folder) / HISTORY_FILE
    try:
        lines = read_text_bounded(path, MAX_HISTORY_BYTES, "training history").splitlines()
    except FileNotFoundError:
        raise ModelError(f"{path}: no training history") from None
    except ConfigError as exc:
        raise ModelError(str(exc)) from None
    except OSError as exc:
        raise ModelError(f"{path}: training history cannot be read ({exc.strerror or exc.__class__.__name__})") from None
    history = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line, **JSON_NUMBERS)
        except LongNumber as exc:
            raise ModelError(f"{path}: line {number}: a number longer than {MAX_NUMBER_TEXT} characters ({exc}...)") from None
        except json.JSONDecodeError:
            raise ModelError(f"{path}: line {number} is not JSON") from None
        except RecursionError:
            entry = None
        if entry is None or nesting_depth(entry) > MAX_NESTING:
            raise ModelError(f"{path}: line {number}: nested deeper than {MAX_NESTING} levels; not read")
        problem = entry_problem(entry)
        if problem is not None:
            raise ModelError(f"{path}: line {number}: {problem}")
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
        raise ConfigValueError(
            "tensorboard",
            f"{folder}: writing TensorBoard files needs the tensorboard package, "
            'which is not installed: pip install "reid-toolkit[tensorboard]"',
            sep=" ",
        ) from None
    return SummaryWriter


def _event_writer(folder: Path, purge_step: int | None) -> Any:
    """A SummaryWriter into ``folder``; ``purge_step`` hides the events a stopped run wrote
    at or after that step."""
    writer_class = require_tensorboard(folder)
    try:
        return writer_class(log_dir=str(folder), purge_step=purge_step)
    except OSError as exc:
        raise ConfigValueError(
            "tensorboard", f"{folder}: cannot write there ({exc.strerror or exc.__class__.__name__})", sep=" "
        ) from None


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
