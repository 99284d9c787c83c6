"""A model or gallery written with a folder part is that path; only a bare name is looked
up under models/ or galleries/."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.gallery import resolve_gallery_path
from reid.models.folder import resolve_model_path
from reid.paths import has_folder_part, resolve_named


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
