"""A damaged gallery database: ``check`` finds it, ``remove_identity`` changes nothing on it,
and no single changed byte alters what the gallery answers without an error."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from gallery_helpers import clustered, make_card, metas

from reid.errors import GalleryError
from reid.gallery import DB_FILE, Gallery

LABEL = b"id0001"


def build(folder: Path, identities: int = 4, per_identity: int = 27) -> Path:
    vectors, labels, _ = clustered(identities, per_identity)
    with Gallery.create(folder, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
    return folder


FACTS = ("items", "identities", "dim", "index_params", "model_fingerprint", "model_name", "threshold", "created")


def contents(folder: Path) -> tuple[list[object], ...]:
    """The gallery's facts, every item row as stored, and the answers to three probes."""
    with Gallery.open(folder) as gallery:
        info = gallery.info().to_dict()
        facts = [info[key] for key in FACTS]
        rows = [tuple(item.to_dict().values()) for item in gallery.items()]
        probes = gallery.embeddings([1, 30, 60])
        answers = [(m.identity, m.item_id) for found in gallery.search(probes, k=2) for m in found]
    return facts, rows, answers


def damaged_copy(original: Path, to: Path, offset: int, byte: int | None = None) -> Path:
    shutil.copytree(original, to)
    data = bytearray((to / DB_FILE).read_bytes())
    data[offset] = byte if byte is not None else data[offset] ^ 0x55
    (to / DB_FILE).write_bytes(bytes(data))
    return to


def check_finds(folder: Path) -> bool:
    """True when opening or checking the gallery reports damage."""
    try:
        with Gallery.open(folder) as gallery:
            gallery.check(queries=10)
    except GalleryError as exc:
        assert "\n" not in str(exc)
        return True
    return False


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("damage") / "g")


def label_offsets(folder: Path) -> list[int]:
    data = (folder / DB_FILE).read_bytes()
    found, start = [], 0
    while (at := data.find(LABEL, start)) >= 0:
        found.append(at)
        start = at + 1
    return found


def test_a_relabelled_item_is_found_by_check_and_blocks_remove(original: Path, tmp_path: Path) -> None:
    offsets = label_offsets(original)
    # The label is stored in each of its rows and again in the identity index.
    assert len(offsets) > 27
    for n, at in enumerate(offsets):
        # "id0001" becomes "id0002": a row (or index entry) now names another identity.
        copy = damaged_copy(original, tmp_path / f"g{n}", at + len(LABEL) - 1, ord("2"))
        assert check_finds(copy), f"relabelling at byte {at} not found"
        with Gallery.open(copy) as gallery:
            before = gallery.items()
            with pytest.raises(GalleryError, match="the database is damaged|disk image is malformed"):
                gallery.remove_identity("id0001")
        with Gallery.open(copy) as gallery:
            assert gallery.items() == before, "a refused removal changes nothing"


def test_remove_says_what_it_removed_and_that_nothing_is_left(original: Path, tmp_path: Path) -> None:
    copy = tmp_path / "g"
    shutil.copytree(original, copy)
    with Gallery.open(copy) as gallery:
        assert gallery.remove_identity("id0001") == 27
        assert gallery.items("id0001") == []
        probe = gallery.embeddings([1])
        assert all(m.identity != "id0001" for m in gallery.search(probe, k=4)[0])
        report = gallery.check(queries=10)
    assert (report.items, report.identities, report.database) == (81, 3, "ok")
    assert report.files >= 1


def test_an_older_gallery_is_checked_and_gets_checksums_with_its_first_write(original: Path, tmp_path: Path) -> None:
    copy = tmp_path / "g"
    shutil.copytree(original, copy)
    with sqlite3.connect(copy / DB_FILE) as db:
        db.execute("ALTER TABLE items DROP COLUMN row_sha256")
        db.execute("DELETE FROM meta WHERE key = 'facts_sha256'")
        db.execute("UPDATE meta SET value = '2' WHERE key = 'format'")
    with Gallery.open(copy) as gallery:
        assert gallery.check(queries=10).checksums is False
        vectors, labels, _ = clustered(1, 3, seed=9)
        gallery.add(vectors, metas(["newcomer"] * 3, prefix="new"))
        assert gallery.check(queries=10).checksums is True
    with sqlite3.connect(copy / DB_FILE) as db:
        db.execute("UPDATE items SET source = 'elsewhere.jpg' WHERE id = 7")
    with Gallery.open(copy) as gallery, pytest.raises(GalleryError, match="item 7 does not match its checksum"):
        gallery.check(queries=10)


def test_a_changed_threshold_is_found(original: Path, tmp_path: Path) -> None:
    copy = tmp_path / "g"
    shutil.copytree(original, copy)
    with sqlite3.connect(copy / DB_FILE) as db:
        db.execute("UPDATE meta SET value = '1.5' WHERE key = 'threshold'")
    with Gallery.open(copy) as gallery, pytest.raises(GalleryError, match="threshold or index options do not match"):
        gallery.check(queries=10)


def test_a_row_of_the_wrong_type_is_found(original: Path, tmp_path: Path) -> None:
    copy = tmp_path / "g"
    shutil.copytree(original, copy)
    with sqlite3.connect(copy / DB_FILE) as db:
        db.execute("UPDATE items SET frame = 'x' WHERE id = 5")
    with Gallery.open(copy) as gallery, pytest.raises(GalleryError, match="item 5 has a value of the wrong type"):
        gallery.check(queries=10)


@pytest.mark.slow
def test_no_single_changed_byte_goes_unnoticed(original: Path, tmp_path: Path) -> None:
    """Change one byte at offsets all over the database: each change is either reported
    by open or check, or leaves every row and every answer as they were."""
    expected = contents(original)
    size = (original / DB_FILE).stat().st_size
    caught = unchanged = 0
    missed = []
    for n, offset in enumerate(range(0, size, 53)):
        copy = damaged_copy(original, tmp_path / f"g{n}", offset)
        if check_finds(copy):
            caught += 1
        elif contents(copy) == expected:
            unchanged += 1
        else:
            missed.append(offset)
        shutil.rmtree(copy)
    assert not missed, f"{len(missed)} changed bytes altered the gallery unnoticed, first at {missed[:5]}"
    assert caught > 0 and caught + unchanged == len(range(0, size, 53))
    np.testing.assert_equal(contents(original), expected)
