"""``reid export``: a model folder to ONNX or TorchScript, checked against PyTorch."""

from __future__ import annotations

from pathlib import Path

import typer

from reid.cli.common import console, handle_errors, print_table, write_json
from reid.cli.defaults import given, with_default
from reid.models.names import DEFAULT_TOLERANCE, EXPORT_FORMATS
from reid.text import printable


@handle_errors
def export_command(
    model: str = typer.Option(..., "--model", "-m", help="Model folder, or a model's name under models/."),
    fmt: str | None = typer.Option(
        None, "--format", "-f", help=with_default(f"{EXPORT_FORMATS[0]} or {EXPORT_FORMATS[1]}.", EXPORT_FORMATS[0])
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Output file (default: MODEL/NAME.onnx or MODEL/NAME.torchscript.pt)."
    ),
    normalize: bool = typer.Option(
        True, "--normalize/--raw", help="Output L2-normalized embeddings, or the raw BNNeck embedding."
    ),
    tolerance: float | None = typer.Option(
        None,
        "--tolerance",
        help=with_default("Largest max abs difference from PyTorch accepted.", f"{DEFAULT_TOLERANCE:g}"),
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the result to this JSON file."),
) -> None:
    """Export a model's embedding (after BNNeck) with a dynamic batch axis and a card beside it."""
    from reid.models.export import export_model

    result = export_model(model, out=out, normalize=normalize, **given(fmt=fmt, tolerance=tolerance))
    print_table(
        f"{result.card.name} exported to {result.format}",
        ["item", "value"],
        [
            ["file", str(result.path)],
            ["card", str(result.card_path)],
            ["input", f"(N, 3, {result.card.input_size[0]}, {result.card.input_size[1]}) float32, N dynamic"],
            ["output", f"(N, {result.card.embedding_dim}) " + ("L2-normalized" if result.normalized else "raw")],
            ["max abs difference", f"{result.max_abs_diff:.3g}"],
            ["tolerance", f"{result.tolerance:g}"],
            ["checked batches", ", ".join(str(b) for b in result.checked_batches)],
        ],
    )
    console.print(
        f"max abs difference from PyTorch: {result.max_abs_diff:.3g} (tolerance {result.tolerance:g})",
        highlight=False,
    )
    if json_file is not None:
        write_json(
            json_file,
            {
                "file": str(result.path),
                "card": str(result.card_path),
                "format": result.format,
                "normalized_output": result.normalized,
                "max_abs_diff": result.max_abs_diff,
                "tolerance": result.tolerance,
                "fingerprint": result.card.fingerprint,
            },
        )
        console.print(f"wrote {printable(json_file)}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
