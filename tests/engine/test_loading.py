"""Decoding training images once: face photos become aligned chips by the one crop rule."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import cv2

from reid.data import ImageRecord, read_image
from reid.detect import build_detector
from reid.detect.align import align_face
from reid.detect.base import largest_detection
from reid.engine.loading import load_images
from reid.errors import DataError
from reid.pipeline.subject import SubjectRule


def face_records(orl_faces: Path, root: Path) -> list[ImageRecord]:
    """Two ORL photos of each of two people, then one photo holding no face."""
    records = []
    for pid, subject in enumerate((4, 9)):
        for shot in (1, 2):
            path = root / f"s{subject}_{shot}.pgm"
            shutil.copyfile(orl_faces / f"s{subject}" / f"{shot}.pgm", path)
            records.append(ImageRecord(path, pid, 0))
    blank = root / "blank.png"
    cv2.imwrite(str(blank), np.full((112, 92, 3), 128, np.uint8))
    records.append(ImageRecord(blank, 2, 0))
    return records


def test_face_photos_are_cut_to_aligned_chips_and_a_faceless_one_skipped(orl_faces: Path, tmp_path: Path) -> None:
    records = face_records(orl_faces, tmp_path)
    detector = build_detector("yunet", "face")
    rule = SubjectRule(detector, none_found="skip", align_to=(64, 64))
    images, kept, failed, unfound = load_images(records, (64, 64), subject=rule)
    assert images.shape == (4, 3, 64, 64) and kept == [0, 1, 2, 3]
    assert unfound == 1 and failed == [(records[4].path, f"{records[4].path}: no face found")]
    for i, record in enumerate(records[:4]):
        photo = read_image(record.path)
        best = largest_detection(detector.detect(photo))
        assert best is not None and len(best.landmarks) == 5
        chip = align_face(photo, best.landmarks, (64, 64))
        np.testing.assert_array_equal(images[i].permute(1, 2, 0).numpy(), chip)
    # A plain decode of the same photos is the whole photo resized: not the chip.
    plain, _, _, _ = load_images(records[:4], (64, 64))
    assert not np.array_equal(plain.numpy(), images.numpy())


def test_faceless_photos_taken_whole_or_an_error(orl_faces: Path, tmp_path: Path) -> None:
    records = face_records(orl_faces, tmp_path)
    detector = build_detector("yunet", "face")
    images, kept, failed, unfound = load_images(records, (64, 64), subject=SubjectRule(detector, none_found="whole", align_to=(64, 64)))
    assert kept == [0, 1, 2, 3, 4] and failed == [] and unfound == 1
    assert (images[4] == 128).all()
    with pytest.raises(DataError, match="blank.png: no face found"):
        load_images(records, (64, 64), subject=SubjectRule(detector, none_found="error", align_to=(64, 64)))
