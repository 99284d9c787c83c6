"""Where the tests find the real data: $REID_SHARED when set, else ../shared (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOW = "import tests.conftest as c; print(c.SHARED_DATA); print(c.SHARED_WEIGHTS)"


def _shared_paths(env: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", SHOW], cwd=ROOT, env={"PYTHONPATH": str(ROOT), **env},
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.split()


def test_the_shared_folder_is_the_one_reid_shared_names(tmp_path: Path) -> None:
    assert _shared_paths({"REID_SHARED": str(tmp_path)}) == [str(tmp_path / "data"), str(tmp_path / "weights")]


def test_without_reid_shared_the_shared_folder_is_beside_the_project() -> None:
    assert _shared_paths({}) == [str(ROOT.parent / "shared" / "data"), str(ROOT.parent / "shared" / "weights")]
