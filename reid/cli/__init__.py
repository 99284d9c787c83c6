"""The ``reid`` command line: a thin typer layer over the library.

Each command parses its options, calls one library function and prints the result.
Library errors (:class:`reid.errors.ReidError`) become a one-line message and exit code 1.
"""

from reid.cli.app import app

__all__ = ["app"]
