"""The ``reid`` command line: a thin typer layer over the library.

Each command parses its options, calls one library function and prints the result.
Library errors (:class:`reid.errors.ReidError`) become a one-line message and exit code 1.
Importing it imports no command module (:mod:`reid.cli.app`): help answers at once.
"""

from typing import Any

from reid.cli.app import app
from reid.cli.common import OneLineCommand, OneLineGroup, error_line, make_progress, option_flags, print_table
from reid.cli.defaults import default_of, in_range

# What the apps share with the reid command: one-line usage errors, the one range of each
# numeric option, a default read from the library's signature, a config key named by the
# option that sets it, and the one form of tables and progress (plain off a terminal).
__all__ = [
    "RANGES", "OneLineCommand", "OneLineGroup", "app", "default_of", "error_line", "in_range", "make_progress",
    "option_flags", "print_table",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    # RANGES is built on first use (reid.cli.defaults.ranges): it reads the frame source's types.
    if name == "RANGES":
        from reid.cli.defaults import ranges

        return ranges()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
