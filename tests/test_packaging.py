"""The distribution's name on the package index, and the install line README and CI share."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11+")

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "reid-toolkit"


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_distribution_is_not_the_taken_name_but_the_command_and_package_stay_reid() -> None:
    meta = project()
    assert meta["name"] == DISTRIBUTION
    assert meta["scripts"] == {"reid": "reid.cli:app"}
    # The dev extra pulls the other extras through the distribution's own name; under the
    # index's "reid" it would pull another project.
    own = [r for r in meta["optional-dependencies"]["dev"] if r.split("[")[0] in ("reid", DISTRIBUTION)]
    assert own and all(r.startswith(DISTRIBUTION + "[") for r in own), own


def test_every_install_hint_names_the_distribution() -> None:
    """An extra from the index (``pip install \"NAME[serve]\"``) is the distribution's."""
    hints = []
    for path in (*ROOT.joinpath("reid").rglob("*.py"), *ROOT.joinpath("docs").glob("*.md"), ROOT / "README.md"):
        hints += [(path.name, m) for m in re.findall(r"""pip install ['"]?(reid[-a-z]*)\[""", path.read_text())]
    assert hints, "no install hints found"
    assert [h for h in hints if h[1] != DISTRIBUTION] == []


def test_readme_and_ci_install_the_same_way() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[dev]"' in readme and 'pip install -e ".[dev]"' in ci
    assert f"`{DISTRIBUTION}`" in readme and "pip install reid`" in readme
