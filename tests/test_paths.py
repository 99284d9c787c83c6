"""Output path checks, link-safe new files, the one atomic write, and how named models and
galleries become paths (a folder part means that path; only a bare name is looked up under
models/ or galleries/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

import pytest

from reid.errors import ConfigError
from reid.gallery import resolve_gallery_path
from reid.models.folder import resolve_model_path
from reid.paths import (
    check_output_file,
    check_output_folder,
    has_folder_part,
    load_json_bounded,
    nesting_depth,
    open_new,
    remove_stale_temporaries,
    replaced_atomically,
    replaced_folder,
    resolve_named,
    temporary_path,
    write_atomic,
    write_bytes_atomic,
)


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


def test_an_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "deeper" / "a.json"
    write_bytes_atomic(target, b"old")
    write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.json"]
    assert temporary_path(target).name == f".a.json.tmp-{os.getpid()}"


def test_a_failed_atomic_write_keeps_the_old_file_and_names_the_target(tmp_path: Path) -> None:
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")

    def half_then_fail(handle: BinaryIO) -> None:
        handle.write(b"half")
        raise ValueError("the writer gave up")

    with pytest.raises(ValueError, match="the writer gave up"):
        write_atomic(target, half_then_fail)
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]

    def disk_full(handle: BinaryIO) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left on device") as caught:
        write_atomic(target, disk_full)
    assert caught.value.filename == str(target) and target.read_bytes() == b"old"
    with pytest.raises(ValueError), replaced_atomically(target) as tmp:
        tmp.write_bytes(b"written by name")
        raise ValueError("check failed")
    assert target.read_bytes() == b"old" and not tmp.exists()


def test_an_atomic_write_does_not_follow_a_link_planted_as_its_temporary(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    target = tmp_path / "a.txt"
    temporary_path(target).symlink_to(victim)
    write_bytes_atomic(target, b"new")
    assert victim.read_text() == "keep" and target.read_bytes() == b"new" and not target.is_symlink()


def test_only_temporaries_of_dead_writers_are_removed(tmp_path: Path) -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".a.bin.tmp-{int(finished.stdout)}"
    live = temporary_path(tmp_path / "b.bin")
    unrelated = tmp_path / ".c.tmp-notapid"
    for path in (stale, live, unrelated):
        path.write_bytes(b"x")
    assert remove_stale_temporaries(tmp_path) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, unrelated.name])


def test_a_replaced_folder_is_whole_old_or_whole_new(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "weights.pt").write_bytes(b"old weights")
    (folder / "card.json").write_text("old card")
    (folder / "history.jsonl").write_text("kept")
    (folder / "runs").mkdir()
    (folder / "runs" / "events").write_text("kept too")
    with pytest.raises(RuntimeError), replaced_folder(folder, ("weights.pt", "card.json")) as stage:
        (stage / "weights.pt").write_bytes(b"new weights")
        raise RuntimeError("killed between the files")
    assert (folder / "weights.pt").read_bytes() == b"old weights" and (folder / "card.json").read_text() == "old card"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    with replaced_folder(folder, ("weights.pt", "card.json")) as stage:
        (stage / "weights.pt").write_bytes(b"new weights")
        (stage / "card.json").write_text("new card")
        assert (folder / "card.json").read_text() == "old card", "readers see the old folder until the swap"
    assert (folder / "weights.pt").read_bytes() == b"new weights" and (folder / "card.json").read_text() == "new card"
    assert (folder / "history.jsonl").read_text() == "kept" and (folder / "runs" / "events").read_text() == "kept too"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


@pytest.mark.parametrize(
    ("text", "depth"), [("1", 0), ("[]", 1), ('{"a": [1, {"b": 2}]}', 3), ("[" * 33 + "]" * 33, 33)]
)
def test_nesting_is_counted_without_recursion(text: str, depth: int) -> None:
    assert nesting_depth(json.loads(text)) == depth


def test_bounded_reads_refuse_large_deep_and_undecodable_files(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(1 << 20)
    with pytest.raises(ConfigError, match=r"big.json: 1,048,576 bytes, more than the 1,000 a card may have; not read"):
        load_json_bounded(big, 1000, "card")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ConfigError, match=r"deep.json: a card nested deeper than 32 levels"):
        load_json_bounded(deep, 1 << 20, "card")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"name": "Jos\xe9"}')
    with pytest.raises(ConfigError, match=r"latin.json: a card must be UTF-8 text"):
        load_json_bounded(latin, 1 << 20, "card")
    (tmp_path / "ok.json").write_text('{"a": 1}')
    assert load_json_bounded(tmp_path / "ok.json", 100, "card") == {"a": 1}
