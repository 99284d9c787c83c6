"""The apps' command lines as reid's own: each command's help, run as users run it, imports
no engine (PyTorch, torchvision, OpenCV, FAISS, ONNX Runtime, OpenVINO) and reads whole at
80 columns; every option that a config field describes is built from that field."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer.main
from app_helpers import ROOT
from typer.testing import CliRunner

import apps.camera_search.cli as camera_search
import apps.face_checkin.calibrate as face_calibrate
import apps.face_checkin.cli as face_checkin
from apps.camera_search.config import SearchConfig
from apps.face_checkin.config import CheckinConfig
from reid.detect import PersonDetectorConfig
from reid.options import flag_of, option_fields
from reid.pipeline import CalibrateConfig
from reid.track import TrackerConfig

HEAVY = ("torch", "torchvision", "cv2", "faiss", "onnxruntime", "openvino")
# Each app command: the module ``python -m`` runs, its typer application, and the configs
# whose fields it takes as options (only those keys, where given).
COMMANDS = {
    "apps.camera_search": (camera_search.app, ((SearchConfig, None), (TrackerConfig, None), (PersonDetectorConfig, None))),
    "apps.face_checkin": (face_checkin.app, ((CheckinConfig, None),)),
    "apps.face_checkin.calibrate": (face_calibrate.app, ((CheckinConfig, face_calibrate.PHOTO_KEYS), (CalibrateConfig, None))),
}


def run_help(module: str) -> tuple[str, list[str]]:
    """``python -m MODULE --help`` in a fresh interpreter at 80 columns: what it printed and
    which of :data:`HEAVY` it imported."""
    probe = (
        "import contextlib, io, json, runpy, sys\n"
        f"sys.argv = [{module!r}, '--help']\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        f"    runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
        f"print(json.dumps([out.getvalue(), [m for m in {HEAVY!r} if m in sys.modules]]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    text, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return text, loaded


@pytest.mark.parametrize("module", list(COMMANDS))
def test_help_loads_no_engine_and_reads_whole_at_80_columns(module: str) -> None:
    text, loaded = run_help(module)
    assert loaded == []
    assert text.startswith(f"Usage: python -m {module} "), text[:80]
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "…" not in text and "<bool>" not in text
    assert not any(c in text for c in "│╭╰"), "help is plain text"


@pytest.mark.parametrize("module", list(COMMANDS))
def test_every_option_a_config_field_describes_is_built_from_it(module: str) -> None:
    """An option with the flag of a config field is that field's, with its help: the field's
    option text, never one written again by hand."""
    application, configs = COMMANDS[module]
    params = {p.opts[0]: p for p in typer.main.get_command(application).params if p.opts[0].startswith("--")}
    for config, keys in configs:
        for field in option_fields(config):
            flag = flag_of(field)
            if flag not in params or (keys is not None and field.name not in keys):
                continue
            spec = field.metadata["option"]
            assert params[flag].name == field.name, (module, flag)
            assert params[flag].default is None or params[flag].required, (module, flag, "a default of its own")
            assert spec.help.split(".")[0] in " ".join((params[flag].help or "").split()), (module, flag)


def test_the_apps_take_the_same_tracker_and_detector_options_as_reid() -> None:
    """``--iou``, ``--min-boxes``, ``--appearance`` and ``--lost-seconds``: one flag, help and
    range for ``reid track``, ``reid query`` and the camera search."""
    from reid.cli import app

    reid = typer.main.get_command(app)
    keys = ("iou", "min_boxes", "appearance", "lost_seconds")
    search = {p.name: p for p in typer.main.get_command(camera_search.app).params}
    for command in ("track", "query"):
        own = {p.name: p for p in reid.commands[command].params}  # type: ignore[attr-defined]
        for key in keys:
            assert own[key].opts == search[key].opts and own[key].help == search[key].help, (command, key)


def test_a_tracker_option_out_of_range_is_refused_naming_the_option_before_anything_is_written(tmp_path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(camera_search.app, ["--out", str(out), "--iou", "1.5", "a.avi", "b.avi"])
    assert result.exit_code == 1 and result.output.strip() == "error: --iou 1.5: must be in (0, 1]", result.output
    assert not out.exists()
