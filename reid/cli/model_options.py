"""Preprocessing flags for ONNX files, shared by every command that takes ``--model``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from reid.cli.defaults import parse_size
from reid.errors import ConfigError

if TYPE_CHECKING:
    from reid.models import Preprocessing

# Their section of help.
ONNX_FILE = "ONNX file"
INPUT_SIZE_OPTION = typer.Option(
    None,
    "--input-size",
    help="ONNX file: input HEIGHTxWIDTH, e.g. 256x128 (default: its card, else 256x128).",
    rich_help_panel=ONNX_FILE,
)
MEAN_OPTION = typer.Option(
    None,
    "--mean",
    help="ONNX file: per-channel mean R,G,B on 0..1 (default: its card, else ImageNet's).",
    rich_help_panel=ONNX_FILE,
)
STD_OPTION = typer.Option(
    None,
    "--std",
    help="ONNX file: per-channel std R,G,B on 0..1 (default: its card, else ImageNet's).",
    rich_help_panel=ONNX_FILE,
)
RGB_OPTION = typer.Option(
    None,
    "--rgb/--bgr",
    help="ONNX file: channel order the model expects (default: its card, else RGB).",
    rich_help_panel=ONNX_FILE,
)


def _triple(flag: str, text: str, positive: bool = False) -> tuple[float, float, float]:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3:
        raise ConfigError(f"{flag} {text[:40]!r}: expected three comma-separated numbers, e.g. 0.485,0.456,0.406")
    if not all(0.0 <= value <= 1.0 for value in values):
        raise ConfigError(f"{flag} {text!r}: every value must be between 0 and 1 (pixels scaled to 0..1)")
    if positive and min(values) <= 0:
        raise ConfigError(f"{flag} {text!r}: every value must be positive")
    return values  # type: ignore[return-value]


def preprocessing_from_flags(
    input_size: str | None, mean: str | None, std: str | None, rgb: bool | None
) -> Preprocessing | None:
    """The flags as a Preprocessing override, or None when none was given."""
    from reid.models import Preprocessing

    preprocessing = Preprocessing(
        input_size=None if input_size is None else parse_size(input_size),
        mean=None if mean is None else _triple("--mean", mean),
        std=None if std is None else _triple("--std", std, positive=True),
        channel_order=None if rgb is None else ("rgb" if rgb else "bgr"),
    )
    return None if preprocessing.is_empty() else preprocessing
