"""The generic identity-folder layout: ``ROOT/<identity>/<image>``.

Either ROOT holds identity folders directly (everything is training data, and an
evaluation split is derived: per identity with two or more images, the first image of
each camera, at most two, becomes a query and the rest the gallery), or ROOT holds
``train/``, ``query/`` and ``gallery/``, each in identity layout.

A camera token in the file name (:func:`reid.data.cameras.camera_from_name`: ``c3``,
``cam3``, ``camera3``, Market-1501's ``c3s1``) gives the camera.  Without one, every image
is taken as its own view, so the Market-1501 rule "same identity and same camera is not a
match" removes nothing, and the dataset says so (``cameras_known``).

Hidden and system entries are not identities or images; every entry not taken (those,
files of other kinds, loose files, unreadable folders and links) is listed in ``skipped``.
"""

from __future__ import annotations

from pathlib import Path

from reid.data.cameras import camera_from_name
from reid.data.io import entry_kind, is_ignored, list_media
from reid.data.records import ImageRecord, ReidDataset
from reid.errors import DataError


def identity_folders(root: Path, skipped: list[tuple[Path, str]]) -> list[Path]:
    """The identity sub-folders of ``root``, sorted; every other entry goes to ``skipped``."""
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:
        raise DataError(f"{root}: cannot list folder ({exc.strerror or exc})") from None
    folders = []
    for path in entries:
        if is_ignored(path):
            skipped.append((path, "hidden or system entry, not data"))
            continue
        kind = entry_kind(path)
        if kind == "folder":
            folders.append(path)
        elif kind == "file":
            skipped.append((path, "file outside the identity folders"))
        else:
            skipped.append((path, kind))
    return folders


def _read_identity_tree(
    root: Path, pids: dict[str, int], next_view: list[int], skipped: list[tuple[Path, str]]
) -> tuple[list[ImageRecord], bool]:
    """Records of ``root/<identity>/...`` and whether every one carried a camera token."""
    folders = identity_folders(root, skipped)
    if not folders:
        raise DataError(f"{root}: no identity folders (expected ROOT/<identity>/<image>)")
    records = []
    all_cameras = True
    for folder in folders:
        listing = list_media(folder)
        skipped += listing.skipped
        if not listing.files:
            continue
        pid = pids.setdefault(folder.name, len(pids) + 1)
        for path in listing.files:
            camera = camera_from_name(path.name)
            if camera is None:
                all_cameras = False
                camera = next_view[0]
                next_view[0] += 1
            records.append(ImageRecord(path, pid, camera))
    if not records:
        raise DataError(f"{root}: identity folders hold no images")
    return records, all_cameras


def _derive_eval_split(records: list[ImageRecord]) -> tuple[list[ImageRecord], list[ImageRecord]]:
    query, gallery = [], []
    by_pid: dict[int, list[ImageRecord]] = {}
    for record in records:
        by_pid.setdefault(record.pid, []).append(record)
    for items in by_pid.values():
        if len(items) < 2:
            gallery.extend(items)
            continue
        seen_cams: set[int] = set()
        for record in items:
            if record.camid not in seen_cams and len(seen_cams) < 2 and len(items) - len(seen_cams) > 1:
                seen_cams.add(record.camid)
                query.append(record)
            else:
                gallery.append(record)
    return query, gallery


def read_identity_folders(root: Path) -> ReidDataset:
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root}: dataset folder not found")
    pids: dict[str, int] = {}
    next_view = [10_000]
    skipped: list[tuple[Path, str]] = []
    split_dirs = [root / name for name in ("train", "query", "gallery")]
    if all(d.is_dir() for d in split_dirs):
        (train, _), (query, query_cams), (gallery, gallery_cams) = (
            _read_identity_tree(d, pids, next_view, skipped) for d in split_dirs
        )
        return ReidDataset("folder", root, train, query, gallery, query_cams and gallery_cams, skipped)
    records, cameras = _read_identity_tree(root, pids, next_view, skipped)
    query, gallery = _derive_eval_split(records)
    return ReidDataset("folder", root, records, query, gallery, cameras, skipped)
