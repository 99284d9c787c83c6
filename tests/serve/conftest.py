"""Fixtures of the service tests: one real encoder per test run, a served root per test, real
Market-1501 crops (skipped with a reason where the data is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_helpers import Served, serve_root, shared_encoder

from reid.models import Encoder


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model") / "m"


@pytest.fixture(scope="session")
def encoder(model_folder: Path) -> Encoder:
    return shared_encoder(model_folder)


@pytest.fixture
def crops(market1501_mini: Path) -> dict[str, list[Path]]:
    """Real crops by person: the first four people of the query set, two or more each."""
    people: dict[str, list[Path]] = {}
    for path in sorted((market1501_mini / "query").glob("*.jpg")):
        people.setdefault(path.name.split("_")[0], []).append(path)
    chosen = [pid for pid, paths in people.items() if len(paths) >= 2][:4]
    return {pid: people[pid] for pid in chosen}


@pytest.fixture
def served(tmp_path: Path, model_folder: Path, encoder: Encoder) -> Served:
    """A root with gallery "staff" (threshold 0.05: only near copies are known) and keys
    read, write, both, and a read+write key of gallery "other"."""
    service, client = serve_root(
        tmp_path / "root", model_folder, encoder, galleries={"staff": {"threshold": 0.05}}
    )
    out = Served(tmp_path / "root", service, client, {})
    out.create("staff")
    out.create("other")
    out.keys = {
        "read": out.new_key("staff", "read"),
        "write": out.new_key("staff", "write"),
        "both": out.new_key("staff", "read", "write"),
        "other": out.new_key("other", "read", "write"),
    }
    return out
