"""The generic identity-folder layout: ``ROOT/<identity>/<image>``.

Either ROOT holds identity folders directly (everything is training data, and an
evaluation split is derived: per identity with two or more images, the first image of
each camera, at most two, becomes a query and the rest the gallery), or ROOT holds
``train/``, ``query/`` and ``gallery/``, each in identity layout.

A camera token in the file name (``c3``, ``cam3``, ``camera3``, delimited by ``_``, ``-``
or ``.``) gives the camera.  Without one, every image is taken as its own view, so the
Market-1501 rule "same identity and same camera is not a match" removes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from reid.data.io import is_image_file
from reid.data.records import ImageRecord, ReidDataset
from reid.errors import DataError

CAMERA_TOKEN = re.compile(r"(?:^|[_\-.])(?:c|cam|camera)(\d+)(?=[_\-.]|$)", re.IGNORECASE)


def camera_from_name(name: str) -> int | None:
    match = CAMERA_TOKEN.search(Path(name).stem)
    return int(match.group(1)) if match else None


def _read_identity_tree(root: Path, pids: dict[str, int], next_view: list[int]) -> list[ImageRecord]:
    identity_dirs = sorted(p for p in root.iterdir() if p.is_dir())
    if not identity_dirs:
        raise DataError(f"{root}: no identity folders (expected ROOT/<identity>/<image>)")
    records = []
    for folder in identity_dirs:
        pid = pids.setdefault(folder.name, len(pids) + 1)
        for path in sorted(folder.iterdir()):
            if not is_image_file(path):
                continue
            camera = camera_from_name(path.name)
            if camera is None:
                camera = next_view[0]
                next_view[0] += 1
            records.append(ImageRecord(path, pid, camera))
    if not records:
        raise DataError(f"{root}: identity folders hold no images")
    return records


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
    split_dirs = [root / name for name in ("train", "query", "gallery")]
    if all(d.is_dir() for d in split_dirs):
        train, query, gallery = (_read_identity_tree(d, pids, next_view) for d in split_dirs)
        return ReidDataset("folder", root, train, query, gallery)
    records = _read_identity_tree(root, pids, next_view)
    query, gallery = _derive_eval_split(records)
    return ReidDataset("folder", root, records, query, gallery)
