"""``reid models list|show|fetch|add|path`` and ``reid import``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from reid.cli.common import CommandTyper, console, err_console, handle_errors, print_table, write_json
from reid.errors import ConfigError
from reid.models.names import NAMED_FORMATS
from reid.text import printable

if TYPE_CHECKING:
    from reid.models.registry import Artefact, PublishedFile

models_app = CommandTyper(
    help="Pretrained artefacts: list them, show one, fetch them into the cache, add files you bring, show where they are.",
    no_args_is_help=True,
)


class _RichBar:
    """One file's bar in a rich Progress, behind the interface pooch's downloader drives."""

    def __init__(self, progress: Progress, label: str) -> None:
        self._progress, self._task = progress, progress.add_task(label, total=None)

    @property
    def total(self) -> float | None:
        return self._progress.tasks[self._task].total

    @total.setter
    def total(self, value: int) -> None:
        self._progress.update(self._task, total=value or None)

    def update(self, count: int) -> None:
        self._progress.advance(self._task, count)

    def reset(self) -> None:
        self._progress.reset(self._task, total=self.total)

    def close(self) -> None:
        self._progress.refresh()


class _PlainBar:
    """Without a terminal: one line when a download starts and one when it ends."""

    def __init__(self, published: PublishedFile) -> None:
        self.total, self._name = 0, published.name
        err_console.print(f"downloading {printable(published.url)}", soft_wrap=True)

    def update(self, count: int) -> None:
        pass

    def reset(self) -> None:
        pass

    def close(self) -> None:
        err_console.print(f"downloaded {printable(self._name)} ({self.total:,} bytes)", soft_wrap=True)


def _size(artefact: Artefact) -> str:
    """The artefact's size in MB: its published files', else its cached file's; ``-`` when
    neither is known."""
    from reid.models.registry import artefact_path

    if artefact.files:
        sizes = [f.size for f in artefact.files]
        return f"{sum(sizes) / 1e6:.1f} MB" if all(sizes) else "-"
    path = artefact_path(artefact)
    return f"{path.stat().st_size / 1e6:.1f} MB" if path.is_file() else "-"


@models_app.command("list")
@handle_errors
def list_command(json_file: Optional[Path] = typer.Option(None, "--json", help="Also write the registry as JSON.")) -> None:
    """One line per model: name, task, size, cached or not (`reid models show NAME` says the rest)."""
    from reid.models.registry import ARTEFACTS, artefact_path, cache_state

    print_table(
        "pretrained models (details: reid models show NAME)",
        ["name", "task", "size", "cached"],
        [[a.name, a.kind, _size(a), cache_state(a)] for a in ARTEFACTS.values()],
    )
    if json_file:
        write_json(json_file, [
            {"name": a.name, "kind": a.kind, "architecture": a.architecture, "source": a.source, "from": a.origin,
             "sha256": a.sha256, "licence": a.licence, "layout": a.layout, "runtime": a.runtime, "path": str(artefact_path(a)),
             "cached": cache_state(a) == "yes", "cache_state": cache_state(a),
             "files": [{"name": f.name, "url": f.url, "size": f.size, "digest": f.digest} for f in a.files]}
            for a in ARTEFACTS.values()
        ])


@models_app.command("show")
@handle_errors
def show_command(name: str = typer.Argument(..., help="Artefact name, as `reid models list` shows it.")) -> None:
    """One artefact: task, runtime, preprocessing, published figures, and each file with its URL, size and hash."""
    from reid.models.registry import get_artefact

    artefact = get_artefact(name)
    for key, value in _described(artefact):
        console.print(f"{key}: {printable(value)}", highlight=False, soft_wrap=True)


def _described(artefact: Artefact) -> list[tuple[str, str]]:
    from reid.detect.names import DETECTOR_ARTEFACTS
    from reid.models.registry import artefact_path, cache_state

    mean_0_255 = all(m == 0 for m in artefact.mean) and all(abs(s * 255 - 1) < 1e-6 for s in artefact.std)
    pixels = "0-255 as they are" if mean_0_255 else f"/255, then mean {artefact.mean}, std {artefact.std}"
    height, width = artefact.input_size
    rows = [
        ("name", artefact.name),
        ("architecture", artefact.architecture),
        ("task", artefact.kind),
        ("runtime", artefact.runtime),
        ("description", artefact.description),
        ("licence", artefact.licence),
        ("from", artefact.origin),
        ("size", _size(artefact)),
        ("input", f"{height}x{width} (height x width), {artefact.channel_order.upper()}, pixels {pixels}"),
        ("cached", f"{cache_state(artefact)} ({artefact_path(artefact).parent if artefact.files else artefact_path(artefact)})"),
    ]
    if artefact.name in DETECTOR_ARTEFACTS:
        rows.append(("run it with", f"--detector {DETECTOR_ARTEFACTS[artefact.name]} (or --detector {artefact.name})"))
    if not artefact.files:
        rows.append(("sha256", artefact.sha256 or "not published (the first file accepted is recorded)"))
    rows += [(f"published {key}", f"{value:g}") for key, value in artefact.metrics]
    for published in artefact.files:
        size = f"{published.size:,} bytes" if published.size else "size not published"
        digest = published.digest or "hash not published (the first file accepted is recorded)"
        rows.append((f"file {published.name}", f"{published.url or 'not published'}; {size}; {digest}"))
    return rows


@models_app.command("fetch")
@handle_errors
def fetch_command(names: list[str] = typer.Argument(..., help="Artefact names, as `reid models list` shows them.")) -> None:
    """Fetch artefacts into the cache (verified by their published hash, with a progress bar) and print where each file is."""
    from reid.models.registry import fetch_files

    for name in names:
        if err_console.is_terminal:
            columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
            with Progress(*columns, console=err_console, transient=True) as progress:
                paths = fetch_files(name, progress=lambda published: _RichBar(progress, published.name))
        else:
            paths = fetch_files(name, progress=_PlainBar)
        for path in paths:
            console.print(f"{printable(name)}: {printable(path)}", highlight=False, soft_wrap=True)


@models_app.command("add")
@handle_errors
def add_command(
    name: str = typer.Argument(..., help="Artefact name, as `reid models list` shows it."),
    source: Path = typer.Argument(..., help="The file you bring, or a folder holding the artefact's files (an IR's .xml and .bin)."),
) -> None:
    """Put a file you bring into the cache once its size and hash check (a model with no published file: its hash is recorded)."""
    from reid.models.registry import add

    for path in add(name, source):
        console.print(f"{printable(name)}: {printable(path)}", highlight=False, soft_wrap=True)


@models_app.command("path")
@handle_errors
def path_command(name: str = typer.Argument(..., help="Artefact name.")) -> None:
    """Print where an artefact's file lives (or will live once fetched)."""
    from reid.models.registry import artefact_path, get_artefact

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
    from reid.models.imports import import_model

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
