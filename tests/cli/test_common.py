from __future__ import annotations

import json
import os
from pathlib import Path

from reid.cli.common import write_json


def test_json_output_is_not_written_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    for name in ("out.json", "deeper/report.json"):
        target = tmp_path / name
        target.parent.mkdir(exist_ok=True)
        target.symlink_to(victim)
        write_json(target, {"rank1": 0.5})
        assert not target.is_symlink() and json.loads(target.read_text()) == {"rank1": 0.5}
    assert victim.read_text() == "keep"
    # A leftover or a link at the hidden temporary's name is not followed either.
    target = tmp_path / "again.json"
    (tmp_path / f".again.json.tmp-{os.getpid()}").symlink_to(victim)
    write_json(target, [1, 2])
    assert victim.read_text() == "keep" and json.loads(target.read_text()) == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.json", "deeper", "out.json", "victim.txt"]


def test_a_library_error_naming_a_key_is_printed_with_the_option_that_sets_it() -> None:
    import typer

    from reid.cli.common import error_line, option_flags
    from reid.errors import ConfigError, ConfigValueError
    from reid.pipeline import QueryConfig
    from reid.track import TrackerConfig

    def command(
        high_score: float | None = typer.Option(None, "--track-high-score"),
        min_height: int | None = typer.Option(None, help="no spelling given"),
        detect: str = typer.Option("auto", "--detect/--no-detect"),
    ) -> None:
        """A command whose options set config keys."""

    flags = option_flags(command)
    assert flags == {"high_score": "--track-high-score", "min_height": "--min-height", "detect": "--detect"}
    for make, line in (
        (lambda: TrackerConfig(high_score=float("nan")), "--track-high-score: input should be a finite number (got nan)"),
        (lambda: QueryConfig(detector="hog", min_height=60), "--min-height works with the ssdlite detector, not hog"),
    ):
        try:
            make()
        except ConfigValueError as exc:
            assert error_line(exc, flags) == line
            assert error_line(exc, {}) == str(exc) and str(exc).startswith(exc.key)
        else:
            raise AssertionError("no error")
    # An error that names no single key is printed as it is.
    assert error_line(ConfigError("give --threshold or --far, not both"), flags) == "give --threshold or --far, not both"


def test_a_key_is_named_by_its_option_only_when_the_option_was_given(tmp_path: Path) -> None:
    """A recipe's wrong device is the recipe's key, never an option the user did not type."""
    from typer.testing import CliRunner

    from reid.cli import app

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("device: tpu\n")
    runner = CliRunner()
    given = runner.invoke(app, ["train", "--device", "tpu", "--print-config"])
    assert given.exit_code == 1 and given.output.strip() == "error: --device 'tpu': not a device (cpu, cuda, cuda:1 ...)"
    from_file = runner.invoke(app, ["train", "--config", str(recipe), "--print-config"])
    assert from_file.exit_code == 1
    assert from_file.output.strip() == f"error: {recipe}: device: 'tpu': not a device (cpu, cuda, cuda:1 ...)"


def test_handle_errors_names_an_option_only_when_it_was_given() -> None:
    import typer
    from typer.testing import CliRunner

    from reid.cli.common import handle_errors
    from reid.errors import ConfigValueError

    cli = typer.Typer()

    @cli.command()
    @handle_errors
    def run(device: str | None = typer.Option(None, "--device")) -> None:
        raise ConfigValueError("device", f"{device or 'cuda:7'}: this machine has no such device", sep=" ")

    runner = CliRunner()
    assert runner.invoke(cli, ["--device", "cuda:9"]).output.strip() == "error: --device cuda:9: this machine has no such device"
    # The default came from the library, not from the user: it is named by its key.
    assert runner.invoke(cli, []).output.strip() == "error: device cuda:7: this machine has no such device"
