"""Shared pieces of the CLI: consoles, error handling, progress bars, tables, JSON."""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import math
import os
import re
import select
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
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

# Typer's help formatter is click's, vendored; help is written through a subclass of it.
from typer._click.exceptions import NoSuchOption, UsageError
from typer._click.formatting import HelpFormatter as ClickHelpFormatter

from reid.cli.defaults import check_given
from reid.errors import ConfigValueError, ReidError
from reid.evaluation.names import RANKING_METRICS
from reid.evaluation.names import percent as percent  # re-exported: the commands import it from here too
from reid.paths import write_bytes_atomic
from reid.text import printable

# Markup is off: paths, identity labels and sources are printed as they are, never
# interpreted ("[/x]" in a file name is text); styled words are built as rich Text.
# Lines are never broken by the program (soft wrap): a terminal wraps them at its width, and a
# log or a pipe gets each message whole on one line.
console = Console(markup=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)
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
    The numbers given are checked first (:func:`reid.cli.defaults.check_given`)."""
    flags = option_flags(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # Commands name every file they skip: OpenCV's own warnings are silenced as one starts
        # (here, not at the program's start); a group's callback that passes on to a
        # sub-command leaves that to it.
        context = next((a for a in [*args, *kwargs.values()] if isinstance(a, typer.Context)), None)
        if context is None or context.invoked_subcommand is None:
            quiet_opencv()
        try:
            # Every number given is checked against its range before anything is read or written.
            check_given(func, kwargs)
            return func(*args, **kwargs)
        except ReidError as exc:
            # A key is named by its option only when the option was given: a wrong value from
            # a recipe file or a default is the library's key, not something the user typed.
            print_error(error_line(exc, {k: f for k, f in flags.items() if kwargs.get(k) is not None}))
            raise typer.Exit(1) from None
        except BrokenPipeError as exc:
            # The reader went away (``| head``): not an error of the command (quiet_exit).
            # Another pipe the command writes to (a subprocess, a socket) is an error.
            if reader_gone():
                raise
            print_error(os_error_line(exc))
            raise typer.Exit(1) from None
        except OSError as exc:
            print_error(os_error_line(exc))
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


# A suggestion for an unknown option is given only when it is this close to what was typed
# (difflib's ratio): ``--epoch`` -> ``--epochs``, never ``--arch``.
CLOSE_MATCH = 0.7
# Every command answers ``-h`` as ``--help``.
HELP_OPTIONS = ["-h", "--help"]


def quiet_opencv() -> None:
    """Silence OpenCV's own warnings without loading it: OpenCV reads ``OPENCV_LOG_LEVEL``
    as it loads, so a command that never needs it (help, ``reid models list``, scoring a
    MOT file) does not load it for this; one loaded already is told directly."""
    os.environ["OPENCV_LOG_LEVEL"] = "SILENT"
    if "cv2" in sys.modules:
        from reid.data.io import quiet_opencv as quiet_loaded

        quiet_loaded()


def usage_error_line(exc: typer.TyperException) -> str:
    """A usage error (a bad option value, a missing argument, an unknown command) as one
    lowercase line: click's message (an unknown option with the one nearest option, if any
    is close), then where the options are listed."""
    if isinstance(exc, NoSuchOption):
        close = difflib.get_close_matches(exc.option_name, exc.possibilities or [], n=1, cutoff=CLOSE_MATCH)
        message = f"no such option: {printable(exc.option_name)}" + (f"; did you mean {close[0]}?" if close else "")
    else:
        message = " ".join(str(getattr(exc, "format_message", exc.__str__)()).split())
        # "Invalid value ..." -> "invalid value ...", the style of every other error; a word
        # in capitals ("ONNX ...") stays as it is.
        if message[:1].isupper() and message[1:2].islower():
            message = message[0].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    return f"{message} (see '{ctx.command_path} --help')" if ctx is not None else message


def reader_gone() -> bool:
    """True when standard output or error is a pipe whose reader closed it (``| head``): a
    poll of its write end reports an error condition. A broken pipe elsewhere (a
    subprocess, a socket) is then told apart from the reader going away."""
    if not hasattr(select, "poll"):
        return True
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (OSError, ValueError, AttributeError):
            continue
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if any(events & select.POLLERR for _, events in poller.poll(0)):
            return True
    return False


def quiet_exit() -> None:
    """End a command whose reader went away (``reid ... | head``) silently, as pip and git
    do: what is left of its output goes to the null device (Python's advice on SIGPIPE), so
    neither an ``error:`` line nor a traceback at the interpreter's exit is printed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        except (OSError, ValueError, AttributeError):
            # A stream with no descriptor (a test's capture) has nothing left to flush.
            continue
    sys.exit(1)


class _OneLineUsageErrors:
    """Runs the command as click does, but a usage error is one line on stderr (not a usage
    box of several lines) and exit code 2; no arguments still prints the help; a reader that
    went away ends the command silently (:func:`quiet_exit`); ``-h`` is ``--help``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.context_settings.setdefault("help_option_names", HELP_OPTIONS)  # type: ignore[attr-defined]

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
            # Output still buffered meets a closed pipe here, not at the interpreter's exit.
            sys.stdout.flush()
        except BrokenPipeError as exc:
            if reader_gone():
                quiet_exit()
            print_error(os_error_line(exc))
            sys.exit(1)
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


def wrap_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between words only: a long
    name (``mobilenet_v3_small``, ``person-detection-retail-0013``) stays whole."""
    wrapper = textwrap.TextWrapper(width=max(width, 10), break_long_words=False, break_on_hyphens=False)
    return [line for paragraph in text.split("\n\n") for line in [*wrapper.wrap(" ".join(paragraph.split())), ""]][:-1]


class WordFormatter(ClickHelpFormatter):
    """Click's help formatter, wrapping between words only (:func:`wrap_words`): click's own
    breaks long words and breaks at hyphens, cutting detector and model names in two."""

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        for line in wrap_words(text, self.width - self.current_indent):
            self.write(f"{indent}{line}\n" if line else "\n")

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        first_col = min(max((len(first) for first, _ in rows), default=0), col_max) + col_spacing
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + " " * (first_col + self.current_indent))
            lines = wrap_words(second, self.width - first_col - self.current_indent) or [""]
            self.write(f"{lines[0]}\n")
            for line in lines[1:]:
                self.write(f"{'':>{first_col + self.current_indent}}{line}\n")


class WordContext(typer.Context):
    formatter_class = WordFormatter


class _PlainHelp:
    """Help as plain text, as git's and pip's: paragraphs wrapped to the terminal's width,
    each option's help wrapped beside or under it (never cut short), a flag bare (``--quiet``,
    no metavar), and options in sections by their panel (``typer.Option(rich_help_panel=)``)
    in the order they are declared; those of no panel (``--help`` among them) last, under
    "Options"."""

    context_class = WordContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Without a markup mode typer leaves help to click's plain formatter.
        self.rich_markup_mode = None

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments: list[tuple[str, str]] = []
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):  # type: ignore[attr-defined]
            record = param.get_help_record(ctx)
            if record is None:
                continue
            record = help_record(*record)
            if param.param_type_name == "argument":
                arguments.append(record)
            else:
                sections.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        general = sections.pop("Options", [])
        for title, rows in [("Arguments", arguments), *sections.items(), ("Options", general)]:
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        if isinstance(self, typer.core.TyperGroup):
            self.format_commands(ctx, formatter)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each sub-command with its summary whole (:func:`summary`), wrapped between words
        beside its name; click's own cuts it to one line with ``...``."""
        rows = []
        for name in self.list_commands(ctx):  # type: ignore[attr-defined]
            command = self.get_command(ctx, name)  # type: ignore[attr-defined]
            if command is not None and not command.hidden:
                rows.append((name, summary(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


# typer's notes after an option's help (``[default: avi]``, ``[required]``, ``[default: 60;
# required]``), and its metavar of a repeatable option, a Python type (``<list[str]>``).
_TYPER_NOTES = re.compile(r"\s*\[((?:default: [^\[\]]*?|required)(?:; (?:default: [^\[\]]*?|required))*)\]$")
_LIST_METAVAR = re.compile(r"<list\[(\w+)\]>")


def help_record(names: str, text: str) -> tuple[str, str]:
    """An option's line of help in the one style of every command: defaults and requirement
    in parentheses at the end (``(default: avi)``, ``(required)``), as the help texts write
    them, and a repeatable option's metavar its element's followed by ``...`` (``<str>...``),
    never a Python type."""
    names = _LIST_METAVAR.sub(r"<\1>...", names)
    notes = _TYPER_NOTES.search(text)
    if notes is not None:
        text = f"{text[: notes.start()]} ({notes.group(1)})".strip()
    return names, text


def summary(command: Any) -> str:
    """A command's line in its group's help: its ``short_help``, else the first sentence of
    its help (the whole first paragraph when it has no full stop), never cut short."""
    if command.short_help:
        return " ".join(command.short_help.split())
    paragraph = " ".join((command.help or "").split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph[: end + 1] if end != -1 else paragraph


class OneLineGroup(_OneLineUsageErrors, _PlainHelp, typer.core.TyperGroup):
    """``typer.Typer(cls=OneLineGroup)``: a command group whose usage errors are one line and
    whose help is plain text."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """As click's, but an unknown command is answered in the style of every error, with
        the one nearest command when one is close (:data:`CLOSE_MATCH`); typer's lists
        every faint match."""
        try:
            return self._click_resolve_command(ctx, args)
        except UsageError as exc:
            if not args or not exc.message.startswith("No such command"):
                raise
            close = difflib.get_close_matches(args[0], list(self.commands), n=1, cutoff=CLOSE_MATCH)
            exc.message = f"no such command {printable(args[0])!r}" + (f"; did you mean {close[0]!r}?" if close else "")
            raise
            close = difflib.get_close_matches(args[0], list(self.commands), n=1, cutoff=CLOSE_MATCH)
            exc.message = f"no such command {printable(args[0])!r}" + (f"; did you mean {close[0]!r}?" if close else "")
            raise


class OneLineCommand(_OneLineUsageErrors, _PlainHelp, typer.core.TyperCommand):
    """``app.command(cls=OneLineCommand)``: a single command whose usage errors are one line
    and whose help is plain text."""


class CommandTyper(typer.Typer):
    """A typer application whose groups and commands are :class:`OneLineGroup` and
    :class:`OneLineCommand`: the one kind of help and of usage error for every command."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", OneLineGroup)
        super().__init__(**kwargs)

    def command(self, name: str | None = None, *, cls: type | None = None, **kwargs: Any) -> Any:
        return super().command(name, cls=cls or OneLineCommand, **kwargs)


def os_error_line(exc: OSError) -> str:
    """One line for an operating-system error: the file, then what went wrong."""
    where = exc.filename if exc.filename is not None else "file system"
    what = exc.strerror or type(exc).__name__
    return f"{where}: {what}"


def print_error(message: str) -> None:
    err_console.print(Text.assemble(("error:", "bold red"), " ", printable(message)), soft_wrap=True)


def skip_reason(path: object, reason: str) -> str:
    """The reason a file was skipped without the file's name: a library error names its file
    first (``bad/empty.jpg: empty file``), and a skip line names it once."""
    return reason.removeprefix(f"{path}: ")


def print_skipped(skipped: Iterable[tuple[object, str]], what: str = "skipped") -> None:
    """Name the first skipped inputs with their reasons, then how many more there were."""
    items = list(skipped)
    for path, reason in items[:SHOWN_SKIPS]:
        err_console.print(f"{what} {printable(path)}: {printable(skip_reason(path, reason))}", soft_wrap=True)
    if len(items) > SHOWN_SKIPS:
        err_console.print(f"... and {len(items) - SHOWN_SKIPS} more {what}; --json lists every one", soft_wrap=True)


@contextmanager
def live_display(renderable: Any, plain: Callable[[], str] | None = None) -> Iterator[Any]:
    """A rich Live view on stderr when it is a terminal.  Otherwise (a pipe, a file, CI) a
    view redrawn in place would reach the log only as its last state: ``plain()``, one line,
    is printed every :data:`PLAIN_SECONDS` and at the end instead (nothing without it)."""
    if not err_console.is_terminal:
        view = PlainLive(plain)
        try:
            yield view
        finally:
            view.close()
        return
    with Live(renderable, console=err_console, refresh_per_second=4) as live:
        yield live


# Without a terminal, progress is a line at most this often (and one when a task ends).
PLAIN_SECONDS = 10.0


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class PlainLive:
    """The stand-in of a Live view off a terminal: ``update`` prints ``plain()`` at most every
    :data:`PLAIN_SECONDS`; ``close`` prints it once more, the final state."""

    def __init__(self, plain: Callable[[], str] | None) -> None:
        self._plain, self._printed = plain, time.monotonic()

    def update(self, renderable: Any = None) -> None:
        if self._plain is not None and time.monotonic() - self._printed >= PLAIN_SECONDS:
            self._printed = time.monotonic()
            err_console.print(self._plain(), soft_wrap=True)

    def close(self) -> None:
        if self._plain is not None:
            err_console.print(self._plain(), soft_wrap=True)


@dataclass
class PlainTask:
    """One task of :class:`PlainProgress`, with the attributes of rich's that commands read."""

    description: str
    total: float | None
    completed: float = 0.0
    started: float = field(default_factory=time.monotonic)
    printed: float = field(default_factory=time.monotonic)
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.total is not None and self.completed >= self.total

    def line(self) -> str:
        """``embedding 120/500 (24%), 12 s, ETA 38 s``."""
        elapsed = time.monotonic() - self.started
        if not self.total:
            return f"{self.description} {self.completed:.0f}, {duration(elapsed)}"
        done = self.completed / self.total
        left = f", ETA {duration(elapsed * (1 - done) / done)}" if 0 < done < 1 else ""
        return f"{self.description} {self.completed:.0f}/{self.total:.0f} ({done:.0%}), {duration(elapsed)}{left}"


class PlainProgress:
    """Progress as plain lines on stderr, for a pipe, a file or CI (``| tee``, nohup): a
    task's line at most every :data:`PLAIN_SECONDS` and once when it ends; the subset of
    rich's Progress the commands use (``add_task``, ``update``, ``advance``, ``tasks``)."""

    def __init__(self) -> None:
        self.tasks: list[PlainTask] = []

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        # A task that did not reach its total (a stop, an error) says where it was, once.
        for task in self.tasks:
            if exc[0] is None and not task.finished and task.completed:
                err_console.print(task.line(), soft_wrap=True)

    def add_task(self, description: str, total: float | None = None, **fields: Any) -> int:
        self.tasks.append(PlainTask(description, total, fields=fields))
        return len(self.tasks) - 1

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def update(
        self,
        task_id: int,
        *,
        total: float | None = None,
        completed: float | None = None,
        advance: float | None = None,
        description: str | None = None,
        **fields: Any,
    ) -> None:
        task = self.tasks[task_id]
        was_finished = task.finished
        if total is not None:
            task.total = total
        if completed is not None:
            task.completed = completed
        if advance is not None:
            task.completed += advance
        if description is not None:
            task.description = description
        task.fields.update(fields)
        now = time.monotonic()
        if (task.finished and not was_finished) or now - task.printed >= PLAIN_SECONDS:
            task.printed = now
            err_console.print(task.line(), soft_wrap=True)


def make_progress(*extra: Any) -> Progress | PlainProgress:
    """A rich progress bar on a terminal, with count, the ``extra`` columns, elapsed time and
    ETA; elsewhere (a pipe, a file, CI) the same tasks as plain lines (:class:`PlainProgress`)."""
    if not err_console.is_terminal:
        return PlainProgress()
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


# The ranking figures: each result key with the name the field uses (reid.evaluation.names), in
# every table and summary line the command line prints, each as a percent (:func:`reid.evaluation.names.percent`).
RANKING = tuple(RANKING_METRICS.items())


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return printable(value)


def print_table(title: str, columns: list[str], rows: Iterable[Iterable[Any]]) -> None:
    """A table on stdout, one line per row where the width allows, its cells never cut
    short and no word broken inside.

    On a terminal, a rich table where it fits; on one too narrow for it, plain columns
    (:func:`plain_table`) where they fit, else each row as its first cell with the others
    named beneath it, wrapped between words (:func:`stacked_table`).  Off a terminal
    (``| grep``, ``> file``, CI), plain columns as ``pip list`` prints them: no box drawing."""
    cells = [[fmt(v) for v in row] for row in rows]
    if not console.is_terminal:
        typer.echo("\n".join(plain_table(printable(title), columns, cells)))
        return
    widest = [max([len(column), *(len(row[i]) for row in cells if i < len(row))]) for i, column in enumerate(columns)]
    # A rich table draws a rule and a space either side of every cell.
    if sum(widest) + 3 * len(columns) + 1 > console.width:
        lines = plain_table("", columns, cells)
        if max(len(line) for line in lines) > console.width:
            lines = stacked_table(columns, cells, console.width)
        console.print("\n".join([*wrap_words(printable(title), console.width), *lines]), soft_wrap=True)
        return
    table = Table(title=printable(title))
    for index, column in enumerate(columns):
        table.add_column(column, justify="right" if _figures(cells, index) else "left", min_width=widest[index])
    for row in cells:
        table.add_row(*row)
    console.print(table)


def stacked_table(columns: list[str], cells: list[list[str]], width: int) -> list[str]:
    """The lines of a table's rows for a terminal too narrow for its columns: each row's
    first cell on a line, then its other cells as ``column value``, ``; `` between them,
    wrapped between words and indented under it."""
    lines: list[str] = []
    for row in cells:
        lines.append(row[0] if row else "")
        named = "; ".join(f"{column} {value}" for column, value in zip(columns[1:], row[1:], strict=False))
        lines += [f"  {line}" for line in wrap_words(named, width - 2)]
    return lines


def plain_table(title: str, columns: list[str], cells: list[list[str]]) -> list[str]:
    """The lines of a table in plain text: the title, the header, dashes under it, one line
    per row; columns two spaces apart, figures right-aligned and words left-aligned."""
    width = [max([len(column), *(len(row[i]) for row in cells if i < len(row))]) for i, column in enumerate(columns)]
    numeric = [_figures(cells, i) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        padded = [
            value.rjust(width[i]) if numeric[i] else value.ljust(width[i]) for i, value in enumerate(values)
        ]
        return "  ".join(padded).rstrip()

    lines = [title] if title else []
    lines += [line(columns), line(["-" * w for w in width])]
    lines += [line([*row, *[""] * (len(columns) - len(row))]) for row in cells]
    return lines


def _figures(cells: list[list[str]], index: int) -> bool:
    """Whether column ``index`` (not the first, which names the rows) holds figures only:
    they are right-aligned, words left-aligned."""
    return index > 0 and all(_number_like(row[index]) for row in cells if index < len(row))


def _number_like(text: str) -> bool:
    """A cell that is a figure (``12``, ``0.25``, ``27.91%``, ``1,024``, ``-``, empty)."""
    return text.replace(",", "").replace(".", "").replace("%", "").replace("-", "").replace("+", "").isdigit() or text in ("", "-", "nan")


def write_json(path: Path, payload: Any) -> None:
    path = Path(path)
    # Atomic and never through a link planted at the name: the rename replaces the link.
    write_bytes_atomic(path, (json.dumps(payload, indent=2, default=str) + "\n").encode("utf-8"))


def detector_help() -> str:
    """The help of ``--detector``: the names it takes, and what runs when it is not given."""
    from reid.detect.names import DETECTOR_DEFAULT_TEXT, DETECTOR_NAMES_HELP

    return f"{DETECTOR_NAMES_HELP[:-1]}; default {DETECTOR_DEFAULT_TEXT}."


def detector_option(help_text: str | None = None, panel: str | None = None) -> str | None:
    """A ``--detector NAME`` option (default: the detector kind's), for the commands whose
    detector is not a config field (``reid eval``, ``reid verify``, ``reid calibrate``,
    ``reid gallery calibrate``); ``panel``: its section of help."""
    return typer.Option(None, "--detector", help=help_text or detector_help(), rich_help_panel=panel)
