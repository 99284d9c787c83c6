"""Shared pieces of the CLI: consoles, error handling, progress bars, tables, JSON."""

from __future__ import annotations

import functools
import inspect
import json
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import typer
import typer.core
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

from reid.cli.defaults import given
from reid.errors import ConfigValueError, ReidError
from reid.paths import write_bytes_atomic
from reid.text import printable

# Markup is off: paths, identity labels and sources are printed as they are, never
# interpreted ("[/x]" in a file name is text); styled words are built as rich Text.
console = Console(markup=False, highlight=False)
err_console = Console(stderr=True, markup=False, highlight=False)
SHOWN_SKIPS = 20

F = TypeVar("F", bound=Callable[..., Any])


def option_flags(func: Callable[..., Any]) -> dict[str, str]:
    """The option each parameter of a typer command is typed as: its first ``--long``
    spelling (``{"high_score": "--track-high-score"}``); an option declared without one is
    typer's ``--high-score``."""
    flags = {}
    for name, parameter in inspect.signature(func).parameters.items():
        info = parameter.default
        if isinstance(info, typer.models.OptionInfo):
            spelled = [d for d in (info.param_decls or ()) if d.startswith("--")]
            flags[name] = spelled[0].split("/")[0] if spelled else "--" + name.replace("_", "-")
    return flags


def error_line(exc: ReidError, flags: dict[str, str]) -> str:
    """The one line of a library error; a wrong value of a key that is also an option of the
    command is named by its option (``--lr: must be positive``), the one mapping from keys
    to options."""
    if isinstance(exc, ConfigValueError) and exc.key in flags:
        return exc.named(flags[exc.key])
    return str(exc)


def handle_errors(func: F) -> F:
    """Turn a ReidError, or an operating-system error (a full disk, a read-only or
    unreadable file), into one line on stderr naming the file (a key of a config by the
    option that sets it, :func:`error_line`), and exit code 1; Ctrl-C into exit 130.
    The numbers given are checked first (:func:`reid.cli.defaults.given`)."""
    flags = option_flags(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            # Every number given is checked against its range before anything is read or written.
            given(**kwargs)
            return func(*args, **kwargs)
        except ReidError as exc:
            # A key is named by its option only when the option was given: a wrong value from
            # a recipe file or a default is the library's key, not something the user typed.
            print_error(error_line(exc, {k: f for k, f in flags.items() if kwargs.get(k) is not None}))
            raise typer.Exit(1) from None
        except OSError as exc:
            print_error(os_error_line(exc))
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def usage_error_line(exc: typer.TyperException) -> str:
    """A usage error (a bad option value, a missing argument, an unknown command) as one
    line: click's message, then where the options are listed."""
    message = " ".join(str(getattr(exc, "format_message", exc.__str__)()).split())
    ctx = getattr(exc, "ctx", None)
    return f"{message} (see '{ctx.command_path} --help')" if ctx is not None else message


class _OneLineUsageErrors:
    """Runs the command as click does, but a usage error is one line on stderr (not a usage
    box of several lines) and exit code 2; no arguments still prints the help."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        run = super().main  # type: ignore[misc]
        if not standalone_mode:
            return run(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = run(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:
            code = getattr(exc, "exit_code", 2)
            if type(exc).__name__ == "NoArgsIsHelpError":
                exc.show()  # type: ignore[attr-defined]
            else:
                print_error(usage_error_line(exc))
            sys.exit(code)
        except typer.Abort:
            err_console.print("aborted")
            sys.exit(1)
        # Not standalone, click returns an exit code for an early exit (--help) and the
        # command's own value otherwise; commands return None.
        sys.exit(code if isinstance(code, int) else 0)


class OneLineGroup(_OneLineUsageErrors, typer.core.TyperGroup):
    """``typer.Typer(cls=OneLineGroup)``: a command group whose usage errors are one line."""


class OneLineCommand(_OneLineUsageErrors, typer.core.TyperCommand):
    """``app.command(cls=OneLineCommand)``: a single command whose usage errors are one line."""


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


def detector_help() -> str:
    """The help of ``--detector``: the names it takes, and what runs when it is not given."""
    from reid.pipeline.subject import DETECTOR_DEFAULT_TEXT, DETECTOR_NAMES_HELP

    return f"{DETECTOR_NAMES_HELP[:-1]}; default {DETECTOR_DEFAULT_TEXT}."


def detector_option(help_text: str | None = None) -> str | None:
    """A ``--detector NAME`` option (default: the detector kind's), for the commands whose
    detector is not a config field (``reid eval``, ``reid verify``, ``reid calibrate``,
    ``reid gallery calibrate``)."""
    return typer.Option(None, "--detector", help=help_text or detector_help())
