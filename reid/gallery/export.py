"""Export of a gallery's items: ``.jsonl`` (one item's metadata a line) or ``.npz``
(ids, float32 embeddings and every column as arrays, plus the gallery's facts).

Both are streamed a chunk at a time, so a gallery larger than memory exports too.  The
``.npz`` is written member by member through :mod:`zipfile` (ZIP64 for large members), so
``numpy.load`` reads it as usual.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

from reid.errors import ConfigError
from reid.gallery.catalogue import item_from_row
from reid.gallery.records import GalleryInfo
from reid.gallery.search import Originals
from reid.gallery.shards import CHUNK

EXPORT_SUFFIXES = (".npz", ".jsonl")
# The .npz members besides ids, embeddings, box and meta: (member, SQL over items, dtype).
NPZ_COLUMNS: tuple[tuple[str, str, Any], ...] = (
    ("identity", "identity", str),
    ("source", "source", str),
    ("camera", "COALESCE(camera, '')", str),
    ("frame", "COALESCE(frame, -1)", np.int64),
    ("time", "time", np.float64),
    ("enrolled", "enrolled", str),
    ("image_hash", "COALESCE(image_hash, '')", str),
)


class ItemSource(Protocol):
    """Where the items are read from: a gallery's catalogue, in any backend that speaks SQL."""

    def item_rows(self) -> Iterator[list[tuple[Any, ...]]]:
        """Rows of ``id, identity, source, camera, frame, time, box_x, box_y, box_w, box_h,
        enrolled, image_hash``, ascending by id, a chunk at a time."""
        ...

    def select(self, sql: str) -> list[tuple[Any, ...]]:
        """SQL expressions over every item, ascending by id."""
        ...


def export_suffix(path: Path) -> str:
    """``path``'s export format (".npz" or ".jsonl"); ConfigError for any other suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in EXPORT_SUFFIXES:
        raise ConfigError(f"{path}: export to a .npz (embeddings and items) or a .jsonl (items) file")
    return suffix


def write_jsonl(handle: BinaryIO, catalogue: ItemSource) -> None:
    """One JSON object per item (:meth:`GalleryItem.to_dict`), ascending by id."""
    for rows in catalogue.item_rows():
        handle.write("".join(json.dumps(item_from_row(row).to_dict()) + "\n" for row in rows).encode())


def write_npz(
    handle: BinaryIO, catalogue: ItemSource, ids: np.ndarray, dim: int, originals: Originals, info: GalleryInfo
) -> None:
    """The items as arrays: ``ids`` (N,) int64, ``embeddings`` (N, ``dim``) float32, the
    :data:`NPZ_COLUMNS` (missing values as '' or -1), ``box`` (N, 4) int64 (-1: none) and
    ``meta`` (the gallery's :class:`GalleryInfo` as JSON)."""
    with zipfile.ZipFile(handle, "w", allowZip64=True) as archive:
        _member(archive, "ids", ids)
        with archive.open("embeddings.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_2_0(
                member, {"descr": "<f4", "fortran_order": False, "shape": (len(ids), dim)}
            )
            for start in range(0, len(ids), CHUNK):
                member.write(originals(ids[start : start + CHUNK]).astype("<f4").tobytes())
        for name, sql, dtype in NPZ_COLUMNS:
            _member(archive, name, np.asarray([row[0] for row in catalogue.select(sql)], dtype=dtype))
        box = catalogue.select("COALESCE(box_x, -1), COALESCE(box_y, -1), COALESCE(box_w, -1), COALESCE(box_h, -1)")
        _member(archive, "box", np.asarray(box, dtype=np.int64).reshape(-1, 4))
        _member(archive, "meta", np.asarray(json.dumps(info.to_dict())))


def _member(archive: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
