"""``reid demo``: the main job on built-in data.  Its help shows the ImageNet recipe (the
one ``pip install -e ".[dev]"`` runs) without asking the model registry (PyTorch) which
start is installed; ``reid demo --print-config`` shows the recipe this installation runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from reid.cli.common import console, handle_errors, print_table, write_json
from reid.cli.defaults import config_overrides, with_config_options
from reid.cli.train import (
    CONFIG_HELP,
    METRIC_COLUMNS,
    PRINT_CONFIG_HELP,
    RECIPE,
    TRAIN_PANELS,
    RunState,
    computed_on_line,
    metric_row,
    print_recipe,
    training_progress,
)
from reid.engine.config import TrainConfig, resolve_config
from reid.engine.demo_recipe import demo_recipe
from reid.text import printable

# Help is built at every start of the program, so it shows one recipe without loading the engine.
DEMO_HELP_RECIPE = demo_recipe(imagenet=True)


DEMO_KEYS = ("out", "data", "epochs", "p", "k", "threads")


@handle_errors
@with_config_options(TrainConfig, DEMO_HELP_RECIPE, DEMO_KEYS, panels=TRAIN_PANELS)
def demo_command(
    config_file: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP, rich_help_panel=RECIPE),
    print_config: bool = typer.Option(False, "--print-config", help=PRINT_CONFIG_HELP, rich_help_panel=RECIPE),
    json_file: Optional[Path] = typer.Option(None, "--json", help="Write {untrained, trained, seconds} as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    **options: Any,
) -> None:
    """The main job on built-in data: generate, evaluate untrained, train, evaluate trained.

    The defaults shown are the recipe from ImageNet weights (the pretrained extra); without
    an ImageNet start the demo trains ResNet-18 from scratch. `reid demo --print-config`
    shows the recipe this installation runs; --config and the options given override it.
    """
    from reid.engine.demo import demo_config, run_demo

    config = resolve_config(demo_config(), config_file, config_overrides(TrainConfig, options))
    if print_config:
        print_recipe(config)
        return
    with training_progress(quiet, config, RunState()) as callbacks:
        result = run_demo(config, callbacks)
    print_table(
        "reid demo: synthetic person set, Market-1501 protocol (AP = mean precision at each true match)",
        ["encoder", *METRIC_COLUMNS, "valid queries"],
        [metric_row("untrained", result.untrained.to_dict()), metric_row("trained", result.trained.to_dict())],
    )
    console.print(computed_on_line(result.computed_on), highlight=False)
    console.print(result.start, soft_wrap=True, highlight=False)
    console.print(f"trained model in {printable(result.model_dir)}; total {result.seconds:.0f} s")
    if json_file:
        write_json(json_file, result.to_dict())


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
