"""Thumbnails of enrolled crops: written after the commit, deleted with their items and the gallery."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from gallery_helpers import clustered, make_card, metas

from reid.gallery import Gallery, thumbnails


def _crops(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 255, (300, 150, 3), dtype=np.uint8) for _ in range(count)]


def test_thumbnails_follow_their_items(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(3, 2)
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        result = gallery.add(vectors, metas(labels), crops=_crops(6))
        paths = [thumbnails.path_of(gallery.folder, i) for i in result.ids]
        assert all(p.is_file() for p in paths)
        small = cv2.imdecode(np.frombuffer(paths[0].read_bytes(), np.uint8), cv2.IMREAD_COLOR)
        assert small.shape == (128, 64, 3)
        gallery.remove_item(result.ids[0])
        assert not paths[0].exists() and paths[1].exists()
        gallery.remove_identity("id0001")
        assert [p.exists() for p in paths] == [False, True, False, False, True, True]
        # Duplicates are skipped with their thumbnails; rows added without crops get none.
        again = gallery.add(vectors[4:], metas(labels)[4:], crops=_crops(2))
        assert again.ids == [] and len(again.duplicates) == 2
        extra = gallery.add(vectors[:1], metas(["late"], prefix="late"))
        assert not thumbnails.path_of(gallery.folder, extra.ids[0]).exists()
    Gallery.destroy(tmp_path / "g")
    assert not (tmp_path / "g").exists()


def test_a_gallery_can_keep_none(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(1, 2)
    with Gallery.create(tmp_path / "g", make_card(), thumbnails=False) as gallery:
        gallery.add(vectors, metas(labels), crops=_crops(2))
    assert not thumbnails.enabled(tmp_path / "g") and not (tmp_path / "g" / thumbnails.FOLDER).exists()
