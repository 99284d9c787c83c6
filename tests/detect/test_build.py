"""``build_detector``: the one place detector names are read."""

from __future__ import annotations

import pytest

from reid.detect import (
    DEFAULT_DETECTORS,
    FaceDetector,
    PersonDetector,
    PersonDetectorConfig,
    SSDLiteConfig,
    YuNetDetector,
    build_detector,
    detector_kind,
    detector_names,
)
from reid.detect.build import parse_detector
from reid.detect.names import DETECTOR_ARTEFACTS
from reid.errors import ConfigError


def test_names_and_kinds() -> None:
    assert detector_names("person") == [
        "bytetrack-nano", "yolox-nano", "yolox-tiny", "yolox-s", "person-detection-retail-0013",
        "pedestrian-detection-adas-0002", "pedestrian", "hog", "ssdlite", "yolo:FILE.onnx",
    ]
    assert detector_names("face") == ["haar", "yunet"]
    assert DEFAULT_DETECTORS["face"] == ("haar",) and DEFAULT_DETECTORS["person"][-1] == "pedestrian"
    assert detector_kind("yunet") == "face" and detector_kind("yolo:any.onnx") == "person"
    assert detector_kind("bytetrack-nano") == detector_kind("yolox-s:any.onnx") == "person"
    # This session's cache holds no person detector's model: the person default falls back to hog.
    assert isinstance(build_detector(None, "person"), PersonDetector)
    assert isinstance(build_detector(None, "face"), FaceDetector)
    assert isinstance(build_detector("yunet"), YuNetDetector)


def test_a_detector_of_the_other_kind_is_refused() -> None:
    with pytest.raises(ConfigError, match="haar finds faces, not persons; for persons choose one of bytetrack-nano, yolox-nano"):
        build_detector("haar", "person")
    with pytest.raises(ConfigError, match="unknown detector kind 'car'"):
        build_detector(None, "car")
    with pytest.raises(ConfigError, match="name a detector"):
        build_detector(None)


def test_unknown_names_list_the_choices() -> None:
    person = (
        "bytetrack-nano, yolox-nano, yolox-tiny, yolox-s, person-detection-retail-0013, pedestrian-detection-adas-0002, "
        "pedestrian, hog, ssdlite, yolo:FILE.onnx"
    )
    with pytest.raises(ConfigError, match=f"^detector 'yolox': not a detector; choose one of {person}, haar, yunet"):
        build_detector("yolox")
    with pytest.raises(ConfigError, match=r"^detector yolo needs your ONNX file, as yolo:FILE\.onnx$"):
        build_detector("yolo")
    with pytest.raises(ConfigError, match="needs the ONNX file"):
        build_detector("yolo:")
    with pytest.raises(ConfigError, match="^detector 'YOLO:FILE.ONNX': not a detector"):
        build_detector("YOLO:FILE.ONNX")


def test_the_registry_artefact_names_a_detector_too() -> None:
    """``reid models list/fetch`` name artefacts: --detector takes those names for the
    detector that runs each."""
    assert parse_detector("yolox_nano.coco")[0].name == "yolox-nano"
    assert parse_detector("bytetrack_nano.mot17")[0].name == "bytetrack-nano"
    assert parse_detector("yolox_s.coco")[0].name == "yolox-s"
    assert parse_detector("ssdlite_mobilenet_v2.voc-person")[0].name == "pedestrian"
    assert parse_detector("yolox_tiny.coco:mine.onnx") == (parse_detector("yolox-tiny")[0], "mine.onnx")
    for artefact, name in DETECTOR_ARTEFACTS.items():
        assert artefact in parse_detector(name)[0].models


def test_only_the_chosen_detectors_settings_are_used() -> None:
    detector = build_detector("hog", "person", [SSDLiteConfig(min_height=40), PersonDetectorConfig(win_stride=4)])
    assert isinstance(detector, PersonDetector) and detector.config.win_stride == 4
    with pytest.raises(ConfigError, match="str is no detector setting"):
        build_detector("hog", "person", ["win_stride=4"])
