"""Detector names (``--detector``) and the one function that turns them into detectors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reid.detect.base import Detector
from reid.detect.opencv import FaceDetector, FaceDetectorConfig, PersonDetector, PersonDetectorConfig
from reid.detect.ssdlite import SSDLiteConfig, SSDLiteDetector
from reid.detect.yolo import YoloConfig, YoloDetector
from reid.detect.yunet import YuNetConfig, YuNetDetector
from reid.errors import ConfigError

DETECTOR_KINDS = ("person", "face")
# What each kind runs when no detector is named: the detectors that need nothing installed.
DEFAULT_DETECTORS = {"person": "hog", "face": "haar"}
YOLO_PREFIX = "yolo:"

DETECTOR_CONFIGS = (PersonDetectorConfig, FaceDetectorConfig, SSDLiteConfig, YoloConfig, YuNetConfig)


@dataclass(frozen=True)
class DetectorName:
    """One ``--detector`` name: what it finds, its options' type and what it needs."""

    name: str
    kind: str
    config: type
    needs: str


DETECTORS = {
    entry.name: entry
    for entry in (
        DetectorName("hog", "person", PersonDetectorConfig, "OpenCV's HOG people detector (built in)"),
        DetectorName("ssdlite", "person", SSDLiteConfig, "SSDLite-MobileNetV2 (`reid models fetch` once)"),
        DetectorName("yolo:FILE.onnx", "person", YoloConfig, "your YOLOv5/v8/11/X ONNX export (reid[onnx])"),
        DetectorName("haar", "face", FaceDetectorConfig, "OpenCV's Haar face cascade (built in)"),
        DetectorName("yunet", "face", YuNetConfig, "YuNet with five landmarks (reid[faces])"),
    )
}


def detector_names(kind: str | None = None) -> list[str]:
    """The ``--detector`` names, of one kind or all."""
    return [n.name for n in DETECTORS.values() if kind is None or n.kind == kind]


def parse_detector(spec: str) -> tuple[DetectorName, str]:
    """The entry of a ``--detector`` value and its argument (the ONNX file of ``yolo:``)."""
    if spec.startswith(YOLO_PREFIX):
        path = spec[len(YOLO_PREFIX) :]
        if not path:
            raise ConfigError("--detector yolo: needs the ONNX file, as yolo:FILE.onnx")
        return DETECTORS["yolo:FILE.onnx"], path
    if spec in DETECTORS and spec != "yolo:FILE.onnx":
        return DETECTORS[spec], ""
    raise ConfigError(f"unknown detector {spec!r}; choose one of {', '.join(detector_names())}")


def detector_kind(spec: str) -> str:
    """What a ``--detector`` name finds: "person" or "face"."""
    return parse_detector(spec)[0].kind


def check_detector(spec: str | None, kind: str | None = None) -> tuple[DetectorName, str]:
    """The entry and argument ``spec`` names, checked against ``kind`` (see
    :func:`build_detector`) without building anything; raises ConfigError."""
    if kind is not None and kind not in DETECTOR_KINDS:
        raise ConfigError(f"unknown detector kind {kind!r}; choose one of {', '.join(DETECTOR_KINDS)}")
    if spec is None:
        if kind is None:
            raise ConfigError("name a detector or the kind of thing to detect (person or face)")
        spec = DEFAULT_DETECTORS[kind]
    entry, argument = parse_detector(spec)
    if kind is not None and entry.kind != kind:
        raise ConfigError(
            f"--detector {spec} finds {entry.kind}s, not {kind}s; for {kind}s choose one of {', '.join(detector_names(kind))}"
        )
    return entry, argument


def build_detector(spec: str | None, kind: str | None = None, options: Sequence[Any] = ()) -> Detector:
    """The detector a ``--detector`` value names: ``hog``, ``ssdlite``, ``yolo:FILE.onnx``
    (people), ``haar``, ``yunet`` (faces); None picks the default of ``kind``
    (:data:`DEFAULT_DETECTORS`).

    ``kind`` ("person" or "face"), when given, must be what the detector finds.
    ``options``: settings for any of the detectors (PersonDetectorConfig for hog,
    FaceDetectorConfig for haar, SSDLiteConfig, YoloConfig, YuNetConfig); the one for the
    chosen detector is used, the others are ignored.  Raises ConfigError for an unknown
    name, a kind mismatch or two settings of one type, and ModelError (one line naming the
    extra to install or the ``reid models fetch`` command) when the detector's package or
    model is missing.
    """
    entry, argument = check_detector(spec, kind)
    by_type: dict[type, Any] = {}
    for option in options:
        if not isinstance(option, DETECTOR_CONFIGS):
            raise ConfigError(f"{type(option).__name__} is no detector setting")
        if type(option) in by_type:
            raise ConfigError(f"two {type(option).__name__} settings given for one detector")
        by_type[type(option)] = option
    config = by_type.get(entry.config)
    if entry.name == "hog":
        return PersonDetector(config)
    if entry.name == "haar":
        return FaceDetector(config)
    if entry.name == "ssdlite":
        return SSDLiteDetector(config)
    if entry.name == "yunet":
        return YuNetDetector(config)
    return YoloDetector(argument, config)
