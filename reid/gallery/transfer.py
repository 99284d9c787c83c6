"""Moving a gallery between backends: an ``.npz`` export (:mod:`reid.gallery.export`) read
back into a new gallery at any location (a folder, ``postgresql://...``).

The new gallery is made for the exported model (its fingerprint, dimension, kind and
threshold), with the exported index options unless others are given, and receives every
item with its embedding, identity, source, camera, frame, time, box, image hash and enrol
time in one atomic add, so an interrupted import leaves no gallery half filled.  Item ids
are the new gallery's own; a stored calibration that was current in the exported gallery
is current in the new one.  Thumbnails are not exported and do not move.
"""

from __future__ import annotations

import json
import math
import zipfile
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from reid.errors import ConfigError, GalleryError
from reid.gallery.base import GalleryBackend
from reid.gallery.calibration import GalleryCalibration
from reid.gallery.export import NPZ_COLUMNS
from reid.gallery.index import IndexSpec
from reid.gallery.opener import open_gallery
from reid.gallery.records import EmbeddingModel, ItemMeta


@dataclass
class Exported:
    """An ``.npz`` export read back: ``ids`` (N,) int64 as the exported gallery numbered
    them, ``embeddings`` (N, D) float32, ``items`` in the same order, ``info`` (the exported
    gallery's :class:`~reid.gallery.records.GalleryInfo` as a dict)."""

    ids: np.ndarray
    embeddings: np.ndarray
    items: list[ItemMeta]
    info: dict[str, Any]

    def card(self) -> EmbeddingModel:
        """The exported gallery's model, as much as a gallery records of it."""
        info = self.info
        return EmbeddingModel(
            name=str(info["model_name"]),
            fingerprint=str(info["model_fingerprint"]),
            embedding_dim=int(info["dim"]),
            threshold=None if info.get("threshold") is None else float(info["threshold"]),
            kind=str(info["model_kind"]),
        )


def read_export(path: str | Path) -> Exported:
    """The items of an ``.npz`` gallery export; ConfigError in one line naming ``path`` when it
    is not one (a missing member, mismatched lengths, a dimension that differs)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in ("ids", "embeddings", "box", "meta", *(c[0] for c in NPZ_COLUMNS))}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{path}: not a gallery export (.npz from reid gallery export): {exc}") from None
    try:
        info = json.loads(str(arrays["meta"]))
        count, dim = len(arrays["ids"]), int(info["dim"])
        embeddings = np.asarray(arrays["embeddings"], np.float32)
        if embeddings.shape != (count, dim) or arrays["box"].shape != (count, 4):
            raise ValueError(f"{count} items, embeddings of shape {embeddings.shape}, gallery dimension {dim}")
        if any(len(arrays[name]) != count for name, _, _ in NPZ_COLUMNS):
            raise ValueError("columns of different lengths")
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: a malformed gallery export ({exc})") from None
    items = [
        ItemMeta(
            identity=str(arrays["identity"][n]),
            source=str(arrays["source"][n]),
            camera=str(arrays["camera"][n]) or None,
            frame=None if arrays["frame"][n] < 0 else int(arrays["frame"][n]),
            time=None if math.isnan(arrays["time"][n]) else float(arrays["time"][n]),
            box=None if arrays["box"][n][0] < 0 else tuple(int(v) for v in arrays["box"][n]),  # type: ignore[arg-type]
            image_hash=str(arrays["image_hash"][n]) or None,
            enrolled=str(arrays["enrolled"][n]),
        )
        for n in range(count)
    ]
    return Exported(np.asarray(arrays["ids"], np.int64), embeddings, items, info)


def import_gallery(
    path: str | Path, location: str | Path, spec: IndexSpec | None = None, lock_timeout: float = 120.0
) -> GalleryBackend:
    """A new gallery at ``location`` holding the export ``path`` (opened; close it), with
    the exported index options or ``spec``.

    Raises ConfigError for a file that is not an export or an index ``location``'s backend
    does not offer; GalleryError when a gallery is already there (nothing is changed).
    """
    exported = read_export(path)
    if spec is None:
        try:
            spec = IndexSpec.from_dict(exported.info.get("index_params") or {})
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    gallery = open_gallery(location, exported.card(), spec, create=True, lock_timeout=lock_timeout, thumbnails=False)
    try:
        result = gallery.add(exported.embeddings, exported.items, skip_duplicates=False)
        if len(result.ids) != len(exported.items):
            raise GalleryError(f"{gallery.location}: {len(result.ids)} of {len(exported.items)} items imported")
        stored = exported.info.get("calibration")
        if stored:
            calibration = GalleryCalibration.from_json(json.dumps(stored))
            last = int(exported.ids[-1]) if len(exported.ids) else 0
            if calibration.current(len(exported.items), len({i.identity for i in exported.items}), last):
                calibration = replace(calibration, last_id=int(result.ids[-1]))
            with gallery.locked():
                gallery.set_calibration_text(calibration.to_json())
    except BaseException:
        # The gallery made for the import goes again (with nothing in it, as the add was atomic).
        with suppress(GalleryError):
            gallery.remove_if_empty()
        gallery.close()
        raise
    return gallery
