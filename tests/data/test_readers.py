"""Dataset readers on tiny trees built here, and on the real Market-1501 subset."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from reid.data import load_dataset, looks_like_data_spec, parse_data_spec, relabel
from reid.data.cameras import camera_from_name
from reid.data.records import ReidDataset
from reid.errors import ConfigError, DataError
from reid.evaluation import RankingResult, evaluate_features


def write_jpg(path: Path, value: int = 128) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((16, 8, 3), value, np.uint8))


def make_market(root: Path) -> Path:
    for name in ("0002_c1s1_000101_01.jpg", "0002_c2s1_000201_01.jpg", "0007_c3s2_000301_02.jpg.jpg"):
        write_jpg(root / "bounding_box_train" / name)
    write_jpg(root / "query" / "0005_c1s1_000401_00.jpg")
    write_jpg(root / "query" / "-1_c2s1_000402_00.jpg")
    for name in ("0005_c2s1_000501_00.jpg", "0000_c4s1_000601_00.jpg", "-1_c6s1_000701_00.jpg", "0005_c1s1_000801_00.jpg"):
        write_jpg(root / "bounding_box_test" / name)
    (root / "bounding_box_test" / "Thumbs.db").write_bytes(b"\0")
    return root


def test_market_parsing_drops_junk_keeps_distractors(tmp_path: Path) -> None:
    dataset = load_dataset(f"market1501:{make_market(tmp_path)}")
    assert [(r.pid, r.camid) for r in dataset.train] == [(2, 0), (2, 1), (7, 2)]
    assert dataset.train[2].path.name.endswith(".jpg.jpg")
    assert [(r.pid, r.camid) for r in dataset.query] == [(5, 0)]
    assert sorted((r.pid, r.camid) for r in dataset.gallery) == [(0, 3), (5, 0), (5, 1)]
    labels, mapping = relabel(dataset.train)
    assert labels == [0, 0, 1] and mapping == {2: 0, 7: 1}


def test_dukemtmc_names(tmp_path: Path) -> None:
    for split in ("bounding_box_train", "query", "bounding_box_test"):
        write_jpg(tmp_path / split / "0001_c2_f0046182.jpg")
    dataset = load_dataset(f"dukemtmc:{tmp_path}")
    assert (dataset.train[0].pid, dataset.train[0].camid) == (1, 1)


def test_missing_folder_and_wrong_layout(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="dataset folder not found"):
        load_dataset(f"market1501:{tmp_path / 'nope'}")
    (tmp_path / "query").mkdir()
    with pytest.raises(DataError, match=r"not a market1501 layout \(missing bounding_box_train/, bounding_box_test/"):
        load_dataset(f"market1501:{tmp_path}")


def test_bad_file_name_is_named(tmp_path: Path) -> None:
    make_market(tmp_path)
    write_jpg(tmp_path / "query" / "person.jpg")
    with pytest.raises(DataError, match="person.jpg: file name does not follow"):
        load_dataset(f"market1501:{tmp_path}")


def test_unknown_kind_and_missing_path() -> None:
    with pytest.raises(ConfigError, match="^data 'cuhk03:/x': unknown dataset kind 'cuhk03'"):
        load_dataset("cuhk03:/x")
    with pytest.raises(ConfigError, match="^data 'market1501': market1501 needs a folder"):
        load_dataset("market1501")


def test_a_spec_without_its_kind_is_told_the_kind(tmp_path: Path) -> None:
    """A path alone is no data set: the answer asks for KIND:PATH, and names the KIND
    where the folder has a published layout; ``folder:`` on such a layout names it too."""
    market = make_market(tmp_path / "market")
    with pytest.raises(ConfigError, match=rf"^data '{market}': give KIND:PATH \(this is a Market-1501 layout: give market1501:{market}\)$"):
        load_dataset(str(market))
    with pytest.raises(ConfigError, match=rf"^data 'folder:{market}': {market} is a Market-1501 layout, not identity folders; give market1501:{market}$"):
        load_dataset(f"folder:{market}")
    duke = tmp_path / "duke"
    for split in ("bounding_box_train", "query", "bounding_box_test"):
        write_jpg(duke / split / "0001_c2_f0046182.jpg")
    with pytest.raises(ConfigError, match=rf"give dukemtmc:{duke}\)$"):
        load_dataset(str(duke))
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ConfigError, match=r"give KIND:PATH \(as market1501:, dukemtmc:, msmt17:, folder: or synthetic\)$"):
        load_dataset(str(plain))
    with pytest.raises(ConfigError, match="^data 'market:/x': unknown dataset kind 'market'"):
        load_dataset("market:/x")
    assert parse_data_spec("Market1501:/x") == ("market1501", "/x")
    assert parse_data_spec("synthetic") == ("synthetic", "")
    assert looks_like_data_spec("market:/x") and not looks_like_data_spec("/x/market:y") and not looks_like_data_spec("C:/x")


def test_msmt17_lists(tmp_path: Path) -> None:
    write_jpg(tmp_path / "train" / "0000" / "0000_000_01_0303morning_0015_0.jpg")
    write_jpg(tmp_path / "train" / "0001" / "0001_003_05_0303noon_0020_1.jpg")
    write_jpg(tmp_path / "test" / "0000" / "0000_011_02_0303afternoon_0001_0.jpg")
    (tmp_path / "list_train.txt").write_text("0000/0000_000_01_0303morning_0015_0.jpg 0\n")
    (tmp_path / "list_val.txt").write_text("0001/0001_003_05_0303noon_0020_1.jpg 1\n")
    (tmp_path / "list_query.txt").write_text("0000/0000_011_02_0303afternoon_0001_0.jpg 0\n")
    (tmp_path / "list_gallery.txt").write_text("0000/0000_011_02_0303afternoon_0001_0.jpg 0\n")
    dataset = load_dataset(f"msmt17:{tmp_path}")
    assert [(r.pid, r.camid) for r in dataset.train] == [(0, 0), (1, 4)]
    assert dataset.query[0].path.is_file() and dataset.query[0].camid == 1
    (tmp_path / "list_query.txt").write_text("just-one-field\n")
    with pytest.raises(DataError, match=r"list_query.txt:1: expected 'RELATIVE_PATH PID'"):
        load_dataset(f"msmt17:{tmp_path}")


def test_identity_folders_with_and_without_camera_tokens(tmp_path: Path) -> None:
    for name in ("a_c1_1.jpg", "b_c2_2.jpg", "c_c1_3.jpg"):
        write_jpg(tmp_path / "alice" / name)
    for name in ("x.png", "y.png"):
        write_jpg(tmp_path / "bob" / name)
    write_jpg(tmp_path / "carol" / "only.jpg")
    (tmp_path / "bob" / "notes.txt").write_text("not an image")
    dataset = load_dataset(f"folder:{tmp_path}")
    assert len(dataset.train) == 6 and dataset.num_train_ids == 3
    alice = [r for r in dataset.train if r.path.parent.name == "alice"]
    assert sorted(r.camid for r in alice) == [1, 1, 2]
    bob = [r for r in dataset.train if r.path.parent.name == "bob"]
    assert len({r.camid for r in bob}) == 2, "images without a camera token count as separate views"
    assert {r.path.parent.name for r in dataset.query} == {"alice", "bob"}
    assert not set(dataset.query) & set(dataset.gallery)


def test_identity_folders_explicit_split(tmp_path: Path) -> None:
    for split in ("train", "query", "gallery"):
        write_jpg(tmp_path / split / "dave" / "cam1_0.jpg")
    dataset = load_dataset(f"folder:{tmp_path}")
    assert len(dataset.train) == len(dataset.query) == len(dataset.gallery) == 1
    assert dataset.query[0].pid == dataset.gallery[0].pid


def test_flat_folder_is_a_wrong_layout(tmp_path: Path) -> None:
    write_jpg(tmp_path / "img.jpg")
    with pytest.raises(DataError, match="no identity folders"):
        load_dataset(f"folder:{tmp_path}")


@pytest.mark.parametrize(
    "name,camera",
    [
        ("x_c3_1.jpg", 3),
        ("cam12-a.png", 12),
        ("img.camera2.jpg", 2),
        ("cactus.jpg", None),
        ("0002_c1s1_000451_03.jpg", 1),  # Market-1501: camera and sequence in one token
        ("-1_c6s2_000001_00.jpg", 6),
        ("0005_c2_f0046985.jpg", 2),  # DukeMTMC-reID
        ("c4s1_0001.png", 4),
        ("disc3s1.jpg", None),
    ],
)
def test_camera_token(name: str, camera: int | None) -> None:
    assert camera_from_name(name) == camera


def test_real_market1501_subset(market1501_mini: Path) -> None:
    dataset = load_dataset(f"market1501:{market1501_mini}")
    assert len(dataset.train) == 868 and dataset.num_train_ids == 50
    assert len(dataset.query) == 215
    # 782 true gallery images + 300 distractors; the 100 junk images are dropped.
    assert len(dataset.gallery) == 1082
    assert sum(r.pid == 0 for r in dataset.gallery) == 300
    assert {r.camid for r in dataset.train} == set(range(6))


def test_folder_layout_reads_market_camera_tokens(tmp_path: Path) -> None:
    """Market-1501 names under identity folders keep their cameras, so same-camera gallery
    items are removed exactly as with the market1501: reader."""
    for name in ("0002_c1s1_000451_03.jpg", "0002_c1s1_000476_01.jpg", "0002_c2s1_000301_01.jpg"):
        write_jpg(tmp_path / "0002" / name)
    dataset = load_dataset(f"folder:{tmp_path}")
    assert sorted(r.camid for r in dataset.train) == [1, 1, 2]
    assert dataset.cameras_known


def test_folder_layout_without_cameras_says_so(tmp_path: Path) -> None:
    for name in ("a.jpg", "b.jpg"):
        write_jpg(tmp_path / "ann" / name)
    dataset = load_dataset(f"folder:{tmp_path}")
    assert not dataset.cameras_known and len({r.camid for r in dataset.train}) == 2


def test_folder_layout_names_every_entry_it_does_not_take(tmp_path: Path) -> None:
    write_jpg(tmp_path / "ann" / "c1_a.jpg")
    write_jpg(tmp_path / "ann" / "c2_b.jpg")
    write_jpg(tmp_path / ".hidden" / "c1_x.jpg")
    write_jpg(tmp_path / "__MACOSX" / "ann" / "._c1_a.jpg")
    (tmp_path / "ann" / ".DS_Store").write_bytes(b"\0" * 8)
    (tmp_path / "ann" / "notes.txt").write_text("not a photo")
    (tmp_path / "loose.jpg").write_bytes(b"")
    (tmp_path / "bob").symlink_to(tmp_path / "gone")  # an identity folder that was moved away
    (tmp_path / "eve").symlink_to("eve")  # a link loop where a folder is expected
    dataset = load_dataset(f"folder:{tmp_path}")
    assert {r.path.parent.name for r in dataset.train} == {"ann"} and len(dataset.train) == 2
    reasons = {p.name: r for p, r in dataset.skipped}
    assert set(reasons) == {".hidden", "__MACOSX", ".DS_Store", "notes.txt", "loose.jpg", "bob", "eve"}
    assert reasons["bob"].startswith("link to nothing readable") and reasons["eve"].startswith("link to nothing")
    assert reasons["loose.jpg"] == "file outside the identity folders"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="permissions do not stop root")
def test_unreadable_identity_folder_is_named(tmp_path: Path) -> None:
    write_jpg(tmp_path / "ann" / "a.jpg")
    write_jpg(tmp_path / "bob" / "b.jpg")
    (tmp_path / "bob").chmod(0)
    try:
        dataset = load_dataset(f"folder:{tmp_path}")
    finally:
        (tmp_path / "bob").chmod(0o755)
    assert [p.name for p, r in dataset.skipped if r.startswith("cannot list folder")] == ["bob"]


def test_folder_copy_of_market_ranks_like_market(tmp_path: Path, market1501_mini: Path) -> None:
    """The same files read as market1501: and as folder: (identity folders keeping the
    Market-1501 names) give the same cameras, hence the same metrics."""
    market = load_dataset(f"market1501:{market1501_mini}")
    for split, records in (("train", market.train), ("query", market.query), ("gallery", market.gallery)):
        for record in records:
            link = tmp_path / split / f"{record.pid:04d}" / record.path.name
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(record.path)
    folder = load_dataset(f"folder:{tmp_path}")
    assert folder.cameras_known

    def ranking(dataset: ReidDataset) -> RankingResult:
        names = sorted({r.path.name for r in dataset.query + dataset.gallery})
        rng = np.random.default_rng(0)
        table = dict(zip(names, rng.standard_normal((len(names), 16)), strict=True))
        split = (dataset.query, dataset.gallery)
        feats = [np.stack([table[r.path.name] for r in part]) for part in split]
        pids = [np.array([int(r.path.name.split("_")[0]) for r in part]) for part in split]
        cams = [np.array([r.camid - (dataset.name == "folder") for r in part]) for part in split]
        return evaluate_features(feats[0], feats[1], pids[0], pids[1], cams[0], cams[1])

    by_market, by_folder = ranking(market), ranking(folder)
    assert by_folder.num_valid_queries == by_market.num_valid_queries
    assert by_folder.rank1 == by_market.rank1 and by_folder.mAP == pytest.approx(by_market.mAP)


def test_market_copy_with_macos_leftovers_still_reads(tmp_path: Path) -> None:
    root = make_market(tmp_path)
    # A copy made on macOS carries "._" resource forks beside every image, and __MACOSX/.
    (root / "query" / "._0005_c1s1_000401_00.jpg").write_bytes(b"\0\5\26\7")
    (root / "__MACOSX").mkdir()
    dataset = load_dataset(f"market1501:{root}")
    assert [(r.pid, r.camid) for r in dataset.query] == [(5, 0)]
    assert {p.name for p, _ in dataset.skipped} == {"._0005_c1s1_000401_00.jpg", "Thumbs.db"}
