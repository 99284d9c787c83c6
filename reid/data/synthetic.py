"""The built-in synthetic person set, drawn deterministically from a seed.

Each identity has a fixed appearance (clothing colours and patterns, body proportions,
hair, accessories) drawn from small palettes, so identities are distinctive but share
attributes and are easy to confuse.  Each identity is seen by a few of the cameras; a
camera changes illumination, colour cast, scale, blur, viewpoint (front, back, side) and
background, and some views are partly occluded.  The set is written to disk in the
Market-1501 layout so that it is read by the same reader as the real data.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

from reid.data.market import MarketLayout
from reid.errors import DataError
from reid.paths import TEMP_MARK, fsync_dir, open_new, process_running, write_bytes_atomic

HEIGHT, WIDTH = 128, 64

# Clothing palette in RGB: several pairs are deliberately close (navy/blue, red/maroon ...).
CLOTHES = np.array(
    [
        (200, 30, 30), (120, 20, 30), (30, 60, 170), (20, 30, 90), (40, 140, 60),
        (20, 80, 40), (230, 200, 40), (240, 240, 235), (30, 30, 30), (128, 128, 128),
        (150, 90, 40), (230, 120, 30), (140, 50, 150), (240, 150, 180), (60, 170, 190),
        (190, 180, 140),
    ],
    dtype=np.float32,
)
SKIN = np.array([(240, 200, 170), (210, 160, 120), (160, 110, 70), (100, 65, 40)], dtype=np.float32)
HAIR = np.array([(20, 15, 10), (90, 55, 25), (200, 170, 90), (140, 140, 140)], dtype=np.float32)
PATTERNS = ("solid", "hstripes", "vstripes", "checker", "split", "logo")
ACCESSORIES = ("none", "bag", "backpack", "hat", "scarf")
BOTTOMS = ("trousers", "shorts", "skirt")


@dataclass(frozen=True)
class SyntheticConfig:
    """Sizes of the generated set; the defaults make the demo's set."""

    seed: int = 0
    train_ids: int = 100
    test_ids: int = 100
    cameras: int = 6
    cameras_per_id: tuple[int, int] = (2, 4)
    images_per_camera: tuple[int, int] = (2, 4)
    distractors: int = 60
    junk: int = 20


@dataclass(frozen=True)
class Identity:
    top: int
    top2: int
    pattern: str
    bottom: int
    bottom_kind: str
    shoes: int
    skin: int
    hair: int
    long_hair: bool
    long_sleeves: bool
    accessory: str
    accessory_color: int
    height: float
    width: float
    leg_ratio: float


@dataclass(frozen=True)
class Camera:
    gain: float
    cast: tuple[float, float, float]
    background: tuple[int, int, int]
    texture: str
    blur: float
    scale: float
    view: str


def _identity(rng: np.random.Generator) -> Identity:
    top, top2 = rng.choice(len(CLOTHES), size=2, replace=False)
    return Identity(
        top=int(top),
        top2=int(top2),
        pattern=str(rng.choice(PATTERNS)),
        bottom=int(rng.integers(len(CLOTHES))),
        bottom_kind=str(rng.choice(BOTTOMS, p=(0.6, 0.25, 0.15))),
        shoes=int(rng.integers(len(CLOTHES))),
        skin=int(rng.integers(len(SKIN))),
        hair=int(rng.integers(len(HAIR))),
        long_hair=bool(rng.random() < 0.3),
        long_sleeves=bool(rng.random() < 0.5),
        accessory=str(rng.choice(ACCESSORIES, p=(0.35, 0.2, 0.2, 0.15, 0.1))),
        accessory_color=int(rng.integers(len(CLOTHES))),
        height=float(rng.uniform(0.86, 1.0)),
        width=float(rng.uniform(0.85, 1.15)),
        leg_ratio=float(rng.uniform(0.42, 0.54)),
    )


def _camera(rng: np.random.Generator, index: int) -> Camera:
    views = ("front", "back", "side")
    return Camera(
        gain=float(rng.uniform(0.6, 1.3)),
        cast=tuple(float(c) for c in rng.uniform(0.8, 1.2, size=3)),
        background=tuple(int(c) for c in rng.integers(40, 220, size=3)),
        texture=str(rng.choice(("gradient", "noise", "tiles", "stripes"))),
        blur=float(rng.uniform(0.0, 1.4)),
        scale=float(rng.uniform(0.72, 0.95)),
        view=views[index % len(views)],
    )


def _background(cam: Camera, rng: np.random.Generator) -> np.ndarray:
    base = np.array(cam.background, dtype=np.float32)
    img = np.empty((HEIGHT, WIDTH, 3), dtype=np.float32)
    img[:] = base
    if cam.texture == "gradient":
        img *= np.linspace(0.7, 1.2, HEIGHT, dtype=np.float32)[:, None, None]
    elif cam.texture == "noise":
        img += rng.normal(0, 15, size=(HEIGHT // 8, WIDTH // 8, 3)).repeat(8, 0).repeat(8, 1)
    elif cam.texture == "tiles":
        tiles = ((np.arange(HEIGHT)[:, None] // 16 + np.arange(WIDTH)[None, :] // 16) % 2).astype(np.float32)
        img *= (0.8 + 0.3 * tiles)[:, :, None]
    else:
        img[(np.arange(HEIGHT) // 10) % 2 == 0] *= 0.75
    offset = int(rng.integers(-6, 7))
    return np.roll(img, offset, axis=1)


def _fill_pattern(canvas: np.ndarray, mask: np.ndarray, ident: Identity, box: tuple[int, int, int, int]) -> None:
    """Paint the upper garment inside ``mask`` with the identity's pattern."""
    x0, y0, x1, y1 = box
    c1, c2 = CLOTHES[ident.top], CLOTHES[ident.top2]
    ys, xs = np.mgrid[0:HEIGHT, 0:WIDTH]
    if ident.pattern == "solid":
        second = np.zeros_like(mask)
    elif ident.pattern == "hstripes":
        second = ((ys - y0) // 4) % 2 == 1
    elif ident.pattern == "vstripes":
        second = ((xs - x0) // 4) % 2 == 1
    elif ident.pattern == "checker":
        second = (((ys - y0) // 5 + (xs - x0) // 5) % 2) == 1
    elif ident.pattern == "split":
        second = ys > (y0 + y1) // 2
    else:
        cx, cy = (x0 + x1) // 2, y0 + (y1 - y0) // 3
        second = (np.abs(xs - cx) < max(2, (x1 - x0) // 6)) & (np.abs(ys - cy) < max(2, (y1 - y0) // 6))
    canvas[mask] = c1
    canvas[mask & second] = c2


def render_person(ident: Identity, cam: Camera, rng: np.random.Generator) -> np.ndarray:
    """Draw one view of an identity as an RGB uint8 image of 128x64."""
    img = _background(cam, rng)
    scale = cam.scale * ident.height * rng.uniform(0.93, 1.05)
    body_h = HEIGHT * scale
    top_y = (HEIGHT - body_h) * rng.uniform(0.2, 0.8)
    cx = WIDTH / 2 + rng.uniform(-5, 5)
    side = cam.view == "side" or (cam.view != "side" and rng.random() < 0.15)
    half_w = WIDTH * 0.3 * ident.width * (0.75 if side else 1.0)

    head_h = body_h * 0.14
    torso_h = body_h * (1.0 - ident.leg_ratio) - head_h
    leg_h = body_h * ident.leg_ratio
    y_head, y_torso = top_y, top_y + head_h
    y_legs = y_torso + torso_h
    y_feet = y_legs + leg_h

    def rect(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
        mask = np.zeros((HEIGHT, WIDTH), dtype=bool)
        mask[max(0, int(y0)) : max(0, int(y1)), max(0, int(x0)) : max(0, int(x1))] = True
        return mask

    view_back = cam.view == "back"
    # Arms first, so the torso covers their inner edge.
    arm_w = half_w * 0.35
    arm_color = CLOTHES[ident.top] if ident.long_sleeves else SKIN[ident.skin]
    swing = rng.uniform(-3, 3)
    for sign in (-1, 1):
        if side and sign == -1:
            continue
        x = cx + sign * (half_w + arm_w * 0.5)
        img[rect(x - arm_w / 2 + swing * sign, y_torso + 2, x + arm_w / 2 + swing * sign, y_legs + torso_h * 0.15)] = arm_color

    torso_box = (int(cx - half_w), int(y_torso), int(cx + half_w), int(y_legs))
    _fill_pattern(img, rect(*torso_box), ident, torso_box)
    if ident.accessory == "scarf":
        img[rect(cx - half_w, y_torso, cx + half_w, y_torso + torso_h * 0.15)] = CLOTHES[ident.accessory_color]

    leg_gap = rng.uniform(0.5, 3.0)
    bottom = CLOTHES[ident.bottom]
    if ident.bottom_kind == "skirt":
        img[rect(cx - half_w * 1.1, y_legs, cx + half_w * 1.1, y_legs + leg_h * 0.45)] = bottom
        img[rect(cx - half_w * 0.8, y_legs + leg_h * 0.45, cx - leg_gap, y_feet)] = SKIN[ident.skin]
        img[rect(cx + leg_gap, y_legs + leg_h * 0.45, cx + half_w * 0.8, y_feet)] = SKIN[ident.skin]
    else:
        cut = 0.45 if ident.bottom_kind == "shorts" else 1.0
        for x0, x1 in ((cx - half_w * 0.9, cx - leg_gap), (cx + leg_gap, cx + half_w * 0.9)):
            img[rect(x0, y_legs, x1, y_legs + leg_h * cut)] = bottom
            if cut < 1.0:
                img[rect(x0 + 1, y_legs + leg_h * cut, x1 - 1, y_feet)] = SKIN[ident.skin]
    img[rect(cx - half_w * 0.95, y_feet - leg_h * 0.08, cx + half_w * 0.95, y_feet)] = CLOTHES[ident.shoes]

    head_c = (int(cx), int(y_head + head_h / 2))
    axes = (max(2, int(half_w * 0.55)), max(2, int(head_h / 2)))
    face = SKIN[ident.skin] if not view_back else HAIR[ident.hair]
    img_u8 = np.clip(img, 0, 255).astype(np.uint8)
    cv2.ellipse(img_u8, head_c, axes, 0, 0, 360, tuple(int(v) for v in face), -1)
    cv2.ellipse(img_u8, head_c, axes, 0, 180, 360, tuple(int(v) for v in HAIR[ident.hair]), -1)
    if ident.long_hair:
        cv2.rectangle(
            img_u8,
            (head_c[0] - axes[0], head_c[1]),
            (head_c[0] + axes[0], int(y_torso + torso_h * 0.3)),
            tuple(int(v) for v in HAIR[ident.hair]),
            -1 if view_back else 2,
        )
    acc = tuple(int(v) for v in CLOTHES[ident.accessory_color])
    if ident.accessory == "hat":
        cv2.rectangle(img_u8, (head_c[0] - axes[0] - 2, int(y_head) - 2), (head_c[0] + axes[0] + 2, head_c[1] - 1), acc, -1)
    elif ident.accessory == "bag":
        bx = int(cx + half_w + arm_w) if not view_back else int(cx - half_w - arm_w - 8)
        cv2.rectangle(img_u8, (bx, int(y_legs - 6)), (bx + 8, int(y_legs + 8)), acc, -1)
        cv2.line(img_u8, (bx + 4, int(y_legs - 6)), (int(cx), int(y_torso + 2)), acc, 1)
    elif ident.accessory == "backpack":
        if view_back:
            cv2.rectangle(img_u8, (int(cx - half_w * 0.7), int(y_torso + 3)), (int(cx + half_w * 0.7), int(y_legs - 4)), acc, -1)
        else:
            for sign in (-1, 1):
                x = int(cx + sign * half_w * 0.5)
                cv2.line(img_u8, (x, int(y_torso + 1)), (x, int(y_torso + torso_h * 0.5)), acc, 2)

    out = img_u8.astype(np.float32)
    if rng.random() < 0.25:
        # Partial occlusion: a pole, a car or another passer-by covering part of the body.
        oh, ow = int(HEIGHT * rng.uniform(0.15, 0.4)), int(WIDTH * rng.uniform(0.25, 0.6))
        oy, ox = int(rng.integers(HEIGHT // 3, HEIGHT - oh + 1)), int(rng.integers(0, WIDTH - ow + 1))
        out[oy : oy + oh, ox : ox + ow] = rng.integers(30, 220, size=3)
    out *= cam.gain * rng.uniform(0.85, 1.15)
    out *= np.array(cam.cast, dtype=np.float32)
    blur = cam.blur + rng.uniform(0, 0.6)
    if blur > 0.3:
        out = cv2.GaussianBlur(out, (0, 0), blur)
    out += rng.normal(0, 4, size=out.shape)
    return np.clip(out, 0, 255).astype(np.uint8)


def _write(path: Path, image: np.ndarray) -> None:
    ok, payload = cv2.imencode(".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 92])
    if not ok:
        raise OSError(f"{path}: JPEG encoding failed")
    with open_new(path) as handle:
        handle.write(payload.tobytes())


STAMP_FILE = "synthetic.json"
# Written first into a set being generated, so that a leftover of a killed run is known
# as the program's own before it is removed.
BUILDING_MARK = ".synthetic-building"


def _read_stamp(root: Path) -> dict | None:
    """The stamp of a set this program wrote under ``root`` (``config`` and ``files``),
    None when there is none or it is not one (a stamp of an older version lists no files)."""
    stamp = root / STAMP_FILE
    try:
        if not stamp.is_file() or stamp.is_symlink() or stamp.stat().st_size > MAX_STAMP_BYTES:
            return None
        content = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(content, dict):
        return None
    if "config" not in content:
        # An older stamp holds the config alone: the set can be reused, never rewritten.
        return {"config": content, "files": None}
    files = content.get("files")
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        return None
    return content


# A stamp lists every file of the set; a million names fit easily.
MAX_STAMP_BYTES = 64 << 20


def _foreign_entry(root: Path, files: list[str] | None) -> Path | None:
    """The first entry under ``root`` that a set with these ``files`` did not write (None
    when everything there is the program's own); with ``files`` None, ``root`` itself
    unless it is empty."""
    owned = set(files or ()) | {STAMP_FILE}
    folders = {Path(name).parent.as_posix() for name in owned} - {"."}
    pending = [root]
    while pending:
        folder = pending.pop()
        for entry in sorted(folder.iterdir()):
            name = entry.relative_to(root).as_posix()
            if files is None:
                return entry
            if entry.is_dir() and not entry.is_symlink() and name in folders:
                pending.append(entry)
            elif name not in owned or entry.is_symlink() or not entry.is_file():
                return entry
    return None


def _remove_own(root: Path, files: list[str]) -> None:
    """Delete a previous set's files (checked by :func:`_foreign_entry` to be all there
    is), its folders and ``root`` itself."""
    for name in files:
        (root / name).unlink(missing_ok=True)
    (root / STAMP_FILE).unlink(missing_ok=True)
    for folder in sorted({(root / name).parent for name in files}, key=lambda p: len(p.parts), reverse=True):
        if folder != root:
            folder.rmdir()
    root.rmdir()


def _remove_stale_builds(root: Path) -> None:
    """Remove leftovers of generations into ``root`` whose process died (named
    ``.ROOT.tmp-PID`` and holding :data:`BUILDING_MARK`)."""
    if not root.parent.is_dir():
        return
    for leftover in root.parent.glob(f".{glob.escape(root.name)}{TEMP_MARK}*"):
        pid = leftover.name.rpartition(TEMP_MARK)[2]
        if (
            pid.isdigit() and not process_running(int(pid)) and leftover.is_dir() and not leftover.is_symlink()
            and (leftover / BUILDING_MARK).is_file()
        ):
            shutil.rmtree(leftover)


def generate_synthetic(root: Path, config: SyntheticConfig = SyntheticConfig()) -> Path:
    """Write the synthetic set under ``root`` in Market-1501 layout and return ``root``.

    The same config always produces the same files; an existing set with the same config
    is reused rather than rewritten.  The set is generated beside ``root`` and renamed into
    place, so ``root`` holds a whole set or none.  ``root`` must be new, empty, or hold
    only a set this program wrote (which a different config replaces).

    Raises:
        DataError: ``root`` holds anything else (a real data set, say); nothing is
            deleted or written then.
    """
    root = Path(root)
    wanted = asdict(config)
    stamp = _read_stamp(root)
    if stamp is not None and stamp["config"] == json.loads(json.dumps(wanted)):
        return root
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise DataError(f"{root}: the synthetic set needs a folder of its own here; this is a file or a link")
    files = stamp["files"] if stamp is not None else None
    if root.is_dir():
        foreign = _foreign_entry(root, files)
        if foreign is not None:
            raise DataError(
                f"{root}: holds {foreign.relative_to(root)}, which the synthetic set did not write; "
                "synthetic data is generated only into a new or empty folder: choose another one "
                "(or read a real set with market1501:PATH, folder:PATH ...)"
            )
    _remove_stale_builds(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    build = root.with_name(f".{root.name}{TEMP_MARK}{os.getpid()}")
    if build.exists() or build.is_symlink():
        raise DataError(f"{build}: a folder of this process is in the way of the synthetic set")
    build.mkdir()
    try:
        (build / BUILDING_MARK).touch()
        written = _write_set(build, config)
        write_bytes_atomic(build / STAMP_FILE, json.dumps({"config": wanted, "files": written}, sort_keys=True).encode())
        (build / BUILDING_MARK).unlink()
        if root.is_dir():
            _remove_own(root, files or [])
        os.rename(build, root)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    fsync_dir(root.parent)
    return root


def _write_set(root: Path, config: SyntheticConfig) -> list[str]:
    """Render and write every image of the set under ``root``; returns their names
    relative to ``root``, in the order written."""
    layout = MarketLayout(root)
    for folder in (layout.train_dir, layout.query_dir, layout.gallery_dir):
        folder.mkdir()
    written: list[str] = []

    def write(path: Path, image: np.ndarray) -> None:
        _write(path, image)
        written.append(path.relative_to(root).as_posix())

    rng = np.random.default_rng(config.seed)
    cameras = [_camera(rng, i) for i in range(config.cameras)]
    total = config.train_ids + config.test_ids
    for pid in range(1, total + 1):
        ident = _identity(rng)
        is_train = pid <= config.train_ids
        n_cams = int(rng.integers(config.cameras_per_id[0], config.cameras_per_id[1] + 1))
        cams = sorted(rng.choice(config.cameras, size=min(n_cams, config.cameras), replace=False))
        for order, cam in enumerate(cams):
            n_images = int(rng.integers(config.images_per_camera[0], config.images_per_camera[1] + 1))
            for k in range(n_images):
                image = render_person(ident, cameras[cam], rng)
                name = f"{pid:04d}_c{cam + 1}s1_{pid * 100 + k:06d}_{k:02d}.jpg"
                if is_train:
                    folder = layout.train_dir
                elif k == 0 and order < 2:
                    # Query from two of the identity's cameras; the rest is gallery.
                    folder = layout.query_dir
                else:
                    folder = layout.gallery_dir
                write(folder / name, image)

    for i in range(config.distractors):
        cam = int(rng.integers(config.cameras))
        write(layout.gallery_dir / f"0000_c{cam + 1}s1_{900000 + i:06d}_00.jpg", render_person(_identity(rng), cameras[cam], rng))
    for i in range(config.junk):
        cam = int(rng.integers(config.cameras))
        junk = _background(cameras[cam], rng)
        write(layout.gallery_dir / f"-1_c{cam + 1}s1_{950000 + i:06d}_00.jpg", np.clip(junk, 0, 255).astype(np.uint8))
    return written
