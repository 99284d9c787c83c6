"""``reid train`` and ``reid demo``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import typer
from rich.progress import Progress, TextColumn

from reid.cli.common import console, err_console, handle_errors, make_progress, print_table, write_json
from reid.cli.defaults import given, with_default
from reid.cli.model_options import parse_size
from reid.engine import StepInfo, TrainCallbacks, TrainConfig, train
from reid.engine.config import CONFIG_FILE, KINDS, NO_FACE_CHOICES, OPTIMIZERS, SCHEDULES, resolve_config
from reid.engine.demo import demo_config, run_demo
from reid.engine.distributed import is_main_process
from reid.engine.history import CURVES_FILE, HISTORY_FILE
from reid.engine.optim import WARMUP_START_FACTOR
from reid.errors import ConfigError
from reid.losses import LOSS_NAMES
from reid.models.backbones import known_architectures
from reid.models.network import POOLINGS
from reid.paths import check_output_file
from reid.text import printable

METRIC_KEYS = ("rank1", "rank5", "rank10", "mAP", "mINP")


def parse_milestones(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(m) for m in text.split(",") if m.strip())
    except ValueError:
        raise ConfigError(f"--milestones {text!r}: expected comma-separated epochs, e.g. 40,70") from None


def parse_options(items: list[str]) -> dict[str, str]:
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--loss-option {item!r}: expected KEY=VALUE, e.g. margin=0.3")
        options[key.strip()] = value.strip()
    return options


@contextlib.contextmanager
def training_progress(quiet: bool) -> Iterator[TrainCallbacks]:
    """Callbacks that drive one rich bar over all steps, plus a bar for evaluation."""
    progress: Progress = make_progress(TextColumn("{task.fields[status]}"))
    state: dict[str, Any] = {}

    def on_start(info: dict[str, Any]) -> None:
        processes = info.get("world_size", 1)
        err_console.print(
            f"training on {info['device']}"
            + (f" in {processes} processes ({info['backend']}, {info['global_batch']} images per step)" if processes > 1 else "")
            + f": {info['train_images']} images of {info['identities']} identities"
            + (f", {info['skipped']} unreadable skipped" if info["skipped"] else "")
            + f"; {info['pretrained']}"
        )
        drawn, total = info["coverage"]
        if drawn < total:
            err_console.print(
                f"an epoch draws {drawn} of the {total} training images ({drawn / max(1, total):.0%}): a batch takes "
                f"P={info['p']} distinct identities, so identities with many images are subsampled"
                + ("; lower --p or train more epochs to see the rest" if drawn < total / 2 else "")
            )
        before = info.get("checkpoint_world_size")
        if before is not None and before != processes:
            err_console.print(
                f"resuming at epoch {info['start_epoch'] + 1} with {processes} processes; the checkpoint was written by {before}"
            )

    def on_step(step: StepInfo) -> None:
        if "train" not in state:
            state["train"] = progress.add_task("train", total=step.epochs * step.steps_per_epoch, status="")
            progress.update(state["train"], completed=step.epoch * step.steps_per_epoch)
        progress.update(
            state["train"],
            advance=1,
            description=f"epoch {step.epoch + 1}/{step.epochs}",
            status=f"loss {step.loss:.3f} (ce {step.ce:.3f}, metric {step.metric:.3f}) lr {step.lr:.2e} {step.images_per_second:.0f} img/s",
        )

    def on_eval(done: int, total: int) -> None:
        key = f"eval-{total}"
        if key not in state or progress.tasks[state[key]].finished:
            state[key] = progress.add_task("embed", total=total, status="query + gallery")
        progress.update(state[key], completed=done)

    if quiet:
        yield TrainCallbacks()
        return
    with progress:
        yield TrainCallbacks(on_start=on_start, on_step=on_step, on_eval_progress=on_eval)


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
    return [label, *(metrics[k] for k in METRIC_KEYS), metrics.get("num_valid_queries", "")]


def shown(key: str, value: Any) -> str:
    """A config value as its option is typed (``256x128``, ``40,70``, ``none``)."""
    if isinstance(value, tuple):
        return ("x" if key == "input_size" else ",").join(str(v) for v in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "none"
    return "none" if value is None else str(value)


def default_help(text: str, key: str, recipe: TrainConfig | None = None) -> str:
    """``text`` followed by the default of ``key``, read from the recipe (TrainConfig's
    defaults unless given), so that help never restates a default."""
    return with_default(text, shown(key, getattr(recipe or TrainConfig(), key)))


def print_recipe(config: TrainConfig) -> None:
    """The effective config as YAML on stdout, plain text so that it can be saved as a file."""
    typer.echo(config.to_yaml(), nl=False)


CONFIG_HELP = "YAML recipe (the keys --print-config prints); options given on the command line override it."
PRINT_CONFIG_HELP = "Print the effective config (defaults, then --config, then options) as YAML and exit."


@handle_errors
def train_command(
    config_file: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP),
    print_config: bool = typer.Option(False, "--print-config", help=PRINT_CONFIG_HELP),
    data: Optional[str] = typer.Option(None, "--data", help=default_help("Dataset: synthetic, market1501:PATH, dukemtmc:PATH, msmt17:PATH or folder:PATH.", "data")),
    out: Optional[Path] = typer.Option(None, "--out", help="Model folder to write (unset: models/ARCH-KIND)."),
    arch: Optional[str] = typer.Option(None, "--arch", help=default_help(f"Backbone: {', '.join(known_architectures())}.", "architecture")),
    pretrained: Optional[str] = typer.Option(
        None, "--pretrained",
        help=default_help(
            "imagenet (cached, else downloaded, else an error), none (train from scratch), a name from `reid models list`, "
            "or a checkpoint file (torchreid, fast-reid, DataParallel).",
            "pretrained",
        ),
    ),
    pooling: Optional[str] = typer.Option(None, "--pooling", help=default_help(f"{' or '.join(POOLINGS)}.", "pooling")),
    embedding_dim: Optional[int] = typer.Option(None, "--embedding-dim", help="Add a linear reduction to this dimension."),
    size: Optional[str] = typer.Option(None, "--size", help=default_help("Input size HxW.", "input_size")),
    p: Optional[int] = typer.Option(None, "--p", "-P", help=default_help("Identities per batch (per process under torchrun, which needs the spelling -P).", "p")),
    k: Optional[int] = typer.Option(None, "--k", "-K", help=default_help("Images per identity in a batch.", "k")),
    epochs: Optional[int] = typer.Option(None, "--epochs", help=default_help("", "epochs")),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after this many steps in all."),
    optimizer: Optional[str] = typer.Option(None, "--optimizer", help=default_help(f"{', '.join(OPTIMIZERS)}.", "optimizer")),
    lr: Optional[float] = typer.Option(None, "--lr", help=default_help("Learning rate.", "lr")),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay", help=default_help("", "weight_decay")),
    warmup: Optional[int] = typer.Option(None, "--warmup", help=default_help(f"Warm-up epochs (linear from {WARMUP_START_FACTOR:.0%} of --lr).", "warmup_epochs")),
    schedule: Optional[str] = typer.Option(None, "--schedule", help=default_help(f"{', '.join(SCHEDULES)}.", "schedule")),
    milestones: Optional[str] = typer.Option(None, "--milestones", help=default_help("Comma-separated epochs where the step schedule multiplies lr by --gamma.", "milestones")),
    gamma: Optional[float] = typer.Option(None, "--gamma", help=default_help("", "gamma")),
    grad_clip: Optional[float] = typer.Option(None, "--grad-clip", help="Clip the gradient norm to this value."),
    amp: Optional[bool] = typer.Option(None, "--amp/--no-amp", help=default_help("Mixed precision on CUDA.", "amp")),
    seed: Optional[int] = typer.Option(None, "--seed", help=default_help("", "seed")),
    ce_weight: Optional[float] = typer.Option(None, "--ce-weight", help=default_help("Weight of identity cross-entropy (0 disables it).", "ce_weight")),
    label_smoothing: Optional[float] = typer.Option(None, "--label-smoothing", help=default_help("", "label_smoothing")),
    loss: Optional[str] = typer.Option(None, "--loss", help=default_help(f"Metric loss: {', '.join(LOSS_NAMES)}, or none.", "metric_loss")),
    loss_option: list[str] = typer.Option([], "--loss-option", help=default_help("KEY=VALUE option of the metric loss (repeatable).", "metric_options")),
    metric_weight: Optional[float] = typer.Option(None, "--metric-weight", help=default_help("Weight of the metric loss (0 disables it).", "metric_weight")),
    eval_every: Optional[int] = typer.Option(None, "--eval-every", help=default_help("Evaluate on the query/gallery split every N epochs (and at the end); 0: never.", "eval_every")),
    resume: bool = typer.Option(False, "--resume", help="Continue from OUT/checkpoint.pt (the config must train what OUT/config.yaml says)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the finished model in OUT (without it such a folder is refused); the old one stays whole until the new one is saved."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads for PyTorch."),
    sync_bn: Optional[bool] = typer.Option(None, "--sync-bn/--no-sync-bn", help=default_help("Under torchrun on CUDA: BatchNorm statistics over the global batch.", "sync_bn")),
    gather_embeddings: Optional[bool] = typer.Option(
        None, "--gather-embeddings/--no-gather-embeddings",
        help=default_help("Under torchrun: the metric loss mines over the embeddings of every process.", "gather_embeddings"),
    ),
    tensorboard: Optional[Path] = typer.Option(
        None, "--tensorboard", help='Also write the history as TensorBoard event files into this folder (needs the tensorboard extra).'
    ),
    kind: Optional[str] = typer.Option(None, "--kind", help=default_help(f"What the photos show: {', '.join(KINDS)} (face: each photo cut once to the aligned chip of its largest face, found by yunet).", "kind")),
    no_face: Optional[str] = typer.Option(None, "--no-face", help=default_help(f"With --kind face, a photo without a face: {', '.join(NO_FACE_CHOICES)}.", "no_face")),
    json_file: Optional[Path] = typer.Option(None, "--json", help="Write the training summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Train an encoder with cross-entropy + a metric loss on P x K batches.

    Every default is in the recipe `reid train --print-config` prints; --config FILE.yaml
    replaces the keys it holds, and the options given replace those. The model folder
    receives config.yaml, history.jsonl and curves.png. Started as
    `torchrun --nproc_per_node N -m reid train ...` it trains in N processes; --p and --k
    are then per process (see docs/scaling.md).
    """
    if json_file:
        check_output_file(json_file, "--json")
    overrides = given(
        data=data, out=out, architecture=arch, pretrained=pretrained, pooling=pooling, embedding_dim=embedding_dim,
        input_size=parse_size(size, "--size") if size is not None else None, p=p, k=k, epochs=epochs, max_steps=max_steps,
        optimizer=optimizer, lr=lr, weight_decay=weight_decay, warmup_epochs=warmup, schedule=schedule,
        milestones=parse_milestones(milestones) if milestones is not None else None, gamma=gamma, grad_clip=grad_clip,
        amp=amp, seed=seed, ce_weight=ce_weight, label_smoothing=label_smoothing, metric_loss=loss,
        metric_options=parse_options(loss_option) if loss_option else None, metric_weight=metric_weight,
        eval_every=eval_every, resume=resume or None, overwrite=overwrite or None, device=device, threads=threads, sync_bn=sync_bn,
        gather_embeddings=gather_embeddings, tensorboard=tensorboard, kind=kind, no_face=no_face,
    )
    config = resolve_config(TrainConfig(), config_file, overrides)
    if print_config:
        print_recipe(config)
        return
    with training_progress(quiet or not is_main_process()) as callbacks:
        result = train(config, callbacks)
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
        print_table("evaluation (Market-1501 protocol)", ["model", *METRIC_KEYS, "valid queries"], [metric_row(str(result.model_dir), last["eval"])])
        console.print(computed_on_line(last["eval"].get("computed_on") or {}), highlight=False)
    if json_file:
        write_json(json_file, {
            "model": str(result.model_dir), "fingerprint": result.card.fingerprint, "seconds": result.seconds,
            "world_size": result.world_size, "history": result.history,
        })


# Help is built at every start of the program: the recipe it shows looks for an installed
# ImageNet start without hashing it (the demo itself checks the file).
DEMO_HELP_RECIPE = demo_config(verify=False)


@handle_errors
def demo_command(
    config_file: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP),
    print_config: bool = typer.Option(False, "--print-config", help=PRINT_CONFIG_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="Where the trained demo model goes."),
    data: Optional[str] = typer.Option(None, "--data", help=default_help("Dataset to run the demo on.", "data", DEMO_HELP_RECIPE)),
    epochs: Optional[int] = typer.Option(None, "--epochs", help=default_help("Epochs.", "epochs", DEMO_HELP_RECIPE)),
    p: Optional[int] = typer.Option(None, "--p", help=default_help("Identities per batch.", "p", DEMO_HELP_RECIPE)),
    k: Optional[int] = typer.Option(None, "--k", help=default_help("Images per identity in a batch.", "k", DEMO_HELP_RECIPE)),
    json_file: Optional[Path] = typer.Option(None, "--json", help="Write {untrained, trained, seconds} as JSON."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads for PyTorch."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """The main job on built-in data: generate, evaluate untrained, train, evaluate trained.

    The demo's recipe is `reid demo --print-config` (configs/demo.yaml); --config and the
    options given override it.
    """
    overrides = given(out=out, data=data, epochs=epochs, p=p, k=k, threads=threads)
    config = resolve_config(demo_config(), config_file, overrides)
    if print_config:
        print_recipe(config)
        return
    with training_progress(quiet) as callbacks:
        result = run_demo(config, callbacks)
    print_table(
        "reid demo: synthetic person set, Market-1501 protocol (AP = mean precision at each true match)",
        ["encoder", *METRIC_KEYS, "valid queries"],
        [metric_row("untrained", result.untrained.to_dict()), metric_row("trained", result.trained.to_dict())],
    )
    console.print(computed_on_line(result.computed_on), highlight=False)
    console.print(result.start, soft_wrap=True, highlight=False)
    console.print(f"trained model in {printable(result.model_dir)}; total {result.seconds:.0f} s")
    if json_file:
        write_json(json_file, result.to_dict())


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
    app.command("demo")(demo_command)
