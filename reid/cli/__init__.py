"""The ``reid`` command line: a thin typer layer over the library.

Each command parses its options, calls one library function and prints the result.
Library errors (:class:`reid.errors.ReidError`) become a one-line message and exit code 1.
Importing it imports no command module (:mod:`reid.cli.app`): help answers at once.
"""

from typing import Any

from reid.cli.app import app
from reid.cli.common import (
    OneLineCommand, OneLineGroup, error_line, handle_errors, make_progress, option_flags, print_table, skip_reason,
)  # fmt: skip
from reid.cli.defaults import config_overrides, default_of, in_range, with_config_options
from reid.evaluation.names import count, distance, far_percent, percent

# What the apps share with the reid command: options built from config fields that carry
# them (reid.option; with_config_options, then config_overrides to build the configs), one
# way errors end a command (handle_errors: every number given checked against its one range
# first, one line naming the option), one-line usage errors, a default read from the
# library's signature, the one form of tables and progress (plain off a terminal), and the
# one written form of each kind of number (reid.evaluation.names).
__all__ = [
    "RANGES", "OneLineCommand", "OneLineGroup", "app", "config_overrides", "count", "default_of", "distance",
    "error_line", "far_percent", "handle_errors", "in_range", "make_progress", "option_flags", "percent",
    "print_table", "skip_reason", "with_config_options",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    # RANGES is built on first use (reid.cli.defaults.ranges): it reads the frame source's types.
    if name == "RANGES":
        from reid.cli.defaults import ranges

        return ranges()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
