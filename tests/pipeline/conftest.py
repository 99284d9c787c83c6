"""Fixtures of the pipeline tests: one real (untrained) encoder shared by a module."""

from __future__ import annotations

import pytest
from pipeline_helpers import build_encoder

from reid.models import Encoder


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Encoder:
    return build_encoder(tmp_path_factory.mktemp("model") / "m")
