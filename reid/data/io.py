"""Safe image reading: every failure becomes a DataError that names the file."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from reid.errors import DataError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".pgm", ".ppm", ".tif", ".tiff", ".webp")


def is_image_file(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES


def read_image(path: str | Path) -> np.ndarray:
    """Read an image file as an RGB uint8 array of shape (H, W, 3)."""
    path = Path(path)
    try:
        payload = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if payload.size == 0:
        raise DataError(f"{path}: empty file")
    image = cv2.imdecode(payload, cv2.IMREAD_COLOR)
    if image is None or image.size == 0:
        raise DataError(f"{path}: not a readable image")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
