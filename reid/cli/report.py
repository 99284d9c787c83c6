"""``reid report``: a model folder's card, recipe, last figures and training curves."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from reid.cli.common import RANKING, console, handle_errors, print_table, write_json
from reid.cli.evaluate import ranking_rows
from reid.evaluation.names import distance, loss, timestamp
from reid.text import printable

# The engine is imported when the command runs, never to print help.
if TYPE_CHECKING:
    from reid.models.card import ModelCard

EPOCH_KEYS = (("epoch", "epoch"), ("step", "step"), ("loss", "loss"), ("ce", "cross-entropy"), ("metric", "metric loss"),
              ("lr", "learning rate"), ("images_per_second", "images/s"))
# Each figure of an epoch as `reid train` prints it: losses by reid.evaluation.names.loss.
LOSS_KEYS = ("loss", "ce", "metric")
EPOCH_SPECS = {"lr": ".2e", "images_per_second": ".0f"}


def figure(value: Any, spec: str) -> Any:
    """A number in ``spec``; anything else (a hand-edited card may hold text) as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return value


def epoch_figure(key: str, value: Any) -> Any:
    """An epoch's figure written as the epoch lines of ``reid train`` write it."""
    if key in LOSS_KEYS:
        return loss(value)
    return figure(value, EPOCH_SPECS[key]) if key in EPOCH_SPECS else value


def options_text(options: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in options.items()) or "none"


def card_rows(card: ModelCard) -> list[list[Any]]:
    metric = card.loss.get("metric") or {}
    data = card.training_data
    return [
        ["name", card.name],
        ["architecture", f"{card.architecture}, {card.pooling} pooling, last stride {card.last_stride}"],
        ["input", f"{card.input_size[0]}x{card.input_size[1]} {card.channel_order.upper()}"],
        ["embedding", f"{card.embedding_dim}-d, L2-normalized"],
        ["initialised from", card.pretrained],
        ["cross-entropy", options_text(card.loss.get("cross_entropy") or {})],
        ["metric loss", options_text(metric)],
        ["training data", f"{data.get('spec', '-')}: {data.get('train_images', '?')} images of {data.get('train_identities', '?')} identities" if data else "-"],
        ["threshold", "-" if card.threshold is None else f"{distance(card.threshold)} (Euclidean, unit embeddings; {card.threshold_source or 'no source'})"],
        ["fingerprint", card.fingerprint or "-"],
        ["created", timestamp(card.created) if card.created else "-"],
    ]


@handle_errors
def report_command(
    model: str = typer.Argument(..., help="Model folder, or a model's name under models/."),
    json_file: Optional[Path] = typer.Option(None, "--json", help="Also write the report as JSON."),
) -> None:
    """Print a model's card, its training recipe and its last figures; draw curves.png if it is missing."""
    from reid.engine.report import model_report

    report = model_report(model)
    if report.card is not None:
        print_table(f"model card ({report.folder})", ["field", "value"], card_rows(report.card))
    else:
        console.print(f"{printable(report.folder)}: no model card yet (training has not finished)", highlight=False)
    if report.recipe is not None:
        console.print("recipe (config.yaml):", highlight=False)
        console.print(report.recipe.to_yaml().rstrip(), highlight=False, markup=False)
    else:
        console.print("no config.yaml: the model was trained before recipes were saved", highlight=False)
    last = report.last_epoch
    if last is not None:
        print_table(
            f"last epoch of {len(report.history)} recorded",
            ["figure", "value"],
            [[label, epoch_figure(key, last[key])] for key, label in EPOCH_KEYS if key in last],
        )
    metrics = report.metrics or {}
    if any(key in metrics for key, _ in RANKING):
        # The layout of `reid eval` and `reid train`'s evaluation.
        print_table("ranking (Market-1501 protocol)", ["metric", "value"], ranking_rows(metrics, metrics.get("computed_on") or {}))
    else:
        console.print(
            f"no ranking figures: the model was never evaluated (reid eval --model {printable(report.folder)} --data KIND:PATH)",
            highlight=False,
            soft_wrap=True,
        )
    if report.curves is not None:
        console.print(f"curves: {printable(report.curves)}" + (" (drawn now)" if report.curves_written else ""), highlight=False)
    else:
        console.print("no curves: no epoch recorded", highlight=False)
    if json_file is not None:
        write_json(json_file, report.to_dict())


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
