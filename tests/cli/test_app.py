"""The ``reid`` group: its help and version import no engine (PyTorch, torchvision, OpenCV,
FAISS), its commands resolve from their modules when used."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reid.cli import app
from reid.cli.app import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "torchvision", "cv2", "faiss", "onnxruntime", "openvino", "reid.engine.trainer", "reid.gallery.store")


def loaded_after(code: str) -> list[str]:
    """The modules of :data:`HEAVY` in sys.modules once ``code`` has run in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_command_line_loads_no_engine() -> None:
    assert loaded_after("import reid.cli") == []


def command_paths() -> list[list[str]]:
    """Every command and sub-command of reid, as its words (``["gallery", "info"]``)."""
    import typer.main

    paths: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        paths.append(path)
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


def help_args() -> list[object]:
    """``--help`` and ``--version``, and every command's and sub-command's ``--help``."""
    args: list[object] = [["--help"], ["--version"]]
    for path in command_paths()[1:]:
        args.append(pytest.param([*path, "--help"], id=" ".join(["reid", *path, "--help"])))
    return args


@pytest.mark.parametrize("args", help_args())
def test_help_and_version_load_no_engine(args: list[str]) -> None:
    code = (
        "import contextlib, io\nfrom reid.cli import app\n"
        f"with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    app({args!r}, prog_name='reid')"
    )
    assert loaded_after(code) == []


def test_version_is_the_distributions() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"reid \d+\.\d+\.\d+\S*\n", result.output), result.output


def test_help_lists_every_command_with_its_summary() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name, entry in COMMANDS.items():
        assert re.search(rf"\b{name}\s+{re.escape(entry.summary[:30])}", result.output), name


def test_every_listed_command_is_registered_by_its_module() -> None:
    import typer.main

    group = typer.main.get_command(app)
    for name in COMMANDS:
        assert group.commands[name].name == name  # type: ignore[attr-defined]


def test_a_command_resolves_on_use_and_a_typo_is_answered_with_the_nearest() -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["gallery", "info", "--help"]).exit_code == 0
    result = runner.invoke(app, ["verfy"])
    assert result.exit_code == 2 and "'verify'" in result.output, result.output


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(["reid", *p]))
def test_every_help_reads_whole_at_80_columns(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "…" not in result.output and "<bool>" not in result.output
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert not any(c in result.output for c in "│╭╰"), "help is plain text"


def test_train_help_lists_its_options_in_sections_and_every_choice_whole() -> None:
    result = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    sections = [line.rstrip(":") for line in result.output.splitlines() if re.fullmatch(r"[A-Z][a-z]+:", line)]
    assert sections == ["Recipe", "Data", "Network", "Optimisation", "Output", "Machine", "Options"]
    for choice in ("mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_lite0", "centroid_triplet"):
        assert re.search(rf"\b{choice}\b", result.output), choice
    assert re.search(r"^  --quiet +No progress bar\.$", result.output, re.M)


@pytest.mark.parametrize(
    "args",
    [
        ["verify"],
        ["verify", "a.jpg", "b.jpg", "-m", "m", "--bogus"],
        ["eval", "-m", "/nonexistent/m", "-d", "synthetic"],
        ["report", "/nonexistent/m"],
        ["train", "--epochs", "0"],
        ["train", "--data", "market1501:/nonexistent/x", "--pretrained", "none"],
        ["gallery", "info", "/nonexistent/g"],
        ["gallery", "nosuch"],
        ["models", "show", "nope"],
        ["track", "-d", "/nonexistent/det.txt", "-o", "/nonexistent/out.txt"],
        ["query", "x.jpg", "-m", "m", "-g", "g", "--top-k", "0"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_every_error_is_one_line(args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "reid", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert done.returncode in (1, 2), done
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1 and done.stderr.startswith("error: "), done.stderr


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(["reid", *p]))
def test_every_command_answers_dash_h_as_its_help(path: list[str]) -> None:
    runner = CliRunner()
    short = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "80"}, terminal_width=80)
    assert short.exit_code == 0, short.output
    assert short.output == runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80).output
    assert "-h, --help" in short.output


def test_dash_v_is_the_version() -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["-V"]).output == runner.invoke(app, ["--version"]).output


@pytest.mark.parametrize("path", [["gallery"], ["models"]], ids=" ".join)
def test_group_help_gives_every_summary_whole(path: list[str]) -> None:
    import typer.main

    from reid.cli.common import summary

    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    commands = result.output.split("Commands:")[1]
    assert "..." not in commands and "…" not in commands, commands
    group = typer.main.get_command(app)
    for word in path:
        group = group.commands[word]  # type: ignore[attr-defined]
    listing = " ".join(commands.split())
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        assert f"{name} {summary(command)}" in listing, name


@pytest.mark.parametrize(
    "args, line",
    [
        (["train", "--epoch", "3"], "error: no such option: --epoch; did you mean --epochs? (see 'reid train --help')"),
        (["train", "--zzzz", "3"], "error: no such option: --zzzz (see 'reid train --help')"),
        (["verfy"], "error: no such command 'verfy'; did you mean 'verify'? (see 'reid --help')"),
        (["gallery", "zzzz"], "error: no such command 'zzzz' (see 'reid gallery --help')"),
        (["query", "x.jpg"], "error: missing option '--gallery' / '-g'. (see 'reid query --help')"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else "",
)
def test_a_usage_error_is_one_lowercase_line_suggesting_only_a_close_match(args: list[str], line: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.output.splitlines() == [line]


@pytest.mark.parametrize("args", [["models", "list"], ["--help"], ["--version"], ["gallery", "--help"]], ids=" ".join)
def test_a_reader_that_went_away_ends_the_command_silently(args: list[str]) -> None:
    # The pipe's only reader is closed before the command writes: every write meets EPIPE.
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "reid", *args], stdout=write_end, stderr=subprocess.PIPE, text=True, env=env, timeout=300
        )
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == 1, done.stderr


def light_run(args: list[str]) -> str:
    """Run ``reid ARGS`` in a fresh interpreter; what it printed, once :func:`loaded_after`
    found none of :data:`HEAVY` loaded by it."""
    code = (
        "import contextlib, io, json\nfrom reid.cli import app\nout = io.StringIO()\n"
        f"with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        f"    app({args!r}, prog_name='reid')\nprint(json.dumps(out.getvalue()))"
    )
    probe = f"{code}\nimport sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120, check=True)
    printed, loaded = done.stdout.strip().splitlines()[-2:]
    assert json.loads(loaded) == [], (args, loaded)
    return json.loads(printed)


@pytest.mark.parametrize(
    "args",
    [["models", "list"], ["models", "show", "resnet50.imagenet"], ["models", "show", "osnet_x1_0.market1501"],
     ["models", "path", "resnet50.imagenet"], ["models", "path", "sface_2021dec.int8bq"]],
    ids=" ".join,
)
def test_listing_and_locating_models_loads_no_engine(args: list[str]) -> None:
    assert light_run(args).strip()


def test_scoring_a_mot_file_loads_no_engine(tmp_path: Path) -> None:
    pytest.importorskip("motmetrics")
    truth = tmp_path / "gt.txt"
    truth.write_text("1,1,10,20,30,60,1,1,1\n2,1,12,20,30,60,1,1,1\n")
    printed = light_run(["track", "--mot", str(truth), "--gt", str(truth)])
    assert re.search(r"MOTA\s+100\.00%", printed), printed
