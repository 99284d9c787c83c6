"""The opener: a gallery by its location, answering through the one seam."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from gallery_helpers import clustered, make_card, metas
from typer.testing import CliRunner

from reid.cli import app
from reid.errors import ConfigError, GalleryError
from reid.gallery import Gallery, GalleryBackend, destroy_gallery, open_gallery

SERVERS = ["postgresql://db.example/reid?gallery=staff", "postgres://db/reid", "milvus:local.db/staff", "milvus://h:19530/staff"]


def test_a_folder_is_the_faiss_gallery_opened_or_made_through_the_seam(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(3, 2)
    with open_gallery(tmp_path / "g", make_card()) as made:
        assert isinstance(made, GalleryBackend) and isinstance(made, Gallery) and made.created
        made.add(vectors, metas(labels))
    with open_gallery(str(tmp_path / "g"), make_card()) as again:
        assert not again.created and len(again) == 6 and again.location == str(tmp_path / "g")
    with pytest.raises(GalleryError, match="already exists"):
        open_gallery(tmp_path / "g", make_card(), create=True)
    with open_gallery(tmp_path / "g") as opened:
        assert opened.search(vectors[:1], k=1)[0][0].identity == "id0000"
    assert destroy_gallery(tmp_path / "g") == 6 and not (tmp_path / "g").exists()
    with pytest.raises(GalleryError, match="no gallery here"):
        open_gallery(tmp_path / "g")


def test_an_empty_gallery_made_for_nothing_is_removed(tmp_path: Path) -> None:
    made = open_gallery(tmp_path / "g", make_card())
    assert made.remove_if_empty() and not (tmp_path / "g").exists()


@pytest.mark.parametrize("location", SERVERS)
def test_server_locations_are_refused_in_one_line_until_their_backend_is_there(
    tmp_path: Path, location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = "pymilvus" if location.startswith("milvus") else "psycopg"
    # The client as a machine without the extra has it: Python's import system finds no such
    # package (a None entry in sys.modules is its "not installed"), whether or not it is here.
    monkeypatch.setitem(sys.modules, client, None)
    assert importlib.util.find_spec(client) is None
    with pytest.raises(ConfigError, match=rf"^\w+: galleries need the {client} client: pip install 'reid-toolkit\[") as caught:
        open_gallery(location, make_card())
    assert "\n" not in str(caught.value) and not (Path.cwd() / location).exists()
    for command in (["gallery", "info", location], ["gallery", "list", location]):
        result = CliRunner().invoke(app, command)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 1 and lines == [f"error: {caught.value}"], result.output
