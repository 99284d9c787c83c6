"""Where served galleries are kept: a gallery's own location, gallery_location, the root."""

from __future__ import annotations

from pathlib import Path

import pytest
from reid.errors import ConfigError
from reid.gallery import open_gallery
from reid.models import Encoder
from reid.serve import AdminKey, Service, load_serve_config
from reid.serve.places import GalleryPlaces

ADMIN = AdminKey("admin-key-for-the-tests-0123456789", "tests")


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("postgresql://db.example/reid?gallery=staff", "write {name} once"),
        ("postgresql://db.example/reid?gallery={name}_{name}", "write {name} once"),
        ("postgresql://db.example/{name}?gallery=staff", "must stand in the gallery's own name"),
        ("postgresql://reid:secret@db.example/reid?gallery={name}", "PGPASSWORD"),
        ("milvus://root:secret@m.example:19530/{name}", "MILVUS_TOKEN"),
        ("milvus://m.example:19530/{name}__meta", "not a collection name"),
    ],
)
def test_a_gallery_location_that_cannot_place_galleries_is_one_line(tmp_path: Path, template: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        GalleryPlaces(tmp_path, template)
    text = str(caught.value)
    assert text.startswith("gallery_location: ") and "\n" not in text and "secret" not in text


def test_a_gallerys_own_location_with_a_password_is_refused_naming_the_gallery(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^gallery visitors: location: .*PGPASSWORD") as caught:
        GalleryPlaces(tmp_path, None, {"visitors": "postgresql://reid:secret@db.example/reid?gallery=visitors"})
    assert "secret" not in str(caught.value)


def test_the_rules_in_order_own_location_then_gallery_location_then_the_root(tmp_path: Path) -> None:
    pg = "postgresql://db.example/reid?gallery=front_{name}&sslmode=require"
    places = GalleryPlaces(tmp_path / "root", pg, {"archive": str(tmp_path / "kept" / "archive")})
    assert places.location("archive") == tmp_path / "kept" / "archive" and places.is_folder("archive")
    assert places.location("desk") == "postgresql://db.example/reid?gallery=front_desk&sslmode=require"
    assert not places.is_folder("desk")
    assert GalleryPlaces(tmp_path / "root").location("desk") == tmp_path / "root" / "desk"
    with pytest.raises(ConfigError, match="gallery name"):
        places.location("../etc")


def test_a_folder_gallery_location_lists_its_galleries(tmp_path: Path, encoder: Encoder) -> None:
    places = GalleryPlaces(tmp_path / "root", str(tmp_path / "kept" / "g-{name}"))
    for name in ("g-staff", "g-visitors", "other"):
        open_gallery(tmp_path / "kept" / name, encoder.card).close()
    (tmp_path / "root").mkdir()
    open_gallery(tmp_path / "root" / "old", encoder.card).close()
    # Only galleries kept where gallery_location says; root's folders are not served then.
    assert places.names() == ["staff", "visitors"]
    assert places.exists("staff") and not places.exists("old") and places.uid("staff") is not None
    # A folder is the path written, never a bare name looked up under galleries/.
    assert GalleryPlaces(tmp_path, "g-{name}").location("staff") == Path("g-staff")


def test_defaults_have_no_location(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="defaults: location is a gallery's own"):
        load_serve_config(None, root=str(tmp_path), defaults={"location": "postgresql://db/reid?gallery=x"})


def test_a_milvus_lite_gallery_is_served_by_one_worker_process(tmp_path: Path) -> None:
    pytest.importorskip("pymilvus", reason="the Milvus gallery needs pymilvus (pip install 'reid-toolkit[milvus]')")
    config = load_serve_config(
        None, root=str(tmp_path / "root"), models={"m": str(tmp_path / "no-model")}, workers=2,
        galleries={"staff": {"location": f"milvus:{tmp_path / 'g.db'}/staff"}},
    )  # fmt: skip
    with pytest.raises(ConfigError, match="^workers: .*milvus-lite file, which one process at a time opens"):
        Service.load(config, ADMIN)
