"""Which files are images or videos, how folders are listed, and safe image reading.

One rule for every command: a file is an image or a video by its extension (every
extension OpenCV or Pillow decodes), or, for a file named explicitly with another
extension, by its content.  Hidden files and the leftovers of operating systems,
archives and notebooks are never data.  Reading an image is bounded: the file size is
checked before it is read and the pixel count its header declares before it is decoded,
so a decompression bomb or a huge sparse file is a DataError naming the file, like any
truncated or corrupt image.
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from reid.errors import ConfigError, DataError
from reid.text import whole_number

# Every still-image extension OpenCV's imdecode or Pillow reads.
IMAGE_SUFFIXES = (
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".bmp", ".dib", ".pgm", ".ppm", ".pbm", ".pnm", ".pxm",
    ".pfm", ".sr", ".ras", ".tif", ".tiff", ".webp", ".gif", ".jp2", ".j2k", ".hdr", ".pic", ".exr", ".avif",
    ".tga", ".ico",
)  # fmt: skip
VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv", ".flv", ".ts", ".3gp")
# Folders and files that operating systems, archivers and notebooks leave beside data.
SYSTEM_NAMES = frozenset(
    {"__MACOSX", "Thumbs.db", "ehthumbs.db", "desktop.ini", "$RECYCLE.BIN", "System Volume Information",
     "__pycache__", "lost+found", "Icon\r"}
)  # fmt: skip
MAX_PIXELS_ENV = "REID_MAX_IMAGE_PIXELS"
MAX_BYTES_ENV = "REID_MAX_IMAGE_BYTES"


@dataclass(frozen=True)
class ImageLimits:
    """Bounds on one image: ``max_pixels`` (width x height as the header declares it) and
    ``max_bytes`` (file size).  Defaults: 120 megapixels (a 108 MP phone photo passes,
    about 360 MB decoded) and 256 MiB."""

    max_pixels: int = 120_000_000
    max_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_pixels < 1 or self.max_bytes < 1:
            raise ConfigError(f"image limits must be positive, got {self.max_pixels} pixels, {self.max_bytes} bytes")

    @classmethod
    def from_env(cls) -> ImageLimits:
        """The defaults, or ``REID_MAX_IMAGE_PIXELS`` / ``REID_MAX_IMAGE_BYTES`` when set."""
        values = {}
        for name, key in ((MAX_PIXELS_ENV, "max_pixels"), (MAX_BYTES_ENV, "max_bytes")):
            text = os.environ.get(name, "").strip()
            if text:
                try:
                    values[key] = int(text)
                except ValueError:
                    raise ConfigError(f"{name}={text!r}: expected a whole number") from None
        return cls(**values)


def storable_text(text: str) -> str:
    """``text`` as valid Unicode that every store takes (SQLite, JSON, a terminal): a file
    name with bytes that are not UTF-8 (held by Python as lone surrogates) keeps them
    written as ``\\xNN`` escapes; valid text is returned as it is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def quiet_opencv() -> None:
    """Stop OpenCV printing its own warnings (one per truncated file) on the process's
    stderr; commands call this once, as they name every skipped file themselves."""
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)


def is_ignored(path: Path) -> bool:
    """Hidden files and folders (``.name``, AppleDouble ``._name``) and system leftovers."""
    return path.name.startswith(".") or path.name in SYSTEM_NAMES or path.name.startswith("~$")


def media_kind(path: Path) -> str | None:
    """"image" or "video" by the file's extension, None for any other file."""
    suffix = path.suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        return "image"
    if suffix in VIDEO_SUFFIXES:
        return "video"
    return None


def sniff_kind(path: Path) -> str | None:
    """The kind of a file named explicitly: by extension, else "image" when Pillow knows
    its header, else None (callers may still try it as a video)."""
    kind = media_kind(path)
    if kind is not None:
        return kind
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(path):
                return "image"
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError, ValueError):
        return None


def is_image_file(path: Path) -> bool:
    return not is_ignored(path) and media_kind(path) == "image" and path.is_file()


@dataclass
class Listing:
    """Files of a folder walk that were taken, and every entry not taken with the reason."""

    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def list_media(folder: Path, keep: Callable[[Path], bool] | None = None, recursive: bool = True) -> Listing:
    """Walk ``folder`` (sorted, following links to folders once) and take the image files.

    Nothing is left out silently: hidden and system entries, files of other kinds, and
    entries that cannot be read (a dangling link, a link loop, a folder that cannot be
    listed) are in ``skipped`` with the reason.  ``keep`` overrides which files are taken.
    """
    keep = keep or (lambda path: media_kind(path) == "image")
    listing = Listing()
    _walk(Path(folder), keep, recursive, listing, set())
    return listing


def _walk(folder: Path, keep: Callable[[Path], bool], recursive: bool, listing: Listing, seen: set[Path]) -> None:
    try:
        real = folder.resolve(strict=True)
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except (OSError, RuntimeError) as exc:
        listing.skipped.append((folder, f"cannot list folder ({_reason(exc)})"))
        return
    if real in seen:
        listing.skipped.append((folder, "folder link loops back to a folder already read"))
        return
    seen.add(real)
    for entry in entries:
        path = folder / entry.name
        if is_ignored(path):
            listing.skipped.append((path, "hidden or system entry, not data"))
            continue
        kind = entry_kind(path)
        if kind == "folder":
            if recursive:
                _walk(path, keep, recursive, listing, seen)
        elif kind == "file":
            if keep(path):
                listing.files.append(path)
            else:
                listing.skipped.append((path, f"not an image file ({path.suffix or 'no extension'})"))
        else:
            listing.skipped.append((path, kind))


def entry_kind(path: Path) -> str:
    """"folder", "file", or the reason the entry is neither readable folder nor file."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if path.is_symlink():
            return f"link to nothing readable ({_reason(exc)})"
        return f"cannot read ({_reason(exc)})"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISREG(mode):
        return "file"
    return "not a regular file or folder"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc) or type(exc).__name__


def read_bytes(path: str | Path, limits: ImageLimits | None = None) -> bytes:
    """The bytes of an image file, refusing one over ``limits.max_bytes`` before reading it."""
    path = Path(path)
    limits = limits or ImageLimits.from_env()
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limits.max_bytes:
                raise DataError(f"{path}: file is {size} bytes, over the image limit of {limits.max_bytes}")
            # Read one byte past the limit: a file that grows, or a device, cannot slip through.
            payload = handle.read(limits.max_bytes + 1)
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, not an image") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({_reason(exc)})") from exc
    if len(payload) > limits.max_bytes:
        raise DataError(f"{path}: file is over the image limit of {limits.max_bytes} bytes")
    if not payload:
        raise DataError(f"{path}: empty file")
    return payload


def bounded_bytes(payload: bytes, source: str | Path, limits: ImageLimits | None = None) -> bytes:
    """``payload``, an image received in memory (an upload), held to the limits a file is
    (:func:`read_bytes`): DataError naming ``source`` when it is empty or over ``limits.max_bytes``."""
    limits = limits or ImageLimits.from_env()
    if len(payload) > limits.max_bytes:
        raise DataError(f"{source}: file is {len(payload)} bytes, over the image limit of {limits.max_bytes}")
    if not payload:
        raise DataError(f"{source}: empty file")
    return payload


def decode_image(payload: bytes, source: str | Path, limits: ImageLimits | None = None) -> np.ndarray:
    """Decode an image file's bytes as RGB uint8 (H, W, 3); DataError naming ``source``.

    Nothing is decoded before its size is known: the format is told by its signature (the
    one OpenCV would pick, :func:`opencv_format`), its header read for the width, height and
    bytes a sample (:func:`declared_size`), and the pixels, counted at the bytes a sample
    the decoder first builds (a float Radiance HDR or PFM costs four times an 8-bit image),
    checked against ``limits.max_pixels``.  OpenCV decodes what it reads; Pillow decodes the
    rest of the accepted formats (GIF, ICO, TGA).
    """
    limits = limits or ImageLimits.from_env()
    if not payload:
        raise DataError(f"{source}: empty file")
    declared = declared_size(payload, source)
    _check_pixels(source, declared, limits)
    if declared.decoder == "opencv":
        try:
            image = cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_COLOR)
        except cv2.error as exc:
            raise DataError(f"{source}: not a readable image ({_first_line(exc)})") from None
        if image is not None and image.size:
            _check_pixels(source, Declared(image.shape[1], image.shape[0], 1, "opencv"), limits)
            # In place: a second full-size copy would double the peak of a large photo.
            return cv2.cvtColor(image, cv2.COLOR_BGR2RGB, dst=image)
    return _pillow_decode(payload, source)


def read_image(path: str | Path, limits: ImageLimits | None = None) -> np.ndarray:
    """Read an image file as an RGB uint8 array of shape (H, W, 3).

    Raises DataError naming the file when it cannot be read, is empty, is over the size
    or pixel limits (:class:`ImageLimits`, default from the environment) or does not decode.
    """
    limits = limits or ImageLimits.from_env()
    return decode_image(read_bytes(path, limits), path, limits)


@dataclass(frozen=True)
class Declared:
    """What an image's header declares: ``width`` x ``height`` pixels, ``sample_bytes`` a
    sample in the buffer its decoder fills first, and which ``decoder`` reads it ("opencv"
    or "pillow")."""

    width: int
    height: int
    sample_bytes: int
    decoder: str


# OpenCV's decoders as it picks them, by the first bytes (its own signature checks), and
# the Pillow plugin that reads the same header; None: the header is read here.
OPENCV_SIGNATURES: tuple[tuple[str, Callable[[bytes], bool], str | None], ...] = (
    ("BMP", lambda b: b[:2] == b"BM", "BMP"),
    ("HDR", lambda b: b.startswith((b"#?RGBE", b"#?RADIANCE")), None),
    ("JPEG", lambda b: b[:3] == b"\xff\xd8\xff", "JPEG"),
    ("WEBP", lambda b: b[:4] == b"RIFF" and b[8:12] == b"WEBP", "WEBP"),
    ("SUNRASTER", lambda b: b[:4] == b"\x59\xa6\x6a\x95", "SUN"),
    ("PXM", lambda b: len(b) > 2 and b[:1] == b"P" and b[1:2] in b"123456" and b[2:3].isspace(), "PPM"),
    ("PFM", lambda b: len(b) > 2 and b[:2] in (b"PF", b"Pf") and b[2:3].isspace(), None),
    ("TIFF", lambda b: b[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"), "TIFF"),
    ("PNG", lambda b: b[:8] == b"\x89PNG\r\n\x1a\n", "PNG"),
    ("JPEG2000", lambda b: b[:12] == b"\x00\x00\x00\x0cjP  \r\n\x87\n" or b[:4] == b"\xff\x4f\xff\x51", "JPEG2000"),
    ("EXR", lambda b: b[:4] == b"\x76\x2f\x31\x01", None),
    ("PAM", lambda b: len(b) > 2 and b[:2] == b"P7" and b[2:3].isspace(), None),
    ("AVIF", lambda b: b[4:8] == b"ftyp" and b[8:12] in (b"avif", b"avis"), "AVIF"),
    ("GIF", lambda b: b[:6] in (b"GIF87a", b"GIF89a"), "GIF"),
)
# The Pillow plugins that decode the accepted formats OpenCV does not (IMAGE_SUFFIXES); no
# other plugin is asked (some run outside programs, as EPS runs Ghostscript).
PILLOW_ONLY = ("ICO", "TGA")
PILLOW_DECODES = tuple(dict.fromkeys([*(plugin for _, _, plugin in OPENCV_SIGNATURES if plugin), *PILLOW_ONLY]))
# A text header (Radiance HDR, PFM, PAM) longer than this is no image.
MAX_TEXT_HEADER = 64 * 1024


def opencv_format(payload: bytes) -> tuple[str, str | None] | None:
    """The OpenCV decoder that would read ``payload`` (its name, and the Pillow plugin that
    reads its header, or None where :func:`declared_size` reads it), by the signature
    OpenCV checks; None when no OpenCV decoder takes it."""
    for name, matches, plugin in OPENCV_SIGNATURES:
        if matches(payload[:16]):
            return name, plugin
    return None


def declared_size(payload: bytes, source: str | Path) -> Declared:
    """What the header of ``payload`` declares (:class:`Declared`), read without decoding a
    pixel: the Radiance HDR, PFM and PAM text headers here, the others by the Pillow plugin
    of the format OpenCV would decode it as (so that the header read is the one the decoder
    reads).  DataError naming ``source`` when no accepted format has such a header, or the
    format's size cannot be known before decoding (OpenEXR)."""
    found = opencv_format(payload)
    if found is not None:
        name, plugin = found
        if name == "EXR":
            raise DataError(f"{source}: OpenEXR images are not read (their size cannot be checked before decoding)")
        if plugin is None:
            return _text_header(name, payload, source)
        size = _pillow_size(plugin, payload)
        if size is None:
            raise DataError(f"{source}: not a readable image (a {name} header that cannot be read)")
        return Declared(*size, "opencv")
    for plugin in PILLOW_ONLY:
        size = _icon_size(payload) if plugin == "ICO" else _pillow_size(plugin, payload)
        if size is not None:
            return Declared(*size, "pillow")
    raise DataError(f"{source}: not a readable image (truncated, corrupt or of an unknown format)")


def _pillow_size(plugin: str, payload: bytes) -> tuple[int, int, int] | None:
    """(width, height, bytes a sample) as Pillow's ``plugin`` reads the header; None when
    it does not take it.  The plugin is asked directly, as ``Image.open`` does, but without
    its own bomb check, so that the limit and its message stay ours."""
    Image.init()
    if plugin not in Image.OPEN:
        return None
    factory, accept = Image.OPEN[plugin]
    try:
        if accept is not None and not accept(payload[:16]):
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            image = factory(io.BytesIO(payload), "")
            width, height = image.size
            mode = image.mode
    except Exception:  # noqa: BLE001 - plugins refuse a header with many kinds of errors
        return None
    sample = 4 if mode in ("I", "F") or mode.startswith("I;32") else 2 if mode.startswith("I;16") else 1
    bands = Image.getmodebands(mode) if mode in Image.MODES else 3
    if plugin == "JPEG2000":
        # OpenJPEG decodes every component into 4-byte integers before OpenCV's 8-bit image
        # (measured: 15.7 bytes a pixel of an RGB JPEG 2000, against 6 of a JPEG).
        sample = max(sample, -(-(4 * bands + 6) // 6))
    elif plugin == "WEBP" and bands == 4:
        # A WebP with alpha is decoded as 4 channels, then converted (7.2 bytes a pixel).
        sample = max(sample, 2)
    return int(width), int(height), sample


def _icon_size(payload: bytes) -> tuple[int, int, int] | None:
    """(width, height, 1) of the largest image of an ICO file, as each image's own header
    declares it (the icon directory says at most 256 x 256, but each image is a PNG or a
    bitmap of its own size); None when ``payload`` is no icon.  Read here: Pillow's reader
    decodes the largest image as it opens the file."""
    if len(payload) < 6 or payload[:4] != b"\x00\x00\x01\x00":
        return None
    count = struct.unpack("<H", payload[4:6])[0]
    if not 0 < count <= 256 or len(payload) < 6 + 16 * count:
        return None
    largest = (0, 0)
    for number in range(count):
        offset = struct.unpack("<I", payload[6 + 16 * number + 12 : 6 + 16 * number + 16])[0]
        head = payload[offset : offset + 24]
        if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) == 24:
            size = struct.unpack(">II", head[16:24])
        elif len(head) >= 12:
            # A bitmap's info header; its height counts the image and its mask.
            width, height = struct.unpack("<ii", head[4:12])
            size = (abs(width), abs(height))
        else:
            return None
        largest = max(largest, size, key=lambda s: s[0] * s[1])
    return (*largest, 1) if largest[0] and largest[1] else None


def _text_header(name: str, payload: bytes, source: str | Path) -> Declared:
    """The size a Radiance HDR, PFM or PAM header declares (these decode to float32, or to
    16 bits a sample for a PAM of MAXVAL over 255)."""
    head = payload[:MAX_TEXT_HEADER]
    unreadable = DataError(f"{source}: not a readable image (a {name} header that cannot be read)")
    if name == "PFM":
        tokens = head[2:200].split()[:3]
        if len(tokens) < 3:
            raise unreadable
        width, height = (whole_number(t.decode("ascii", "replace"), 0) for t in tokens[:2])
        sample = 4
    elif name == "PAM":
        fields: dict[str, str] = {}
        for line in head.split(b"\n")[1:]:
            words = line.split(b"#", 1)[0].decode("ascii", "replace").split()
            if words == ["ENDHDR"]:
                break
            if len(words) == 2:
                fields[words[0]] = words[1]
        else:
            raise unreadable
        width, height = whole_number(fields.get("WIDTH"), 0), whole_number(fields.get("HEIGHT"), 0)
        maxval = whole_number(fields.get("MAXVAL"), 1)
        sample = 2 if maxval is not None and maxval > 255 else 1
    else:
        lines = head.split(b"\n")
        blank = next((n for n, line in enumerate(lines) if not line.strip()), None)
        if blank is None or blank + 1 >= len(lines):
            raise unreadable
        # The resolution line: "-Y H +X W" (or another order of the axes and signs).
        words = lines[blank + 1].decode("ascii", "replace").split()
        if len(words) != 4 or {words[0][1:], words[2][1:]} != {"X", "Y"} or any(w[:1] not in "+-" for w in words[::2]):
            raise unreadable
        sizes = {words[0][1:]: whole_number(words[1], 0), words[2][1:]: whole_number(words[3], 0)}
        width, height = sizes["X"], sizes["Y"]
        sample = 4
    if width is None or height is None:
        raise unreadable
    return Declared(width, height, sample, "opencv")


def _check_pixels(source: str | Path, declared: Declared, limits: ImageLimits) -> None:
    width, height = declared.width, declared.height
    if width < 1 or height < 1:
        raise DataError(f"{source}: image declares an empty size {width} x {height}")
    cost = width * height * declared.sample_bytes
    if cost > limits.max_pixels:
        samples = f" of {declared.sample_bytes}-byte samples (as many bytes as {cost} 8-bit pixels)"
        raise DataError(
            f"{source}: image declares {width} x {height} pixels{samples if declared.sample_bytes > 1 else ''}, "
            f"over the limit of {limits.max_pixels} ({MAX_PIXELS_ENV})"
        )


def _pillow_decode(payload: bytes, source: str | Path) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(payload), formats=PILLOW_DECODES) as image:
                rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise DataError(f"{source}: not a readable image ({_first_line(exc)})") from None
    if rgb.ndim != 3 or rgb.size == 0:
        raise DataError(f"{source}: not a readable image")
    return np.ascontiguousarray(rgb)


# A Python object as its repr shows it, "<_io.BytesIO object at 0x7f...>": a memory address
# of the process, which no answer gives away.
OBJECT_REPR = re.compile(r"<[^<>]* at 0x[0-9a-fA-F]+>")


def _first_line(exc: BaseException) -> str:
    """The last line of a decoder's message, without an object's repr (its memory address)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return OBJECT_REPR.sub("the data", lines[-1])[:200] if lines else type(exc).__name__
