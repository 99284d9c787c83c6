"""The one crop rule: which detection of a photo is its subject, what a photo without one
becomes, and the record of how many were found and which was used."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reid.detect.base import Detection
from reid.errors import ConfigError, DataError
from reid.gallery import Gallery
from reid.models.encoder import Encoder
from reid.pipeline import EnrolConfig, enrol, plan_enrolment
from reid.pipeline.subject import SubjectRule
from tests.pipeline.pipeline_helpers import write_rgb


class Faces:
    """A face detector that finds the bright squares of an image (none in a flat one)."""

    kind = "face"
    confident_score = None

    def detect(self, image: np.ndarray) -> list[Detection]:
        found = []
        for y in range(0, image.shape[0], 50):
            for x in range(0, image.shape[1], 50):
                block = image[y : y + 50, x : x + 50, 0]
                bright = np.argwhere(block > 200)
                if len(bright):
                    (y0, x0), (y1, x1) = bright.min(axis=0), bright.max(axis=0)
                    found.append(Detection((x + int(x0), y + int(y0), int(x1 - x0) + 1, int(y1 - y0) + 1), 0.9, "face"))
        return found


def photo(*squares: tuple[int, int, int]) -> np.ndarray:
    """A 100x100 grey photo with bright squares (x, y, side)."""
    image = np.full((100, 100, 3), 60, np.uint8)
    for x, y, side in squares:
        image[y : y + side, x : x + side] = 250
    return image


def test_the_largest_is_used_and_the_others_are_counted() -> None:
    subjects = SubjectRule(Faces(), margin=0.0).apply(photo((5, 5, 10), (55, 55, 30)), "group.png")
    assert subjects.found == 2 and subjects.boxes == [(55, 55, 30, 30)] and len(subjects.used) == 1
    assert subjects.crops[0].shape == (30, 30, 3)
    assert subjects.note() == "2 faces found; used the one at box [55, 55, 30, 30]"
    every = SubjectRule(Faces(), margin=0.0, pick="all").apply(photo((5, 5, 10), (55, 55, 30)), "group.png")
    assert every.found == 2 and len(every.crops) == 2 and every.note() is None
    one = SubjectRule(Faces(), margin=0.0).apply(photo((55, 55, 30)), "one.png")
    assert one.found == 1 and one.note() is None


def test_nothing_found_is_whole_skip_or_error_and_never_unreadable() -> None:
    flat = photo()
    whole = SubjectRule(Faces(), none_found="whole").apply(flat, "wall.png")
    assert whole.whole and whole.crops[0] is flat and whole.boxes == [(0, 0, 100, 100)]
    assert whole.note() == "no face found; taken whole"
    skipped = SubjectRule(Faces(), none_found="skip").apply(flat, "wall.png")
    assert skipped.skipped and skipped.found == 0 and skipped.note() == "no face found"
    with pytest.raises(DataError, match=r"^wall.png: no face found$"):
        SubjectRule(Faces(), none_found="error").apply(flat, "wall.png")
    with pytest.raises(ConfigError, match="^no_face 'maybe': choose one of whole, skip, error$"):
        SubjectRule(Faces(), none_found="maybe")
    with pytest.raises(ConfigError, match="pick 'middle'"):
        SubjectRule(Faces(), pick="middle")


def test_no_detector_takes_the_photo_whole() -> None:
    image = photo((5, 5, 10))
    subjects = SubjectRule().apply(image, "x.png")
    assert subjects.whole and subjects.crops[0] is image and subjects.note() is None


def test_enrolment_names_group_photos_and_photos_without_a_face(tmp_path: Path, encoder: Encoder) -> None:
    write_rgb(tmp_path / "people" / "ann" / "group.png", photo((5, 5, 10), (55, 55, 30)))
    write_rgb(tmp_path / "people" / "ann" / "wall.png", photo())
    write_rgb(tmp_path / "people" / "bob" / "1.png", photo((20, 20, 25)))
    outcomes = {}
    for none_found in ("skip", "whole"):
        with Gallery.open_or_create(tmp_path / none_found, encoder.card) as gallery:
            config = EnrolConfig(no_face=none_found)
            report = enrol(gallery, encoder, plan_enrolment([tmp_path / "people"]), config, detector=Faces())
            outcomes[none_found] = report
            assert [Path(p).name for p, _ in report.several_subjects] == ["group.png"]
            assert "2 faces found" in report.several_subjects[0][1]
            assert report.to_dict()["several_subjects"][0]["note"].startswith("2 faces found")
            assert report.unreadable == 0
    skip, whole = outcomes["skip"], outcomes["whole"]
    assert skip.added == 2 and skip.no_detection == 1
    assert [(Path(p).name, reason) for p, reason in skip.skipped] == [("wall.png", "no face found")]
    assert whole.added == 3 and whole.no_detection == 0 and whole.skipped == []
    with Gallery.open_or_create(tmp_path / "error", encoder.card) as gallery:
        with pytest.raises(DataError, match=r"wall.png: no face found"):
            enrol(gallery, encoder, plan_enrolment([tmp_path / "people"]), EnrolConfig(no_face="error"), detector=Faces())
