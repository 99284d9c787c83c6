"""Small JPEG thumbnails of enrolled crops, to show who matched (``reid serve``'s answers
and page).  Personal data: each is a picture of a person, kept beside the gallery in
``thumbs/<item id>.jpg`` and deleted with its item.

A gallery keeps them when its ``thumbs/`` folder exists (made at creation unless turned
off).  They are written after the commit that adds their items, so a crash between the two
leaves items without thumbnails, never thumbnails without items; a thumbnail is only a
picture, never read back into the gallery.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

import cv2
import numpy as np

from reid.paths import write_bytes_atomic

FOLDER = "thumbs"
# The longer side of a thumbnail, in pixels, and its JPEG quality.
SIZE = 128
QUALITY = 80


def enable(gallery: Path) -> None:
    """Keep thumbnails for the gallery in folder ``gallery`` from now on."""
    (Path(gallery) / FOLDER).mkdir(exist_ok=True)


def enabled(gallery: Path) -> bool:
    folder = Path(gallery) / FOLDER
    return folder.is_dir() and not folder.is_symlink()


def shrink(crop: np.ndarray) -> np.ndarray:
    """``crop`` (RGB uint8, H x W x 3) as its thumbnail shows it: its longer side at most
    :data:`SIZE` (a copy when resized; a crop no larger is returned as it is).  What an
    enrolment keeps of a photo until its commit: never the full-size image."""
    height, width = crop.shape[:2]
    scale = min(1.0, SIZE / max(height, width, 1))
    if scale < 1.0:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
    return crop


def encode(crop: np.ndarray) -> bytes:
    """A JPEG of the RGB uint8 (H, W, 3) ``crop``, its longer side at most :data:`SIZE`."""
    crop = shrink(crop)
    ok, payload = cv2.imencode(".jpg", cv2.cvtColor(crop, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, QUALITY])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return payload.tobytes()


def path_of(gallery: Path, item_id: int) -> Path:
    return Path(gallery) / FOLDER / f"{int(item_id)}.jpg"


def write(gallery: Path, ids: Sequence[int], crops: Sequence[np.ndarray]) -> int:
    """Write the thumbnails of items ``ids`` from their ``crops``; how many were written
    (none when the gallery keeps none; a thumbnail that cannot be written is left out,
    as its item is committed already)."""
    if not enabled(gallery):
        return 0
    written = 0
    for item_id, crop in zip(ids, crops, strict=True):
        with suppress(OSError, ValueError, cv2.error):
            write_bytes_atomic(path_of(gallery, item_id), encode(crop))
            written += 1
    return written


def remove(gallery: Path, ids: Sequence[int] | np.ndarray) -> None:
    """Delete the thumbnails of items ``ids`` (those there are)."""
    if not enabled(gallery):
        return
    for item_id in ids:
        path_of(gallery, int(item_id)).unlink(missing_ok=True)


def remove_all(gallery: Path) -> None:
    """Delete every thumbnail and the folder (with the gallery)."""
    folder = Path(gallery) / FOLDER
    if not enabled(gallery):
        return
    # The folder is the gallery's own: thumbnails and their writes' temporaries.
    for path in folder.iterdir():
        if path.is_file() or path.is_symlink():
            path.unlink(missing_ok=True)
    with suppress(OSError):
        folder.rmdir()
