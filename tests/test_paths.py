"""Output path checks, link-safe new files, and how named models and galleries become
paths (a folder part means that path; only a bare name is looked up under models/ or
galleries/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.errors import ConfigError
from reid.gallery import resolve_gallery_path
from reid.models.folder import resolve_model_path
from reid.paths import check_output_file, check_output_folder, has_folder_part, open_new, resolve_named


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


@pytest.mark.parametrize("spec", ["./x", "../x", "a/b", "/abs/x", "~/x", ".", ".."])
def test_a_path_with_a_folder_part_is_that_path(spec: str) -> None:
    assert has_folder_part(spec)


def test_dot_slash_is_the_working_folder_not_the_default_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "galleries" / "x").mkdir(parents=True)
    (tmp_path / "models" / "x").mkdir(parents=True)
    # "./x" does not exist here, but galleries/x and models/x do: the user meant ./x.
    assert resolve_gallery_path("./x") == Path("x") and not resolve_gallery_path("./x").exists()
    assert resolve_model_path("./x") == Path("x")
    assert resolve_gallery_path("x") == Path("galleries") / "x"
    assert resolve_model_path("x") == Path("models") / "x"
    assert resolve_named("sub/x", Path("galleries")) == Path("sub/x")
    (tmp_path / "x").mkdir()
    assert resolve_gallery_path("x") == Path("x"), "a bare name that exists here is taken as it is"
