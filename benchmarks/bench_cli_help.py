"""How fast the command line answers: wall time and peak memory of ``reid --help``,
``reid verify --help``, ``reid --version`` and the help of each app's command
(``python -m apps.camera_search --help``, ``apps.face_checkin``, ``apps.face_checkin.calibrate``),
beside ``python -c pass`` (the interpreter alone) and ``python -c "import torch"`` (what help
cost while it imported the engine), in the same run.

Each command runs ``--repeat`` times in a fresh interpreter of this tree (output to
/dev/null, ``COLUMNS=80``); the figures are the medians of its wall time and of the peak
resident memory of the child process (``ru_maxrss`` from ``os.wait4``).  The aim for help
and ``--version``: at most 0.5 s and 150 MB.  ``--all`` adds the help of every command and
sub-command (``reid gallery info --help``).

Run: ``python benchmarks/bench_cli_help.py [--repeat 7] [--all]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AIM_SECONDS, AIM_MB = 0.5, 150.0
PEERS = {"python -c pass": ["-c", "pass"], 'python -c "import torch"': ["-c", "import torch"]}
MEASURED = {"reid --help": ["--help"], "reid verify --help": ["verify", "--help"], "reid --version": ["--version"]}
# The apps' commands, run from the repository root as their READMEs say.
APPS = ("apps.camera_search", "apps.face_checkin", "apps.face_checkin.calibrate")
# Every command and sub-command of reid, one a line as its words ("gallery info").
LISTING = """
import typer.main
from reid.cli import app

def walk(command, path):
    if path:
        print(" ".join(path))
    for name, sub in (getattr(command, "commands", None) or {}).items():
        walk(sub, [*path, name])

walk(typer.main.get_command(app), [])
"""


def run_once(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MB of ``python ARGS`` run once."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"python {' '.join(args)} failed: {child.stderr.read().decode()[-500:] if child.stderr else ''}")
    # ru_maxrss is in kilobytes on Linux, bytes on macOS.
    megabytes = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    return seconds, megabytes


def measure(args: list[str], repeat: int) -> tuple[float, float]:
    runs = [run_once(args) for _ in range(repeat)]
    return statistics.median(s for s, _ in runs), statistics.median(m for _, m in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="Runs of each command; medians are printed.")
    parser.add_argument("--all", action="store_true", help="Also every `reid CMD --help`.")
    options = parser.parse_args()
    measured = dict(MEASURED)
    if options.all:
        # The names are read in a child: a child's peak memory counts what it shared with this
        # process before it started, which must stay the interpreter alone.
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        names = subprocess.run([sys.executable, "-c", LISTING], capture_output=True, text=True, env=env, check=True)
        measured |= {f"reid {path} --help": [*path.split(), "--help"] for path in names.stdout.splitlines()}
    rows = {name: measure(args, options.repeat) for name, args in PEERS.items()}
    rows |= {name: measure(["-m", "reid", *args], options.repeat) for name, args in measured.items()}
    rows |= {f"python -m {module} --help": measure(["-m", module, "--help"], options.repeat) for module in APPS}
    bare_s, bare_mb = rows["python -c pass"]
    torch_s, torch_mb = rows['python -c "import torch"']
    print(f"median of {options.repeat} runs; aim for help and --version: <= {AIM_SECONDS} s and <= {AIM_MB:.0f} MB")
    print(f"{'command':<46} {'seconds':>8} {'peak MB':>8} {'x pass':>7} {'/ torch':>8}  aim")
    for name, (seconds, megabytes) in rows.items():
        aim = "" if name in PEERS else ("met" if seconds <= AIM_SECONDS and megabytes <= AIM_MB else "MISSED")
        print(
            f"{name:<46} {seconds:8.3f} {megabytes:8.1f} {seconds / bare_s:7.1f} {seconds / torch_s:8.2f}  {aim}"
        )
    print(f"(x pass: wall time over `python -c pass`, {bare_s:.3f} s, {bare_mb:.0f} MB; "
          f"/ torch: over `import torch`, {torch_s:.3f} s, {torch_mb:.0f} MB)")


if __name__ == "__main__":
    main()
