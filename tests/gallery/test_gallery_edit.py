"""Renaming an identity and removing one item: one commit each, seen by other handles, checked clean."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gallery_helpers import clustered, make_card, metas

from reid.errors import ConfigError, GalleryError
from reid.gallery import Gallery, IndexSpec


def _filled(folder: Path, spec: IndexSpec | None = None) -> tuple[Gallery, np.ndarray, list[str]]:
    vectors, labels, _ = clustered(6, 4)
    gallery = Gallery.create(folder, make_card(), spec)
    gallery.add(vectors, metas(labels))
    return gallery, vectors, labels


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_rename_relabels_rows_search_and_other_handles(tmp_path: Path, kind: str) -> None:
    gallery, vectors, _ = _filled(tmp_path / "g", IndexSpec(kind=kind))
    other = Gallery.open(tmp_path / "g")
    assert gallery.rename_identity("id0002", "Dana <b>") == 4
    assert {s.identity for s in gallery.identities()} == {"id0000", "id0001", "Dana <b>", "id0003", "id0004", "id0005"}
    assert gallery.search(vectors[8:9], k=1)[0][0].identity == "Dana <b>"
    assert other.refresh()
    assert other.search(vectors[8:9], k=1)[0][0].identity == "Dana <b>"
    assert [i.identity for i in other.items("Dana <b>")] == ["Dana <b>"] * 4
    # The rows' checksums were rewritten with them: the full check passes.
    assert gallery.check(queries=10, k=3).items == 24
    gallery.close()
    other.close()


def test_rename_refuses_a_taken_name_an_empty_one_and_an_unknown_identity(tmp_path: Path) -> None:
    gallery, _, _ = _filled(tmp_path / "g")
    with pytest.raises(ConfigError, match="already exists"):
        gallery.rename_identity("id0001", "id0002")
    with pytest.raises(ConfigError, match="empty"):
        gallery.rename_identity("id0001", "  ")
    with pytest.raises(GalleryError, match="no identity 'ghost'"):
        gallery.rename_identity("ghost", "x")
    assert len(gallery.items("id0001")) == 4 and len(gallery.items("id0002")) == 4
    gallery.close()


def test_rename_to_a_name_whose_items_were_removed(tmp_path: Path) -> None:
    gallery, vectors, _ = _filled(tmp_path / "g")
    gallery.remove_identity("id0000")
    gallery.rename_identity("id0001", "id0000")
    assert gallery.search(vectors[4:5], k=1)[0][0].identity == "id0000"
    assert gallery.identity_count == 5
    gallery.close()


def test_remove_item_removes_its_row_and_embedding_only(tmp_path: Path) -> None:
    gallery, vectors, _ = _filled(tmp_path / "g")
    other = Gallery.open(tmp_path / "g")
    first = gallery.items("id0003")[0]
    removed = gallery.remove_item(first.id)
    assert removed == first
    assert len(gallery) == 23 and len(gallery.items("id0003")) == 3
    _, ids = gallery.search_items(vectors[12:13], k=23)
    assert first.id not in ids[0].tolist()
    with pytest.raises(GalleryError, match=f"no item {first.id}"):
        gallery.remove_item(first.id)
    other.refresh()
    assert len(other) == 23 and first.id not in other.get_items([first.id])
    # The identity's last item gone, the identity is gone.
    for item in gallery.items("id0005"):
        gallery.remove_item(item.id)
    assert "id0005" not in {s.identity for s in gallery.identities()}
    assert gallery.identity_count == 5
    assert gallery.check(queries=10, k=3).items == 19
    gallery.close()
    other.close()


def test_destroy_deletes_the_gallery_files_and_nothing_else(tmp_path: Path) -> None:
    gallery, _, _ = _filled(tmp_path / "g")
    gallery.close()
    (tmp_path / "g" / "notes.txt").write_text("kept")
    assert Gallery.destroy(tmp_path / "g") == 24
    assert [p.name for p in (tmp_path / "g").iterdir()] == ["notes.txt"]
    with pytest.raises(GalleryError, match="no gallery here"):
        Gallery.destroy(tmp_path / "g")
    _filled(tmp_path / "h")[0].close()
    Gallery.destroy(tmp_path / "h")
    assert not (tmp_path / "h").exists()
