"""Fixtures of the app tests: tiny real (untrained) models saved as model folders."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from app_helpers import ROOT, tiny_model

# The apps are run from the repository root and are not installed with the package;
# the plain ``pytest`` launcher, unlike ``python -m pytest``, does not put the root on the path.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def person_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("person-model") / "m")


@pytest.fixture(scope="session")
def face_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("face-model") / "m", kind="face", threshold=0.5)
