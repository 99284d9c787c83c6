"""Shared pieces of the CLI: consoles, error handling, progress bars, tables, JSON."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from reid.errors import ReidError
from reid.paths import write_bytes_atomic
from reid.text import printable

# Markup is off: paths, identity labels and sources are printed as they are, never
# interpreted ("[/x]" in a file name is text); styled words are built as rich Text.
console = Console(markup=False, highlight=False)
err_console = Console(stderr=True, markup=False, highlight=False)
SHOWN_SKIPS = 20

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn a ReidError, or an operating-system error (a full disk, a read-only or
    unreadable file), into one line on stderr naming the file, and exit code 1; Ctrl-C into
    exit 130."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ReidError as exc:
            print_error(str(exc))
            raise typer.Exit(1) from None
        except OSError as exc:
            print_error(os_error_line(exc))
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def os_error_line(exc: OSError) -> str:
    """One line for an operating-system error: the file, then what went wrong."""
    where = exc.filename if exc.filename is not None else "file system"
    what = exc.strerror or type(exc).__name__
    return f"{where}: {what}"


def print_error(message: str) -> None:
    err_console.print(Text.assemble(("error:", "bold red"), " ", printable(message)), soft_wrap=True)


def print_skipped(skipped: Iterable[tuple[object, str]], what: str = "skipped") -> None:
    """Name the first skipped inputs with their reasons, then how many more there were."""
    items = list(skipped)
    for path, reason in items[:SHOWN_SKIPS]:
        err_console.print(f"{what} {printable(path)}: {printable(reason)}", soft_wrap=True)
    if len(items) > SHOWN_SKIPS:
        err_console.print(f"... and {len(items) - SHOWN_SKIPS} more {what}; --json lists every one", soft_wrap=True)


@contextmanager
def live_display(renderable: Any) -> Iterator[Live]:
    """A rich Live view on stderr whose last line is always ended, so that what follows
    (an error line, say) starts on its own line also when stderr is a file or a pipe."""
    try:
        with Live(renderable, console=err_console, refresh_per_second=4) as live:
            yield live
    finally:
        if not err_console.is_terminal:
            err_console.line()


def make_progress(*extra: Any) -> Progress:
    """A rich progress bar with count, rate-bearing extra columns, elapsed time and ETA."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        *extra,
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    )


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return printable(value)


# The first column names each row (an artefact, an identity): it keeps this many characters
# on one line however narrow the terminal or pipe, and longer names wrap, never cut.
NAME_COLUMN = 64


def print_table(title: str, columns: list[str], rows: Iterable[Iterable[Any]]) -> None:
    """A table on stdout; no cell is ever cut short (narrow columns wrap), and the first
    column's names stay whole on their line up to :data:`NAME_COLUMN` characters, so that
    ``| grep NAME`` finds them also in an 80-column terminal or a pipe."""
    cells = [[fmt(v) for v in row] for row in rows]
    table = Table(title=printable(title))
    widest = max([len(columns[0]), *(len(row[0]) for row in cells if row)])
    for column in columns:
        if column == columns[0]:
            table.add_column(column, justify="left", no_wrap=True, min_width=min(widest, NAME_COLUMN), overflow="fold")
        else:
            table.add_column(column, justify="right", overflow="fold")
    for row in cells:
        table.add_row(*row)
    console.print(table)


def write_json(path: Path, payload: Any) -> None:
    path = Path(path)
    # Atomic and never through a link planted at the name: the rename replaces the link.
    write_bytes_atomic(path, (json.dumps(payload, indent=2, default=str) + "\n").encode("utf-8"))
