"""``reid models list|fetch|path`` and ``reid import``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from reid.cli.common import console, handle_errors, print_table, write_json
from reid.errors import ConfigError
from reid.models.formats import NAMED_FORMATS
from reid.models.imports import import_model
from reid.models.registry import ARTEFACTS, artefact_path, cache_state, fetch, get_artefact
from reid.text import printable

models_app = typer.Typer(help="Pretrained artefacts: list them, fetch them into the cache, show where they are.", no_args_is_help=True)


def _hash_text(sha256: str) -> str:
    if not sha256:
        return "not published (first file checked, then recorded)"
    return f"{sha256[:12]}…" if len(sha256) == 64 else f"{sha256} (prefix)"


@models_app.command("list")
@handle_errors
def list_command(json_file: Optional[Path] = typer.Option(None, "--json", help="Also write the registry as JSON.")) -> None:
    """Every known artefact: kind, architecture, origin, SHA-256, licence and whether it is cached."""
    rows = [
        [a.name, a.kind, a.where, _hash_text(a.sha256), a.licence, cache_state(a)]
        for a in ARTEFACTS.values()
    ]
    print_table("pretrained artefacts", ["name", "kind", "from", "sha256", "licence", "cached"], rows)
    if json_file:
        write_json(json_file, [
            {"name": a.name, "kind": a.kind, "architecture": a.architecture, "source": a.source, "from": a.origin,
             "sha256": a.sha256, "licence": a.licence, "layout": a.layout, "path": str(artefact_path(a)), "cached": cache_state(a) == "yes",
             "cache_state": cache_state(a)}
            for a in ARTEFACTS.values()
        ])


@models_app.command("fetch")
@handle_errors
def fetch_command(names: list[str] = typer.Argument(..., help="Artefact names, as `reid models list` shows them.")) -> None:
    """Fetch artefacts into the cache (verified by SHA-256) and print where each one is."""
    for name in names:
        console.print(f"{printable(name)}: {printable(fetch(name))}", highlight=False, soft_wrap=True)


@models_app.command("path")
@handle_errors
def path_command(name: str = typer.Argument(..., help="Artefact name.")) -> None:
    """Print where an artefact's file lives (or will live once fetched)."""
    console.print(printable(artefact_path(get_artefact(name))), highlight=False, soft_wrap=True)


@handle_errors
def import_command(
    file: Path = typer.Argument(..., help="Checkpoint file: a state_dict, wrapped or DataParallel-prefixed, from torchreid or fast-reid."),
    arch: str = typer.Option(..., "--arch", help="Architecture of the checkpoint, e.g. osnet_x1_0 or resnet50."),
    out: Path = typer.Option(..., "--out", help="Model folder to write, e.g. models/osnet-market."),
    source: Optional[str] = typer.Option(None, "--from", help=f"The file's format where its names do not tell: {', '.join(NAMED_FORMATS)}."),
    last_stride: Optional[int] = typer.Option(
        None, "--last-stride", help="ResNet's last stride (default: torchreid 2, or 1 with its fc layer; fast-reid 1)."
    ),
    pooling: Optional[str] = typer.Option(
        None, "--pooling", help="avg or gem where the file does not tell (fast-reid's fixed GeM stores no tensor; gem is p = 3)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the finished model in OUT (without it such a folder is refused)."),
    json_file: Optional[Path] = typer.Option(None, "--json", help="Also write the card as JSON."),
) -> None:
    """Write a model folder from a checkpoint made elsewhere, for eval, enroll, query, verify, calibrate and export."""
    if source is not None and source not in NAMED_FORMATS:
        raise ConfigError(f"--from {source!r}: choose one of {', '.join(NAMED_FORMATS)}")
    card = import_model(file, arch, out, source=source, last_stride=last_stride, overwrite=overwrite, pooling=pooling)
    console.print(
        f"model written to {printable(out)} ({card.architecture}, {card.embedding_dim}-d, neck {card.neck}, "
        f"fingerprint {card.fingerprint}); {printable(card.pretrained)}",
        highlight=False, soft_wrap=True,
    )
    if json_file:
        write_json(json_file, card.to_dict())


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
    app.command("import")(import_command)
