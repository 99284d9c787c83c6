from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

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


def test_a_broken_pipe_other_than_the_readers_is_an_error_not_a_silent_exit() -> None:
    """A command whose own pipe breaks (a subprocess, a socket) while its reader is still
    there ends with the error line; only a reader gone (``| head``) ends silently."""
    import typer
    from typer.testing import CliRunner

    from reid.cli.common import handle_errors

    cli = typer.Typer()

    @cli.command()
    @handle_errors
    def run() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    result = CliRunner().invoke(cli, [])
    assert result.exit_code == 1
    assert "Broken pipe" in result.output and result.output.startswith("error: "), result.output


def _console(monkeypatch, name: str, terminal: bool, width: int = 80):
    """Swap the module's console ``name`` for one writing to a buffer, a terminal or not."""
    import io

    from rich.console import Console

    import reid.cli.common as common

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=terminal, width=width, markup=False, highlight=False, soft_wrap=True)
    monkeypatch.setattr(common, name, console)
    return buffer


def test_a_table_off_a_terminal_is_plain_columns_one_line_a_row(monkeypatch, capsys) -> None:
    from reid.cli.common import print_table

    _console(monkeypatch, "console", terminal=False)
    long_name = "osnet_ain_x1_0.msmt17-combined-all-the-cameras"
    print_table("models", ["name", "task", "size"], [[long_name, "person-reid", "8.7 MB"], ["r18", "imagenet-backbone", "-"]])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "models" and lines[1].split() == ["name", "task", "size"]
    assert set(lines[2].replace(" ", "")) == {"-"}
    assert lines[3].split() == [long_name, "person-reid", "8.7", "MB"] and lines[4].split() == ["r18", "imagenet-backbone", "-"]
    assert not any(c in "".join(lines) for c in "│┃━─…")


def test_a_table_on_a_narrow_terminal_breaks_no_word_inside(monkeypatch) -> None:
    from reid.cli.common import print_table

    buffer = _console(monkeypatch, "console", terminal=True, width=80)
    words = ["imagenet-backbone", "MIT-licence-of-torchvision", "person-reid-market1501"]
    print_table("t", ["name", "kind", "from", "licence", "cached", "size"], [["resnet50.imagenet", *words, "yes", "97.8 MB"]])
    shown = buffer.getvalue()
    for word in ["resnet50.imagenet", *words]:
        assert word in shown, (word, shown)


def test_figures_are_named_as_the_field_names_them_in_percent() -> None:
    from reid.cli.common import RANKING, percent

    assert [name for _, name in RANKING] == ["Rank-1", "Rank-5", "Rank-10", "mAP", "mINP"]
    assert percent(0.27912) == "27.91%" and percent(1) == "100.00%" and percent("n/a") == "n/a"


def test_plain_progress_prints_a_line_when_a_task_ends_and_at_most_every_interval(monkeypatch) -> None:
    import reid.cli.common as common

    buffer = _console(monkeypatch, "err_console", terminal=False)
    with common.make_progress() as progress:
        assert isinstance(progress, common.PlainProgress)
        task = progress.add_task("embedding", total=4)
        for _ in range(4):
            progress.advance(task)
    lines = buffer.getvalue().splitlines()
    # Four steps well within the interval: one line, at the end.
    assert len(lines) == 1 and lines[0].startswith("embedding 4/4 (100%)"), lines
    monkeypatch.setattr(common, "PLAIN_SECONDS", 0.0)
    with common.make_progress() as progress:
        task = progress.add_task("enrol", total=3)
        progress.update(task, completed=1)
    assert buffer.getvalue().splitlines()[1].startswith("enrol 1/3 (33%)")


def test_a_live_view_off_a_terminal_ends_with_its_plain_line(monkeypatch) -> None:
    import reid.cli.common as common

    buffer = _console(monkeypatch, "err_console", terminal=False)
    frames = iter(range(1, 100))
    with common.live_display("a table", plain=lambda: f"frames {next(frames)}") as live:
        live.update("another table")
    assert buffer.getvalue() == "frames 1\n"


def test_durations_read_as_people_write_them() -> None:
    from reid.cli.common import duration

    assert [duration(s) for s in (0.4, 42, 185, 7620)] == ["0 s", "42 s", "3 min 05 s", "2 h 07 min"]


@pytest.mark.parametrize("width", [40, 60, 80, 100])
def test_models_list_fits_the_terminal_one_line_a_model_when_wide_enough(monkeypatch, width: int) -> None:
    from reid.cli.models import list_command
    from reid.models.registry import ARTEFACTS

    buffer = _console(monkeypatch, "console", terminal=True, width=width)
    list_command.__wrapped__(json_file=None)  # type: ignore[attr-defined]
    lines = re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue()).splitlines()  # styles are not columns
    assert max(len(line) for line in lines) <= width, max(lines, key=len)
    longest_name = max(len(name) for name in ARTEFACTS)
    for name in ARTEFACTS:
        # Every name whole, at the start of its line or after a rule.
        assert any(line.lstrip("│ ").startswith(f"{name} ") or line == name for line in lines), name
    if width >= longest_name + len("  imagenet-backbone  123.4 MB  installed"):
        assert len(lines) < len(ARTEFACTS) + 8, "one line a model"
