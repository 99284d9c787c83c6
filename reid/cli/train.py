"""``reid train``, and the progress and tables ``reid demo`` shares with it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.progress import TextColumn

from reid.cli.common import RANKING, PlainProgress, console, duration, err_console, handle_errors, make_progress, percent, print_table, write_json
from reid.cli.defaults import config_overrides, with_config_options
from reid.cli.evaluate import ranking_rows
from reid.engine.config import CONFIG_FILE, TrainConfig, resolve_config
from reid.evaluation.names import count, distance, loss
from reid.paths import check_output_file
from reid.text import printable

if TYPE_CHECKING:
    from reid.engine import StepInfo, TrainCallbacks



# The embedding passes after the last epoch, in order: training's threshold choice, then
# (reid demo) the evaluation of the trained encoder.
AFTER_TRAINING = ("embedding held-out identities to choose the threshold", "embedding to evaluate the trained encoder")


@dataclass
class RunState:
    """What the command line knows of a run from its callbacks: where it started, the last
    epoch whose checkpoint was written, and whether an epoch's steps are under way (an
    embedding pass then evaluates that epoch; before the first step it evaluates the
    untrained encoder, after the last the passes of :data:`AFTER_TRAINING`)."""

    start_epoch: int = 0
    saved_epoch: int | None = None
    epoch: int = 0
    in_epoch: bool = False
    stepped: bool = False
    passes_after: int = 0

    def step(self, step: StepInfo) -> None:
        self.epoch, self.in_epoch, self.stepped = step.epoch, True, True

    def epoch_done(self, epoch: int) -> None:
        self.saved_epoch, self.in_epoch = epoch + 1, False

    def embedding_purpose(self) -> str:
        """The progress label of a new embedding pass: the one word every command uses, and what it is for."""
        if self.in_epoch:
            return f"embedding to evaluate epoch {self.epoch + 1}"
        if not self.stepped:
            return "embedding to evaluate the untrained encoder"
        self.passes_after += 1
        return AFTER_TRAINING[min(self.passes_after, len(AFTER_TRAINING)) - 1]


def start_lines(info: dict[str, Any], config: TrainConfig) -> list[str]:
    """The lines a run starts with: where it trains, on what, and where it starts from
    (the checkpoint it resumes, or the start of its weights)."""
    from reid.engine.state import CHECKPOINT_FILE

    processes = info.get("world_size", 1)
    start = info.get("start_epoch", 0)
    if config.resume:
        where = f"resumed at epoch {start + 1} of {config.epochs} from {printable(Path(config.out) / CHECKPOINT_FILE)}"
    else:
        where = info["pretrained"]
    lines = [
        f"training on {info['device']}"
        + (f" in {processes} processes ({info['backend']}, {count(info['global_batch'])} images per step)" if processes > 1 else "")
        + f": {count(info['train_images'])} images of {count(info['identities'])} identities"
        + (f", {count(info['skipped'])} unreadable skipped" if info["skipped"] else "")
        + f"; {where}"
    ]
    drawn, total = info["coverage"]
    if drawn < total:
        lines.append(
            f"an epoch draws {count(drawn)} of the {count(total)} training images ({percent(drawn / max(1, total), 0)}): "
            f"a batch takes P={info['p']} distinct identities, so identities with many images are subsampled"
            + ("; lower -P or train more epochs to see the rest" if drawn < total / 2 else "")
        )
    before = info.get("checkpoint_world_size")
    if before is not None and before != processes:
        lines.append(f"resuming at epoch {start + 1} with {processes} processes; the checkpoint was written by {before}")
    return lines


def interrupted_line(run: RunState, config: TrainConfig) -> str:
    """What an interrupted run leaves: the last checkpoint written and how to continue, or that nothing was saved."""
    from reid.engine.state import CHECKPOINT_FILE

    checkpoint = printable(Path(config.out) / CHECKPOINT_FILE)
    if run.saved_epoch is not None:
        return (
            f"interrupted; {checkpoint} holds epoch {run.saved_epoch} of {config.epochs}: "
            f"continue with the same command and --resume"
        )
    if config.resume:
        return f"interrupted; no epoch finished in this run, {checkpoint} still holds epoch {run.start_epoch} of {config.epochs}"
    return "interrupted before the first epoch ended; nothing was saved"


@contextlib.contextmanager
def training_progress(quiet: bool, config: TrainConfig, run: RunState) -> Iterator[TrainCallbacks]:
    """Callbacks that drive one rich bar over all steps, plus a bar for each embedding pass
    (off a terminal, one line per epoch); ``run`` follows the run's epochs either way."""
    from reid.engine import TrainCallbacks

    progress = make_progress(TextColumn("{task.fields[status]}"))
    state: dict[str, Any] = {}

    def on_start(info: dict[str, Any]) -> None:
        run.start_epoch = info.get("start_epoch", 0)
        if not quiet:
            for line in start_lines(info, config):
                err_console.print(line, highlight=False, soft_wrap=True)

    def on_step(step: StepInfo) -> None:
        run.step(step)
        if "train" not in state:
            state["train"] = progress.add_task("train", total=step.epochs * step.steps_per_epoch, status="")
            progress.update(state["train"], completed=step.epoch * step.steps_per_epoch)
        progress.update(
            state["train"],
            advance=1,
            description=f"epoch {step.epoch + 1}/{step.epochs}",
            status=f"loss {loss(step.loss)} (ce {loss(step.ce)}, metric {loss(step.metric)}) lr {step.lr:.2e} {step.images_per_second:.0f} images/s",
        )

    def on_eval(done: int, total: int) -> None:
        key = f"eval-{total}"
        if key not in state or progress.tasks[state[key]].finished:
            state[key] = progress.add_task(run.embedding_purpose(), total=total, status="query + gallery")
        progress.update(state[key], completed=done)

    if quiet:
        yield TrainCallbacks(on_start=on_start, on_step=run.step, on_epoch=lambda epoch, _entry: run.epoch_done(epoch))
        return
    if isinstance(progress, PlainProgress):
        # Off a terminal (| tee, nohup, CI) a bar redrawn in place reaches the log only as
        # its last state: one plain line per epoch instead.
        epochs = EpochLines()

        def plain_step(step: StepInfo) -> None:
            run.step(step)
            epochs.step(step)

        def plain_epoch(epoch: int, entry: dict[str, Any]) -> None:
            run.epoch_done(epoch)
            epochs.line(epoch, entry)

        with progress:
            yield TrainCallbacks(on_start=on_start, on_step=plain_step, on_epoch=plain_epoch, on_eval_progress=on_eval)
        return
    with progress:
        yield TrainCallbacks(
            on_start=on_start,
            on_step=on_step,
            on_epoch=lambda epoch, _entry: run.epoch_done(epoch),
            on_eval_progress=on_eval,
        )


class EpochLines:
    """One line on stderr per epoch: ``epoch 3/10: loss 2.3451 (ce 1.2340, metric 1.1111),
    lr 3.50e-04, 812 images/s, 24 s, ETA 2 min 48 s`` (the ETA from the epochs' mean time)."""

    def __init__(self) -> None:
        self.epochs: int | None = None
        self.first_epoch: int | None = None
        self.started = time.monotonic()

    def step(self, step: StepInfo) -> None:
        if self.first_epoch is None:
            self.epochs, self.first_epoch, self.started = step.epochs, step.epoch, time.monotonic()

    def line(self, epoch: int, entry: dict[str, Any]) -> None:
        elapsed = time.monotonic() - self.started
        epochs = self.epochs or epoch + 1
        done = epoch + 1 - (self.first_epoch or 0)
        left = epochs - epoch - 1
        eta = f", ETA {duration(elapsed / max(done, 1) * left)}" if left > 0 else ""
        err_console.print(
            f"epoch {epoch + 1}/{epochs}: loss {loss(entry['loss'])} (ce {loss(entry['ce'])}, metric {loss(entry['metric'])}), "
            f"lr {entry['lr']:.2e}, {entry['images_per_second']:.0f} images/s, {duration(elapsed)}{eta}",
            soft_wrap=True,
        )


def computed_on_line(split: dict[str, Any]) -> str:
    """What an evaluation during training was computed on, in one line."""
    if not split:
        return "computed on: the data set's query/gallery split"
    held = "held-out identities" if split.get("held_out") else "identities also trained on"
    cameras = "" if split.get("cameras_known") else "; no camera ids, so same-camera matches count"
    return (
        f"computed on: {printable(split.get('dataset'))} query {split.get('query_images')} and gallery "
        f"{split.get('gallery_images')} images of {split.get('identities')} {held}{cameras}"
    )


def metric_row(label: str, metrics: dict[str, Any]) -> list[Any]:
    return [label, *(percent(metrics[key]) for key, _ in RANKING), metrics.get("num_valid_queries", "")]


METRIC_COLUMNS = [name for _, name in RANKING]


def print_recipe(config: TrainConfig) -> None:
    """The effective config as YAML on stdout, plain text so that it can be saved as a file."""
    typer.echo(config.to_yaml(), nl=False)


# The sections of train's help (and demo's), each option by its key; the rest under "Options".
TRAIN_PANELS: dict[str, tuple[str, ...]] = {
    "Data": ("data", "input_size", "p", "k", "kind", "no_face"),
    "Network": ("architecture", "pretrained", "keep_fc", "pooling", "last_stride", "embedding_dim"),
    "Optimisation": (
        "epochs", "max_steps", "optimizer", "lr", "backbone_lr_scale", "weight_decay", "momentum", "warmup_epochs", "schedule",
        "milestones", "gamma", "grad_clip", "amp", "seed", "ce_weight", "label_smoothing", "metric_loss",
        "metric_options", "metric_weight",
    ),
    "Output": ("out", "name", "wise_alpha", "eval_every", "eval_batch_size", "resume", "overwrite", "tensorboard"),
    "Machine": ("device", "threads", "sync_bn", "gather_embeddings"),
}  # fmt: skip
RECIPE = "Recipe"

CONFIG_HELP = "YAML recipe (the keys --print-config prints); options given on the command line override it."
PRINT_CONFIG_HELP = "Print the effective config (defaults, then --config, then options) as YAML and exit."


@handle_errors
@with_config_options(TrainConfig, panels=TRAIN_PANELS)
def train_command(
    config_file: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP, rich_help_panel=RECIPE),
    print_config: bool = typer.Option(False, "--print-config", help=PRINT_CONFIG_HELP, rich_help_panel=RECIPE),
    json_file: Optional[Path] = typer.Option(None, "--json", help="Write the training summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    **options: Any,
) -> None:
    """Train an encoder with cross-entropy + a metric loss on P x K batches.

    Every default is in the recipe `reid train --print-config` prints; --config FILE.yaml
    replaces the keys it holds, and the options given replace those. The model folder
    receives config.yaml, history.jsonl and curves.png. Started as
    `torchrun --nproc_per_node N -m reid train ...` it trains in N processes; -P and -K
    are then per process (see docs/scaling.md).
    """
    from reid.engine import train
    from reid.engine.distributed import is_main_process
    from reid.engine.history import CURVES_FILE, HISTORY_FILE

    if json_file:
        check_output_file(json_file, "--json")
    overrides = config_overrides(TrainConfig, options)
    config = resolve_config(TrainConfig(), config_file, overrides)
    if print_config:
        print_recipe(config)
        return
    run = RunState()
    try:
        with training_progress(quiet or not is_main_process(), config, run) as callbacks:
            result = train(config, callbacks)
    except KeyboardInterrupt:
        if is_main_process():
            err_console.print(interrupted_line(run, config), highlight=False, soft_wrap=True)
        raise typer.Exit(130) from None
    if result.rank != 0:
        return
    if result.skipped_images:
        path, reason = result.skipped_images[0]
        err_console.print(f"skipped {len(result.skipped_images)} unreadable images, e.g. {reason}")
    last = result.history[-1] if result.history else {}
    console.print(f"model written to {printable(result.model_dir)} (fingerprint {result.card.fingerprint}) in {result.seconds:.0f} s")
    console.print(f"recipe, history and curves: {CONFIG_FILE}, {HISTORY_FILE}, {CURVES_FILE} in the same folder", highlight=False)
    if config.tensorboard is not None:
        console.print(f"TensorBoard event files in {printable(config.tensorboard)}", highlight=False)
    if last.get("eval"):
        evaluation = last["eval"]
        computed_on = evaluation.get("computed_on") or {}
        print_table(
            f"{printable(result.model_dir)} on {printable(computed_on.get('dataset', config.data))}, after epoch {len(result.history)}",
            ["metric", "value"],
            ranking_rows(evaluation, computed_on),
        )
    if result.card.threshold is not None:
        model = printable(result.model_dir)
        console.print(
            f"threshold {distance(result.card.threshold)} on the card ({printable(result.card.threshold_source)})",
            highlight=False,
            soft_wrap=True,
        )
        console.print(f"next: reid enroll IMAGES -m {model} -g GALLERY", highlight=False, soft_wrap=True)
        console.print(f"then: reid query SOURCE -m {model} -g GALLERY", highlight=False, soft_wrap=True)
    else:
        err_console.print(f"note: {printable(result.threshold_note)}", highlight=False, soft_wrap=True)
    if json_file:
        write_json(json_file, {
            "model": str(result.model_dir), "fingerprint": result.card.fingerprint, "seconds": result.seconds,
            "world_size": result.world_size, "history": result.history,
            "threshold": result.card.threshold, "threshold_source": result.card.threshold_source,
        })


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
