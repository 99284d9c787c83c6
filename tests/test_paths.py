"""Output path checks and link-safe new files."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.errors import ConfigError
from reid.paths import check_output_file, check_output_folder, open_new


def test_outputs_are_checked_without_making_anything(tmp_path: Path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("x")
    check_output_folder(tmp_path / "a" / "b", "--out")
    check_output_file(tmp_path / "a" / "b.json", "--json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
    with pytest.raises(ConfigError, match=r"f: --out needs a folder here; this is a file"):
        check_output_folder(a_file, "--out")
    with pytest.raises(ConfigError, match=r"f: --out needs a folder here; this is a file"):
        check_output_folder(a_file / "deeper" / "m", "--out")
    with pytest.raises(ConfigError, match=r": --json needs a file name; this is a folder"):
        check_output_file(tmp_path, "--json")


def test_a_new_file_replaces_a_planted_link_instead_of_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    planted = tmp_path / ".x.tmp-1"
    planted.symlink_to(victim)
    with open_new(planted) as handle:
        handle.write(b"new")
    assert victim.read_text() == "keep" and not planted.is_symlink() and planted.read_bytes() == b"new"
