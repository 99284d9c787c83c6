"""Detector names (``--detector``) and the one function that turns them into detectors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reid.detect.base import Detector
from reid.detect.opencv import FaceDetector, FaceDetectorConfig, PersonDetector, PersonDetectorConfig
from reid.detect.pedestrian import PedestrianConfig, PedestrianDetector
from reid.detect.ssdlite import SSDLiteConfig, SSDLiteDetector, model_available
from reid.detect.yolo import YoloConfig, YoloDetector
from reid.detect.yunet import YuNetConfig, YuNetDetector
from reid.errors import ConfigError, ConfigValueError
from reid.models.registry import SSDLITE_PERSON

DETECTOR_KINDS = ("person", "face")
# What each kind runs when no detector is named.
DEFAULT_DETECTORS = {"person": "pedestrian", "face": "haar"}
# What runs instead when the default's model file is not on this machine: a detector that
# needs nothing installed or fetched, with a note saying so (fallback_note).
FALLBACK_DETECTORS = {"person": "hog"}
YOLO_PREFIX = "yolo:"


@dataclass(frozen=True)
class DetectorName:
    """One ``--detector`` name: what it finds, its options' type, what it needs, and how
    it is built from its options (None: the defaults) and the name's argument (the ONNX
    file of ``yolo:``; empty for the others)."""

    name: str
    kind: str
    config: type
    needs: str
    build: Callable[[Any, str], Detector]
    model: str = ""
    """The pretrained-artefact registry name of the file it runs, if any."""


# Adding a detector is one entry here.
DETECTORS = {
    entry.name: entry
    for entry in (
        DetectorName(
            "pedestrian", "person", PedestrianConfig,
            "SSDLite-MobileNetV2 boxes in the pedestrian aspect ratio (`reid models fetch` once)",
            lambda config, _: PedestrianDetector(config), SSDLITE_PERSON,
        ),
        DetectorName(
            "hog", "person", PersonDetectorConfig, "OpenCV's HOG people detector (built in)",
            lambda config, _: PersonDetector(config),
        ),
        DetectorName(
            "ssdlite", "person", SSDLiteConfig, "SSDLite-MobileNetV2 (`reid models fetch` once)",
            lambda config, _: SSDLiteDetector(config), SSDLITE_PERSON,
        ),
        DetectorName(
            "yolo:FILE.onnx", "person", YoloConfig, "your YOLOv5/v8/11/X ONNX export (reid-toolkit[onnx])",
            lambda config, path: YoloDetector(path, config),
        ),
        DetectorName(
            "haar", "face", FaceDetectorConfig, "OpenCV's Haar face cascade (built in)",
            lambda config, _: FaceDetector(config),
        ),
        DetectorName(
            "yunet", "face", YuNetConfig, "YuNet with five landmarks (reid-toolkit[faces])",
            lambda config, _: YuNetDetector(config),
        ),
    )
}  # fmt: skip
DETECTOR_CONFIGS = tuple(entry.config for entry in DETECTORS.values())


def detector_names(kind: str | None = None) -> list[str]:
    """The ``--detector`` names, of one kind or all."""
    return [n.name for n in DETECTORS.values() if kind is None or n.kind == kind]


def parse_detector(spec: str) -> tuple[DetectorName, str]:
    """The entry of a ``--detector`` value and its argument (the ONNX file of ``yolo:``)."""
    if spec.startswith(YOLO_PREFIX):
        path = spec[len(YOLO_PREFIX) :]
        if not path:
            raise ConfigValueError("detector", "yolo: needs the ONNX file, as yolo:FILE.onnx", sep=" ")
        return DETECTORS["yolo:FILE.onnx"], path
    if spec in DETECTORS and spec != "yolo:FILE.onnx":
        return DETECTORS[spec], ""
    raise ConfigValueError("detector", f"{spec!r}: not a detector; choose one of {', '.join(detector_names())}", sep=" ")


def detector_kind(spec: str) -> str:
    """What a ``--detector`` name finds: "person" or "face"."""
    return parse_detector(spec)[0].kind


def default_detector(kind: str) -> str:
    """The detector that runs for ``kind`` when none is named: :data:`DEFAULT_DETECTORS`'s,
    or :data:`FALLBACK_DETECTORS`'s when the default's model file is neither cached nor
    installed (see :func:`fallback_note`)."""
    name = DEFAULT_DETECTORS[kind]
    model = DETECTORS[name].model
    if model and kind in FALLBACK_DETECTORS and not model_available(model):
        return FALLBACK_DETECTORS[kind]
    return name


def fallback_note(kind: str) -> str | None:
    """One line saying that ``kind``'s default detector is not available here, what runs
    instead and how to add the default; None when the default runs."""
    chosen = default_detector(kind)
    default = DEFAULT_DETECTORS[kind]
    if chosen == default:
        return None
    return (
        f"note: {kind} boxes come from {chosen}, whose boxes fit people loosely: the default detector {default} "
        f"needs model {DETECTORS[default].model}; run `reid models fetch {DETECTORS[default].model}` once to use it"
    )


def check_detector(spec: str | None, kind: str | None = None) -> tuple[DetectorName, str]:
    """The entry and argument ``spec`` names, checked against ``kind`` (see
    :func:`build_detector`) without building anything; raises ConfigError."""
    if kind is not None and kind not in DETECTOR_KINDS:
        raise ConfigError(f"unknown detector kind {kind!r}; choose one of {', '.join(DETECTOR_KINDS)}")
    if spec is None:
        if kind is None:
            raise ConfigError("name a detector or the kind of thing to detect (person or face)")
        spec = default_detector(kind)
    entry, argument = parse_detector(spec)
    if kind is not None and entry.kind != kind:
        raise ConfigValueError(
            "detector",
            f"{spec} finds {entry.kind}s, not {kind}s; for {kind}s choose one of {', '.join(detector_names(kind))}",
            sep=" ",
        )
    return entry, argument


def build_detector(spec: str | None, kind: str | None = None, options: Sequence[Any] = ()) -> Detector:
    """The detector a ``--detector`` value names: ``pedestrian``, ``hog``, ``ssdlite``,
    ``yolo:FILE.onnx`` (people), ``haar``, ``yunet`` (faces); None picks the default of
    ``kind`` (:func:`default_detector`: ``pedestrian`` for people when its model is on this
    machine, else ``hog``, which :func:`fallback_note` tells the user).

    ``kind`` ("person" or "face"), when given, must be what the detector finds.
    ``options``: settings for any of the detectors (PersonDetectorConfig for hog,
    FaceDetectorConfig for haar, SSDLiteConfig, PedestrianConfig, YoloConfig, YuNetConfig); the one for the
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
    return entry.build(by_type.get(entry.config), argument)
