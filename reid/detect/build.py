"""Detector names (``--detector``) and the one function that turns them into detectors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reid.detect.base import Detector
from reid.detect.configs import NAMED_CONFIGS
# The names and defaults, stated where help reads them without loading a detector.
from reid.detect.names import (
    DEFAULT_DETECTORS,
    DETECTOR_ARTEFACTS,
    DETECTOR_KINDS,
    DETECTOR_NAMES,
    FALLBACK_DETECTORS,
    STAND_INS,
    SUGGESTED_DETECTOR,
    YOLO_PREFIX,
)
from reid.detect.omz import AdasPedestrianConfig, OmzDetector, RetailPersonConfig
from reid.detect.opencv import FaceDetector, FaceDetectorConfig, PersonDetector, PersonDetectorConfig
from reid.detect.pedestrian import PedestrianConfig, PedestrianDetector
from reid.detect.published import has_model_file, how_to_get, model_file
from reid.detect.ssdlite import SSDLiteConfig, SSDLiteDetector, model_available
from reid.detect.yolo import ByteTrackConfig, YoloConfig, YoloDetector, YoloxConfig
from reid.detect.yunet import YuNetConfig, YuNetDetector
from reid.errors import ConfigError, ConfigValueError
from reid.models.registry import SSDLITE_PERSON


@dataclass(frozen=True)
class DetectorName:
    """One ``--detector`` name: what it finds, its options' type, what it needs, and how
    it is built from its options (None: the defaults) and the name's argument (the ONNX
    file of ``yolo:``, the file given as ``NAME:FILE``; empty for the others)."""

    name: str
    kind: str
    config: type
    needs: str
    build: Callable[[Any, str], Detector]
    model: str = ""
    """The pretrained-artefact registry name of the file it runs, if any."""
    suffix: str = ""
    """The suffix of the published file it reads (".onnx", ".xml"), found among the
    verified cached files of ``model`` or else of ``alternatives``
    (:func:`reid.detect.published.model_file`) unless given as ``NAME:FILE``; empty for a
    detector of one registry file (ssdlite) or none."""
    alternatives: tuple[str, ...] = ()
    """Other artefacts holding the same network (a user's own export of it)."""

    @property
    def models(self) -> tuple[str, ...]:
        """The artefacts it can run, the published one first."""
        return (self.model, *self.alternatives)

    def present(self) -> bool:
        """True when what it runs is on this machine (a named file can be given anyway)."""
        if self.suffix:
            return has_model_file(self.models, self.suffix)
        return not self.model or model_available(self.model)


def _published(
    name: str, config: type, models: tuple[str, ...], suffix: str, needs: str, build: Callable[[str, Any], Detector]
) -> DetectorName:
    """The entry of a person detector by name that runs a file of the registry artefacts
    ``models`` (the published one first): the file given as ``NAME:FILE``, else the first
    verified cached one (ModelError naming the command that puts it there), with
    ``config``'s defaults unless settings are given."""

    def built(options: Any, given: str) -> Detector:
        return build(given or str(model_file(models, suffix)), options or config())

    return DetectorName(name, "person", config, needs, built, models[0], suffix, models[1:])


# Adding a detector is one entry here.
DETECTORS = {
    entry.name: entry
    for entry in (
        _published(
            "bytetrack-nano", ByteTrackConfig, ("bytetrack_nano.mot17",), ".onnx",
            "ByteTrack's YOLOX-Nano person detector, MOT17 + CrowdHuman, 1088x608 (`reid models add` its ONNX export; "
            "reid-toolkit[onnx])",
            YoloDetector,
        ),
        *(
            _published(
                f"yolox-{size}", YoloxConfig, (f"yolox_{size}.coco", *(("yolox_nano.coco-export",) if size == "nano" else ())),
                ".onnx",
                f"YOLOX-{size.capitalize()} COCO, person class "
                "(`reid models fetch` once; reid-toolkit[onnx])",
                YoloDetector,
            )
            for size in ("nano", "tiny", "s")
        ),
        *(
            _published(
                name, config, (name,), ".xml",
                f"Open Model Zoo {what}, OpenVINO IR (`reid models fetch` once; reid-toolkit[openvino])",
                OmzDetector,
            )
            for name, config, what in (
                ("person-detection-retail-0013", RetailPersonConfig, "person detector, 544x320"),
                ("pedestrian-detection-adas-0002", AdasPedestrianConfig, "pedestrian detector, 672x384"),
            )
        ),
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
if {kind: tuple(n.name for n in DETECTORS.values() if n.kind == kind) for kind in DETECTOR_KINDS} != DETECTOR_NAMES:
    raise AssertionError("reid.detect.names.DETECTOR_NAMES must list the names of DETECTORS by kind, in its order")
if {name: entry.config for name, entry in DETECTORS.items()} != NAMED_CONFIGS:
    raise AssertionError("reid.detect.configs.NAMED_CONFIGS must pair each name of DETECTORS with its config")
if {m for n in DETECTORS.values() for m in n.models if m} != set(DETECTOR_ARTEFACTS) or any(
    model not in DETECTORS[name].models for model, name in DETECTOR_ARTEFACTS.items()
):
    raise AssertionError("reid.detect.names.DETECTOR_ARTEFACTS must pair each artefact of DETECTORS with a detector running it")


def detector_names(kind: str | None = None) -> list[str]:
    """The ``--detector`` names, of one kind or all."""
    return [n.name for n in DETECTORS.values() if kind is None or n.kind == kind]


def parse_detector(spec: str) -> tuple[DetectorName, str]:
    """The entry of a ``--detector`` value and its argument (the ONNX file of ``yolo:``, the
    file of a published detector named as ``NAME:FILE``).  A detector is named by its
    ``--detector`` name or by the registry artefact it runs (``yolox_nano.coco`` is
    ``yolox-nano``); ConfigValueError for anything else."""
    if spec == YOLO_PREFIX.rstrip(":"):
        raise ConfigValueError("detector", "yolo needs your ONNX file, as yolo:FILE.onnx", sep=" ")
    if spec.startswith(YOLO_PREFIX):
        path = spec[len(YOLO_PREFIX) :]
        if not path:
            raise ConfigValueError("detector", "yolo: needs the ONNX file, as yolo:FILE.onnx", sep=" ")
        return DETECTORS["yolo:FILE.onnx"], path
    if spec in DETECTORS and spec != "yolo:FILE.onnx":
        return DETECTORS[spec], ""
    if spec in DETECTOR_ARTEFACTS:
        return DETECTORS[DETECTOR_ARTEFACTS[spec]], ""
    name, colon, path = spec.partition(":")
    name = DETECTOR_ARTEFACTS.get(name, name)
    if colon and name in DETECTORS and DETECTORS[name].suffix:
        if not path:
            raise ConfigValueError("detector", f"{name}: needs its file, as {name}:FILE{DETECTORS[name].suffix}", sep=" ")
        return DETECTORS[name], path
    raise ConfigValueError("detector", f"{spec!r}: not a detector; choose one of {', '.join(detector_names())}", sep=" ")


def detector_kind(spec: str) -> str:
    """What a ``--detector`` name finds: "person" or "face"."""
    return parse_detector(spec)[0].kind


def default_detector(kind: str) -> str:
    """The detector that runs for ``kind`` when none is named: the first of
    :data:`DEFAULT_DETECTORS`'s whose model is on this machine (cached, or installed), else
    :data:`FALLBACK_DETECTORS`'s (see :func:`fallback_note`)."""
    for name in DEFAULT_DETECTORS[kind]:
        if DETECTORS[name].present():
            return name
    return FALLBACK_DETECTORS.get(kind, DEFAULT_DETECTORS[kind][0])


def fallback_note(kind: str) -> str | None:
    """One line saying that ``kind``'s boxes come from a stand-in (:data:`STAND_INS`)
    because no published detector's model is here, and how to fetch one; None otherwise."""
    chosen = default_detector(kind)
    if chosen not in STAND_INS or kind not in SUGGESTED_DETECTOR:
        return None
    suggested = DETECTORS[SUGGESTED_DETECTOR[kind]]
    return (
        f"note: {kind} boxes come from {chosen}, a stand-in that misses many people: no published {kind} detector "
        f"is on this machine; {how_to_get(suggested.model)}"
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
    """The detector a ``--detector`` value names: ``bytetrack-nano``, ``yolox-nano``,
    ``yolox-tiny``, ``yolox-s``, ``person-detection-retail-0013``,
    ``pedestrian-detection-adas-0002`` (each also as ``NAME:FILE``, its file given),
    ``pedestrian``, ``hog``, ``ssdlite``, ``yolo:FILE.onnx`` (people), ``haar``, ``yunet``
    (faces); None picks the default of ``kind`` (:func:`default_detector`: the best person
    detector whose model is on this machine, else ``hog``, which :func:`fallback_note`
    tells the user).

    ``kind`` ("person" or "face"), when given, must be what the detector finds.
    ``options``: settings for any of the detectors (PersonDetectorConfig for hog,
    FaceDetectorConfig for haar, SSDLiteConfig, PedestrianConfig, YoloConfig, YuNetConfig,
    ByteTrackConfig, YoloxConfig, RetailPersonConfig, AdasPedestrianConfig: the entry's
    ``config``, matched by exact type); the one for the chosen detector is used, the others
    are ignored.  Raises ConfigError for an unknown
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
