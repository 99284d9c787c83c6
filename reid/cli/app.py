"""The typer application; each command module registers its commands here."""

from __future__ import annotations

import typer

from reid.cli.common import OneLineGroup
from reid.cli import evaluate, export, gallery, models, report, serve, track, train, verify
from reid.data import quiet_opencv

app = typer.Typer(
    name="reid",
    help="Person re-identification and face verification: train, evaluate, enrol, query, verify, export, report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineGroup,
)

for module in (train, evaluate, verify, gallery, export, report, models, track, serve):
    module.register(app)


@app.callback()
def main() -> None:
    """Person re-identification and face verification: train, evaluate, enrol, query, verify, export."""
    quiet_opencv()
