"""The typer application: the table of commands, each imported from its module only when it
runs or its own help is asked for.

``reid --help`` and ``reid --version`` import no command module, so neither loads PyTorch,
OpenCV or FAISS; ``reid CMD`` imports the module of CMD, whose ``register`` adds its commands.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import typer
import typer.core
import typer.main

from reid.cli.common import CommandTyper, OneLineGroup, console

# The distribution whose metadata holds the version --version prints.
DISTRIBUTION = "reid-toolkit"


@dataclass(frozen=True)
class Entry:
    """A command of ``reid``: the module whose ``register(app)`` adds it, and the line that
    describes it in ``reid --help`` (its own help is the command's docstring)."""

    module: str
    summary: str


COMMANDS: dict[str, Entry] = {
    "train": Entry("reid.cli.train", "Train an encoder with cross-entropy + a metric loss on P x K batches."),
    "demo": Entry("reid.cli.demo", "The main job on built-in data: generate, evaluate untrained, train, evaluate trained."),
    "eval": Entry("reid.cli.evaluate", "Rank-1/5/10, mAP and mINP of a model under the Market-1501 protocol."),
    "verify": Entry("reid.cli.verify", "Are two images the same identity? Or, with --pairs, LFW-style verification figures."),
    "calibrate": Entry("reid.cli.verify", "Choose a model's verification threshold on labelled pairs; write it into its card."),
    "enroll": Entry("reid.cli.gallery", "Enrol images of known people into a gallery (created when new)."),
    "query": Entry("reid.cli.gallery", "Find enrolled people in images, a video, a camera or a stream."),
    "export": Entry("reid.cli.export", "Export a model's embedding to ONNX or TorchScript, checked against PyTorch."),
    "report": Entry("reid.cli.report", "A model's card, training recipe and last figures; curves.png if missing."),
    "import": Entry("reid.cli.models", "Write a model folder from a checkpoint made elsewhere (torchreid, fast-reid)."),
    "track": Entry("reid.cli.track", "Track the people of a detection file (MOTChallenge format)."),
    "gallery": Entry("reid.cli.gallery", "Inspect and maintain galleries."),
    "models": Entry("reid.cli.models", "Pretrained models: list, show, fetch, add your own files, where they are."),
    "serve": Entry("reid.cli.serve", "Serve galleries over HTTP (FastAPI + uvicorn); see docs/serve.md."),
}

# Set in a context's meta while its group prints its own help: the listing needs each
# command's summary line, not its module.
_LISTING = "reid.listing"


class CommandTable(MutableMapping[str, Any]):
    """The commands of a group by name, in the order of :data:`COMMANDS`: a command's module
    is imported, and its commands built, the first time one of them is looked up."""

    def __init__(self, table: dict[str, Entry], built: MutableMapping[str, Any]) -> None:
        self._table = table
        self._built = dict(built)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built and name in self._table:
            self._build(self._table[name].module)
        return self._built[name]

    def _build(self, module: str) -> None:
        registry = CommandTyper()
        importlib.import_module(module).register(registry)
        self._built.update(typer.main.get_group(registry).commands)

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._table
        yield from (name for name in self._built if name not in self._table)

    def __len__(self) -> int:
        return len(set(self._table) | set(self._built))

    def built(self, name: str) -> bool:
        return name in self._built


class ReidGroup(OneLineGroup):
    """The ``reid`` group: its commands come from :data:`COMMANDS` (:class:`CommandTable`);
    its help lists their summaries without importing them."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = CommandTable(COMMANDS, self.commands)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        ctx.meta[_LISTING] = True
        try:
            super().format_help(ctx, formatter)
        finally:
            ctx.meta[_LISTING] = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        table = self.commands
        if ctx.meta.get(_LISTING) and isinstance(table, CommandTable) and cmd_name in COMMANDS and not table.built(cmd_name):
            return typer.core.TyperCommand(cmd_name, short_help=COMMANDS[cmd_name].summary)
        return super().get_command(ctx, cmd_name)


def version_text() -> str:
    """``reid X.Y.Z``: the version of the installed distribution (the package's own where it
    runs from a source tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"reid {version(DISTRIBUTION)}"
    except PackageNotFoundError:
        from reid import __version__

        return f"reid {__version__}"


def _print_version(value: bool) -> None:
    if value:
        console.print(version_text(), highlight=False)
        raise typer.Exit()


app = typer.Typer(
    name="reid",
    help="Person re-identification and face verification: train, evaluate, enrol, query, verify, export, report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=ReidGroup,
)


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", "-V", is_eager=True, callback=_print_version, help="Print the version and exit."
    ),
) -> None:
    """Person re-identification and face verification: train, evaluate, enrol, query, verify, export."""
