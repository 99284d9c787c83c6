"""Readers for the Market-1501 family (Market-1501, DukeMTMC-reID) and MSMT17.

Market-1501 names are ``PPPP_cCsS_FFFFFF_BB.jpg`` (DukeMTMC-reID: ``PPPP_cC_fFFFFFFF.jpg``):
pid -1 marks junk and is dropped, pid 0000 marks distractors, kept in the gallery only.
Some copies of Market-1501 carry files ending in ``.jpg.jpg``; they are read as usual.
Camera ids are stored 0-based.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from reid.data.cameras import camera_from_name
from reid.data.io import list_media
from reid.data.records import ImageRecord, ReidDataset
from reid.errors import DataError
from reid.text import whole_number

MARKET_PID = re.compile(r"^(-?\d+)_")


@dataclass(frozen=True)
class MarketLayout:
    root: Path

    @property
    def train_dir(self) -> Path:
        return self.root / "bounding_box_train"

    @property
    def query_dir(self) -> Path:
        return self.root / "query"

    @property
    def gallery_dir(self) -> Path:
        return self.root / "bounding_box_test"


def parse_market_name(path: Path) -> tuple[int, int]:
    """Return ``(pid, camid)`` (camid 0-based) from a Market/Duke-style file name."""
    match = MARKET_PID.match(path.name)
    cam = camera_from_name(path.name.split(".")[0])
    if match is None or cam is None:
        raise DataError(f"{path}: file name does not follow PPPP_cC... (pid, camera) naming")
    pid = int(match.group(1))
    if cam < 1:
        raise DataError(f"{path}: camera number must start at 1")
    return pid, cam - 1


def _read_split(
    folder: Path, keep_distractors: bool, skipped: list[tuple[Path, str]]
) -> list[ImageRecord]:
    if not folder.is_dir():
        raise DataError(f"{folder}: folder not found")
    records = []
    listing = list_media(folder, keep=lambda path: path.name.lower().endswith(".jpg"), recursive=False)
    skipped += listing.skipped
    for path in listing.files:
        pid, camid = parse_market_name(path)
        if pid == -1 or (pid == 0 and not keep_distractors):
            continue
        records.append(ImageRecord(path, pid, camid))
    if not records:
        raise DataError(f"{folder}: no images named PPPP_cC*.jpg")
    return records


def read_market_style(root: Path, name: str) -> ReidDataset:
    """Read a Market-1501 or DukeMTMC-reID folder."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root}: dataset folder not found")
    layout = MarketLayout(root)
    missing = [p.name for p in (layout.train_dir, layout.query_dir, layout.gallery_dir) if not p.is_dir()]
    if missing:
        raise DataError(
            f"{root}: not a {name} layout (missing {', '.join(m + '/' for m in missing)}; expected "
            "bounding_box_train/, query/, bounding_box_test/)"
        )
    skipped: list[tuple[Path, str]] = []
    return ReidDataset(
        name=name,
        root=root,
        train=_read_split(layout.train_dir, False, skipped),
        query=_read_split(layout.query_dir, False, skipped),
        gallery=_read_split(layout.gallery_dir, True, skipped),
        skipped=skipped,
    )


def _read_msmt_list(root: Path, list_name: str, image_dir: str) -> list[ImageRecord]:
    list_path = root / list_name
    if not list_path.is_file():
        raise DataError(f"{list_path}: MSMT17 list file not found")
    records = []
    for number, line in enumerate(list_path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or whole_number(parts[1]) is None:
            raise DataError(f"{list_path}:{number}: expected 'RELATIVE_PATH PID', got {line.strip()!r}")
        rel, pid = parts[0], int(parts[1])
        # MSMT17 names are PPPP_CCC_KK_... with a 1-based camera number in the third field.
        fields = Path(rel).name.split("_")
        if len(fields) < 3 or whole_number(fields[2], 1) is None:
            raise DataError(f"{list_path}:{number}: cannot read the camera from {rel!r}")
        records.append(ImageRecord(root / image_dir / rel, pid, int(fields[2]) - 1))
    return records


def read_msmt17(root: Path) -> ReidDataset:
    """Read MSMT17 (V1 or V2): ``train/``, ``test/`` and ``list_{train,val,query,gallery}.txt``."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root}: dataset folder not found")
    train = _read_msmt_list(root, "list_train.txt", "train")
    if (root / "list_val.txt").is_file():
        train += _read_msmt_list(root, "list_val.txt", "train")
    return ReidDataset(
        name="msmt17",
        root=root,
        train=train,
        query=_read_msmt_list(root, "list_query.txt", "test"),
        gallery=_read_msmt_list(root, "list_gallery.txt", "test"),
    )
