"""Which files are images, how folders are walked, and bounded image reading."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from bad_inputs import (
    dangling_link,
    good_jpg,
    pillow_image,
    png_bomb,
    random_bytes,
    sparse_file,
    symlink_loop,
    truncated_jpg,
)

from reid.data.io import (
    MAX_PIXELS_ENV,
    ImageLimits,
    list_media,
    media_kind,
    read_bytes,
    read_image,
    sniff_kind,
)
from reid.errors import ConfigError, DataError


def test_png_bomb_is_refused_before_decoding(tmp_path: Path) -> None:
    bomb = png_bomb(tmp_path / "bomb.png")
    with pytest.raises(DataError, match=r"bomb\.png: image declares 60000 x 60000 pixels, over the limit"):
        read_image(bomb)


def test_30000_square_png_is_over_the_default_limit(tmp_path: Path) -> None:
    bomb = png_bomb(tmp_path / "big.png", 30000, 30000)
    with pytest.raises(DataError, match="30000 x 30000 pixels"):
        read_image(bomb)


def test_pixel_limit_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    photo = good_jpg(tmp_path / "photo.jpg", size=(100, 100))
    assert read_image(photo).shape == (100, 100, 3)
    with pytest.raises(DataError, match="100 x 100 pixels, over the limit of 5000"):
        read_image(photo, ImageLimits(max_pixels=5000))
    monkeypatch.setenv(MAX_PIXELS_ENV, "5000")
    with pytest.raises(DataError, match="over the limit of 5000"):
        read_image(photo)
    monkeypatch.setenv(MAX_PIXELS_ENV, "lots")
    with pytest.raises(ConfigError, match="REID_MAX_IMAGE_PIXELS"):
        read_image(photo)


def test_huge_sparse_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    try:
        huge = sparse_file(tmp_path / "huge.jpg", 30 * 1024**3)
    except OSError as exc:
        pytest.skip(f"this file system cannot hold a sparse 30 GiB file ({exc.strerror})")
    with pytest.raises(DataError, match=r"huge\.jpg: file is 32212254720 bytes, over the image limit"):
        read_bytes(huge)


def empty_file(path: Path) -> Path:
    path.write_bytes(b"")
    return path


@pytest.mark.parametrize(
    "make,name,problem",
    [
        (truncated_jpg, "cut.jpg", "not a readable image"),
        (random_bytes, "noise.png", "not a readable image"),
        (empty_file, "empty.jpg", "empty file"),
    ],
)
def test_corrupt_images_are_one_data_error(
    tmp_path: Path, make: Callable[[Path], Path], name: str, problem: str
) -> None:
    path = make(tmp_path / name)
    with pytest.raises(DataError, match=problem) as caught:
        read_image(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_gif_and_jfif_are_images_by_extension_and_decode(tmp_path: Path) -> None:
    gif = pillow_image(tmp_path / "a.gif", "GIF")
    jfif = pillow_image(tmp_path / "b.jfif", "JPEG")
    for path in (gif, jfif):
        assert media_kind(path) == "image"
        image = read_image(path)
        assert image.shape == (64, 32, 3) and image.dtype == np.uint8
    assert media_kind(tmp_path / "clip.MP4") == "video" and media_kind(tmp_path / "notes.txt") is None


def test_content_decides_for_an_unknown_extension(tmp_path: Path) -> None:
    photo = good_jpg(tmp_path / "photo.data")
    assert sniff_kind(photo) == "image"
    assert sniff_kind(random_bytes(tmp_path / "blob.data")) is None


def test_folder_walk_takes_images_and_names_everything_else(tmp_path: Path) -> None:
    good_jpg(tmp_path / "a.jpg")
    good_jpg(tmp_path / "sub" / "b.jpg")
    pillow_image(tmp_path / "c.gif", "GIF")
    good_jpg(tmp_path / ".hidden.jpg")
    good_jpg(tmp_path / "._a.jpg")  # AppleDouble resource fork of a.jpg
    good_jpg(tmp_path / "__MACOSX" / "x.jpg")
    good_jpg(tmp_path / ".ipynb_checkpoints" / "y.jpg")
    (tmp_path / "Thumbs.db").write_bytes(b"\x00" * 16)
    (tmp_path / ".DS_Store").write_bytes(b"\x00" * 16)
    (tmp_path / "notes.txt").write_text("not a photo")
    dangling_link(tmp_path / "moved.jpg")
    symlink_loop(tmp_path / "loop")
    os.symlink(tmp_path, tmp_path / "sub" / "back-to-top")
    listing = list_media(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in listing.files] == ["a.jpg", "c.gif", "sub/b.jpg"]
    reasons = {p.relative_to(tmp_path).as_posix(): r for p, r in listing.skipped}
    for hidden in (".hidden.jpg", "._a.jpg", "__MACOSX", ".ipynb_checkpoints", "Thumbs.db", ".DS_Store"):
        assert reasons[hidden] == "hidden or system entry, not data"
    assert reasons["notes.txt"].startswith("not an image file (.txt)")
    assert reasons["moved.jpg"].startswith("link to nothing readable")
    assert reasons["loop"].startswith("link to nothing readable")
    assert reasons["sub/back-to-top"].startswith("folder link loops back")


def test_bounded_bytes_holds_uploads_to_the_file_limits() -> None:
    from reid.data.io import ImageLimits, bounded_bytes

    limits = ImageLimits(max_bytes=4)
    assert bounded_bytes(b"abcd", "up.jpg", limits) == b"abcd"
    with pytest.raises(DataError, match="up.jpg: file is 5 bytes, over the image limit of 4"):
        bounded_bytes(b"abcde", "up.jpg", limits)
    with pytest.raises(DataError, match="up.jpg: empty file"):
        bounded_bytes(b"", "up.jpg", limits)


@pytest.mark.parametrize("payload", [b"x", b"xx", b"BM", b"\x28\x00"])
def test_a_few_bytes_are_a_data_error_not_a_crash(payload: bytes) -> None:
    from reid.data.io import decode_image

    with pytest.raises(DataError, match="tiny.jpg: not a readable image"):
        decode_image(payload, "tiny.jpg")


# Text headers OpenCV decodes and Pillow cannot size; the float ones decode to 4 bytes a sample.
HDR_HEADER = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y %d +X %d\n"
PFM_HEADER = b"PF\n%d %d\n-1.0\n"
PAM_HEADER = b"P7\nWIDTH %d\nHEIGHT %d\nDEPTH 3\nMAXVAL %d\nTUPLTYPE RGB\nENDHDR\n"


@pytest.mark.parametrize(
    "payload,problem",
    [
        (HDR_HEADER % (25000, 25000) + b"\x02\x02" * 5000, "25000 x 25000 pixels of 4-byte samples"),
        # The resolution line may name the axes in another order.
        (b"#?RGBE\n\n+X 20000 -Y 10000\n" + bytes(100), "20000 x 10000 pixels of 4-byte samples"),
        (PFM_HEADER % (8000, 8000) + bytes(1000), "8000 x 8000 pixels of 4-byte samples"),
        (PAM_HEADER % (11000, 11000, 65535) + bytes(1000), "11000 x 11000 pixels of 2-byte samples"),
        (PAM_HEADER % (12000, 12000, 255) + bytes(1000), "12000 x 12000 pixels, over the limit"),
        (b"\x76\x2f\x31\x01" + bytes(200), "OpenEXR images are not read"),
        ("#?RADIANCE\n\n-Y ² +X 5\n".encode() + bytes(10), "not a readable image (a HDR header that cannot be read)"),
        (b"P7\nWIDTH 5\n" + bytes(10), "not a readable image (a PAM header that cannot be read)"),
    ],
)
def test_every_format_is_sized_from_its_header_before_decoding(
    payload: bytes, problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cv2

    from reid.data.io import decode_image

    def must_not_decode(*_: object) -> None:
        raise AssertionError("decoded before its size was checked")

    monkeypatch.setattr(cv2, "imdecode", must_not_decode)
    with pytest.raises(DataError, match="upload: ") as caught:
        decode_image(payload, "upload")
    assert problem in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("suffix", [".hdr", ".pfm", ".pam", ".ppm", ".png", ".tif", ".webp", ".jp2", ".sr", ".bmp"])
def test_each_format_opencv_writes_is_read_after_its_header(suffix: str) -> None:
    import cv2

    from reid.data.io import decode_image

    image = np.random.default_rng(0).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    ok, encoded = cv2.imencode(suffix, image.astype(np.float32) / 255 if suffix in (".hdr", ".pfm") else image)
    assert ok
    decoded = decode_image(encoded.tobytes(), f"x{suffix}")
    assert decoded.shape == (37, 53, 3) and decoded.dtype == np.uint8
    with pytest.raises(DataError, match="37 pixels"):
        decode_image(encoded.tobytes(), f"x{suffix}", ImageLimits(max_pixels=37 * 53 - 1))


def test_pillow_decodes_only_the_accepted_formats(tmp_path: Path) -> None:
    from PIL import Image

    from reid.data.io import decode_image

    for fmt, accepted in (("GIF", True), ("ICO", True), ("TGA", True), ("PCX", False), ("EPS", False)):
        path = tmp_path / f"a.{fmt.lower()}"
        Image.new("RGB", (40, 30), (200, 10, 10)).save(path, fmt)
        if accepted:
            assert decode_image(path.read_bytes(), path.name).ndim == 3
        else:
            with pytest.raises(DataError, match="not a readable image"):
                decode_image(path.read_bytes(), path.name)


def test_an_icon_is_sized_by_the_images_it_holds_not_its_directory() -> None:
    import struct
    import zlib

    from reid.data.io import decode_image

    # An icon directory listing one 16 x 16 entry whose image is a PNG of 20000 x 20000.
    ihdr = struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    png += struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    icon = struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", 16, 16, 0, 0, 1, 32, len(png), 22) + png
    with pytest.raises(DataError, match="icon.ico: image declares 20000 x 20000 pixels, over the limit"):
        decode_image(icon, "icon.ico")


@pytest.mark.parametrize(
    "suffix,image,sample",
    [
        # OpenJPEG holds every component as 4-byte integers before OpenCV's 8-bit image.
        (".jp2", np.zeros((40, 50, 3), np.uint8), 3),
        (".jp2", np.zeros((40, 50), np.uint8), 2),
        # A WebP with alpha is decoded as 4 channels first.
        (".webp", np.zeros((40, 50, 4), np.uint8), 2),
    ],
)
def test_a_decoder_that_builds_wider_samples_is_counted_at_them(suffix: str, image: np.ndarray, sample: int) -> None:
    import cv2

    from reid.data.io import decode_image, declared_size

    ok, encoded = cv2.imencode(suffix, image, [cv2.IMWRITE_WEBP_QUALITY, 101] if suffix == ".webp" else [])
    assert ok
    payload = encoded.tobytes()
    assert declared_size(payload, "x").sample_bytes == sample
    assert decode_image(payload, "x", ImageLimits(max_pixels=40 * 50 * sample)).shape == (40, 50, 3)
    with pytest.raises(DataError, match=f"40 pixels of {sample}-byte samples"):
        decode_image(payload, "x", ImageLimits(max_pixels=40 * 50 * sample - 1))


def test_a_message_of_the_decoder_gives_no_memory_address() -> None:
    from reid.data.io import decode_image

    # A PAM of two channels: OpenCV does not read it, Pillow does not know it.
    payload = b"P7\nWIDTH 10\nHEIGHT 10\nDEPTH 2\nMAXVAL 255\nENDHDR\n" + bytes(200)
    with pytest.raises(DataError, match="^a.pam: not a readable image") as caught:
        decode_image(payload, "a.pam")
    assert " at 0x" not in str(caught.value) and "BytesIO" not in str(caught.value)
