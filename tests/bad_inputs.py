"""Bad inputs as people really have them, each made by the test that uses it."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
from PIL import Image


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bomb(path: Path, width: int = 60000, height: int = 60000) -> Path:
    """A PNG of a few hundred bytes whose header declares ``width`` x ``height`` RGB pixels."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    # One compressed row of zeros: enough for a decoder to start allocating the whole image.
    pixels = zlib.compress(b"\x00" * (1 + 3 * min(width, 4096)), 9)
    payload = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", pixels) + _chunk(b"IEND", b"")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return path


def good_jpg(path: Path, seed: int = 0, size: tuple[int, int] = (64, 32)) -> Path:
    """JPEG bytes of a random (height, width) = ``size`` image, whatever ``path`` is named."""
    image = np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)
    ok, payload = cv2.imencode(".jpg", image)
    assert ok
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload.tobytes())
    return path


def pillow_image(path: Path, fmt: str, seed: int = 0, size: tuple[int, int] = (32, 64)) -> Path:
    """An RGB image written by Pillow in ``fmt`` (GIF, JPEG as .jfif, ...)."""
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path, fmt)
    return path


def truncated_jpg(path: Path) -> Path:
    good_jpg(path)
    payload = path.read_bytes()
    path.write_bytes(payload[: len(payload) // 3])
    return path


def random_bytes(path: Path, size: int = 4096) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8).tobytes())
    return path


def sparse_file(path: Path, size: int) -> Path:
    """A file that claims ``size`` bytes but holds none on disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def symlink_loop(path: Path) -> Path:
    """A link pointing at itself: every stat of it fails with ELOOP."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(path.name, path)
    return path


def dangling_link(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(path.parent / "gone-away", path)
    return path
