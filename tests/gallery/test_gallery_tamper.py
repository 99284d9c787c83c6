"""A gallery folder may come from someone else: names and values read from its database
are checked, so nothing outside the folder is ever opened, written or deleted."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gallery_helpers import clustered, make_card, metas
from typer.testing import CliRunner

from reid.cli.app import app
from reid.errors import ConfigError, GalleryError
from reid.gallery import DB_FILE, Gallery, IndexSpec

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def small_gallery(folder: Path) -> Path:
    vectors, labels, _ = clustered(6, 5)
    with Gallery.create(folder, make_card(), IndexSpec("flat")) as gallery:
        gallery.add(vectors[:15], metas(labels[:15]))
        gallery.add(vectors[15:], metas(labels[15:], prefix="more"))
    return folder


def set_meta(folder: Path, key: str, value: str) -> None:
    with sqlite3.connect(folder / DB_FILE) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))


def one_error(*args: str | Path) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1, result.output
    return errors[0]


@pytest.mark.parametrize("name", ["../../victim.txt", "{victim}", "index-00000001-0000000g.faiss", "sub/x.faiss"])
def test_index_name_outside_the_folder_is_refused_and_nothing_is_deleted(tmp_path: Path, name: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    folder = small_gallery(tmp_path / "a" / "g")
    set_meta(folder, "snapshot_name", name.format(victim=victim))
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    for command in (["gallery", "reindex", folder, "--index", "hnsw"], ["gallery", "info", folder, "--check"],
                    ["gallery", "remove", folder, "--id", "id0001"], ["gallery", "list", folder]):
        line = one_error(*command)
        assert "gallery corrupt or tampered" in line and str(folder / DB_FILE) in line
    assert victim.read_text() == "keep me"
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_segment_and_shard_names_are_checked_too(tmp_path: Path) -> None:
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"keep me")
    folder = small_gallery(tmp_path / "g")
    with sqlite3.connect(folder / DB_FILE) as db:
        assert db.execute("SELECT COUNT(*) FROM segments").fetchone()[0] >= 1
        db.execute("UPDATE segments SET name = ?", (str(victim),))
    with pytest.raises(GalleryError, match="gallery corrupt or tampered: file name"):
        Gallery.open(folder)
    assert victim.read_bytes() == b"keep me"


@pytest.mark.parametrize(
    "key,value,problem",
    [
        ("dim", "-3", "dimension -3 is not positive"),
        ("dim", "many", "malformed"),
        ("threshold", "nan", "threshold nan"),
        ("threshold", "-1", "threshold -1.0"),
        ("threshold", "strict", "malformed"),
        ("snapshot_size", "-5", "is not a byte count"),
        ("snapshot_sha256", "../x", "is not a SHA-256"),
        ("generation", "-1", "is not a count"),
        ("index_spec", "[1, 2]", "index_spec is a list, not an object"),
        ("index_spec", "[" * 100_000 + "]" * 100_000, "nested deeper than 32 levels"),
        ("index_spec", '{"nlist": ' + "9" * 5000 + "}", "a number longer than 40 characters"),
        ("index_spec", '{"kind": "flat", "hnsw_m": "many"}', "index_spec hnsw_m is 'many', not a whole number"),
        ("index_spec", '{"kind": ["flat"]}', "index_spec kind is"),
    ],
)
def test_metadata_values_are_validated_on_open(tmp_path: Path, key: str, value: str, problem: str) -> None:
    folder = small_gallery(tmp_path / "g")
    set_meta(folder, key, value)
    with pytest.raises(GalleryError, match=problem) as caught:
        Gallery.open(folder)
    assert str(caught.value).startswith(str(folder / DB_FILE)) and "\n" not in str(caught.value)


def test_an_untampered_sharded_gallery_still_opens_and_searches(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(50, 5)
    with Gallery.create(tmp_path / "g", make_card(), IndexSpec("flat", shard_size=100)) as gallery:
        for start in range(0, 250, 50):
            gallery.add(vectors[start : start + 50], metas(labels[start : start + 50], prefix=f"b{start}"))
    with Gallery.open(tmp_path / "g") as gallery:
        assert len(gallery) == 250 and gallery.shard_count >= 2
        top = gallery.search(vectors[:1], 1)[0][0]
        assert top.identity == "id0000" and np.isfinite(top.distance)


FULL_DISK = """
import resource, signal, sys
from reid.cli.app import app
# Writes past the limit fail with EFBIG, as on a full disk, instead of killing the process.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000))
app(sys.argv[1:])
"""


@pytest.mark.parametrize("command", [["reindex", "--index", "hnsw"], ["remove", "--id", "id0003"]])
def test_a_full_disk_is_one_line_and_the_gallery_stays_intact(tmp_path: Path, command: list[str]) -> None:
    vectors, labels, _ = clustered(20, 30, dim=128)
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card(dim=128), IndexSpec("flat")) as gallery:
        gallery.add(vectors, metas(labels))
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".lock"}
    assert max(len(b) for b in before.values()) > 150_000, "the index must be larger than the write limit"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, "gallery", command[0], str(folder), *command[1:]],
        capture_output=True, text=True, env=env, check=False,
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 1 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(folder) in errors[0]
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".lock"}
    assert after == before
    with Gallery.open(folder) as gallery:
        assert len(gallery) == 600 and gallery.index_kind == "flat"


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE TRIGGER wipe AFTER INSERT ON items BEGIN DELETE FROM items; END",
        "CREATE TRIGGER wipe_meta BEFORE UPDATE ON meta BEGIN DELETE FROM items; END",
        "CREATE VIEW everyone AS SELECT identity FROM items",
        "CREATE TABLE notes (text TEXT)",
        "CREATE INDEX items_source ON items(source)",
        "DROP INDEX items_hash; CREATE INDEX items_hash ON items(source)",
    ],
)
def test_a_schema_no_gallery_creates_is_refused_on_open(tmp_path: Path, statement: str) -> None:
    folder = small_gallery(tmp_path / "g")
    with sqlite3.connect(folder / DB_FILE) as db:
        db.executescript(statement)
        count = db.execute("SELECT count(*) FROM items").fetchone()[0]
    with pytest.raises(GalleryError, match="which no gallery creates"):
        Gallery.open(folder)
    vectors, labels, _ = clustered(2, 2, seed=5)
    with pytest.raises(GalleryError, match="which no gallery creates"):
        with Gallery.open_or_create(folder, make_card()) as gallery:
            gallery.add(vectors, metas(labels, prefix="new"))
    line = one_error("gallery", "list", folder)
    assert DB_FILE in line and "no gallery creates" in line
    with sqlite3.connect(folder / DB_FILE) as db:
        assert db.execute("SELECT count(*) FROM items").fetchone()[0] == count


def test_a_gallery_of_its_own_schema_opens(tmp_path: Path) -> None:
    folder = small_gallery(tmp_path / "g")
    with Gallery.open(folder) as gallery:
        assert len(gallery) == 30


def test_names_that_are_not_utf8_are_stored_escaped_and_the_rest_is_enrolled(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(3, 2, seed=7)
    items = metas(labels)
    items[1] = dataclasses.replace(items[1], source=os.fsdecode(b"photos/caf\xe9.jpg"))
    items[3] = dataclasses.replace(items[3], camera=os.fsdecode(b"cam\xff"))
    not_text = dataclasses.replace(items[4], identity=os.fsdecode(b"Jos\xe9"))
    with Gallery.create(tmp_path / "g", make_card(), IndexSpec("flat")) as gallery:
        # An identity is a name (reid.names): one holding bytes that are not text is refused whole.
        with pytest.raises(ConfigError, match="identity 'Jos\\\\udce9' holds bytes that are not UTF-8 text"):
            gallery.add(vectors, [*items[:4], not_text, items[5]])
        gallery.add(vectors, items)
    with Gallery.open(tmp_path / "g") as gallery:
        stored = gallery.items()
        assert len(stored) == 6
        assert {item.source for item in stored} >= {"photos/caf\\xe9.jpg"}
        assert "cam\\xff" in {item.camera for item in stored}
    assert one_error("gallery", "info", tmp_path / "nowhere").startswith("error:")
    listed = runner.invoke(app, ["gallery", "info", str(tmp_path / "g"), "--check"])
    assert listed.exit_code == 0, listed.output


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE items SET box_x = 'x' WHERE id = 1",
        "UPDATE items SET box_x = 1, box_y = NULL, box_w = 3, box_h = NULL WHERE id = 1",
        "UPDATE items SET identity = x'ff00' WHERE id = 1",
        "UPDATE items SET time = 'nan' WHERE id = 1",
        "UPDATE items SET camera = x'00', enrolled = x'01' WHERE id = 1",
    ],
)
def test_an_item_row_of_the_wrong_types_is_one_error_wherever_it_is_read(tmp_path: Path, sql: str) -> None:
    folder = small_gallery(tmp_path / "g")
    # Changed while the gallery is open (a server holds its galleries open).
    with Gallery.open(folder) as gallery:
        label = gallery.get_items([2])[2].identity
        with sqlite3.connect(folder / DB_FILE) as db:
            db.execute(sql)
        reads = [lambda: gallery.items(), lambda: gallery.get_items([1])]
        if "identity" in sql or "enrolled" in sql:
            reads.append(lambda: gallery.identities())
        else:
            reads.append(lambda: gallery.items(label))
        for read in reads:
            with pytest.raises(GalleryError, match="item 1 has a value of the wrong type|identity or enrol time") as caught:
                read()
            assert str(caught.value).startswith(str(folder / DB_FILE)) and "\n" not in str(caught.value)


def test_a_last_item_id_that_is_no_count_refuses_the_write(tmp_path: Path) -> None:
    folder = small_gallery(tmp_path / "g")
    with sqlite3.connect(folder / DB_FILE) as db:
        db.execute("UPDATE sqlite_sequence SET seq = 'abc' WHERE name = 'items'")
    vectors, labels, _ = clustered(2, 1)
    with Gallery.open(folder) as gallery, pytest.raises(GalleryError, match="the last item id is 'abc', not a count"):
        gallery.add(vectors[:1], metas(labels[:1], prefix="new"))


@pytest.mark.parametrize(
    "stored,problem",
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 32 levels"),
        ('{"identities": ' + "9" * 5000 + "}", "a number longer than 40 characters"),
        ("{", "not valid JSON"),
    ],
)
def test_a_malformed_stored_calibration_is_one_error(tmp_path: Path, stored: str, problem: str) -> None:
    folder = small_gallery(tmp_path / "g")
    with sqlite3.connect(folder / DB_FILE) as db:
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('calibration', ?)", (stored,))
    with Gallery.open(folder) as gallery, pytest.raises(GalleryError, match=problem) as caught:
        gallery.calibration
    assert str(caught.value).startswith(str(folder / DB_FILE)) and "\n" not in str(caught.value)
