"""The detectors' settings, in a module that imports no detector (OpenCV, ONNX Runtime,
OpenVINO), so that the command line and the apps build options and help from them at
once; each detector's module re-exports its own (:mod:`reid.detect.opencv`,
:mod:`~reid.detect.omz`, :mod:`~reid.detect.ssdlite`, :mod:`~reid.detect.pedestrian`,
:mod:`~reid.detect.yolo`, :mod:`~reid.detect.yunet`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from reid.detect.base import check_score_tiers, score_floor
from reid.errors import ConfigError
from reid.options import check_fields, option


@dataclass
class PersonDetectorConfig:
    """Options of the HOG people detector.

    ``scale`` in (0, 4]: frames are resized by it before detection (< 1 faster, but people
    shorter than 128 / scale pixels are then missed); boxes are always returned in the
    original frame.  ``win_stride``: the window's step in pixels (1..256; smaller finds more,
    slower).  Raises ConfigValueError naming the key of a value out of range.
    """

    scale: Annotated[float, Field(gt=0, le=4)] = option(
        1.0, flag="--detect-scale", help="HOG: scale frames by this before detection (< 1: faster, misses small people)."
    )
    win_stride: Annotated[int, Field(ge=1, le=256)] = option(8, help="HOG window stride in pixels: smaller finds more.")
    padding: int = 8
    pyramid_scale: float = 1.05
    min_score: float = 0.0
    nms_iou: float = 0.45

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class FaceDetectorConfig:
    """Options of the Haar cascade face detector.

    ``cascade`` is a file name inside OpenCV's bundled ``cv2.data.haarcascades`` or a path
    to any cascade XML.  Images whose shorter side is below ``upscale_below`` are enlarged
    2x first, which finds more of the small, tightly framed faces of photo sets.
    """

    cascade: str = "haarcascade_frontalface_default.xml"
    scale_factor: float = 1.1
    min_neighbors: int = 4
    min_size: int = 24
    upscale_below: int = 160


@dataclass
class OmzDetectorConfig:
    """Options of an Open Model Zoo SSD person detector.

    ``min_score``: confidence (0..1) from which a box is a confident detection (the
    detector's ``confident_score``); ``weak_score``: the floor, from which the boxes below
    ``min_score`` are returned as weak detections, which only continue tracks (see
    :class:`reid.detect.Detector`; None, or a score above ``min_score``: no weak ones); both
    in [0, 1), else ConfigError.  ``threads``: OpenVINO's inference threads (None: its
    default, every core).
    """

    min_score: float = 0.5
    weak_score: float | None = 0.1
    threads: int | None = None

    def __post_init__(self) -> None:
        check_score_tiers("Open Model Zoo detector", self.min_score, self.weak_score)
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"Open Model Zoo detector threads must be at least 1, got {self.threads}")

    @property
    def floor(self) -> float:
        """The lowest score a box is returned with: ``weak_score``, or ``min_score`` when
        there is no weak tier."""
        return score_floor(self.min_score, self.weak_score)


@dataclass
class RetailPersonConfig(OmzDetectorConfig):
    """``person-detection-retail-0013``'s settings: ``min_score`` 0.35, the best F1 on the
    first half of PETS09-S2L1's frames (docs/detectors.md)."""

    min_score: float = 0.35


@dataclass
class AdasPedestrianConfig(OmzDetectorConfig):
    """``pedestrian-detection-adas-0002``'s settings: ``min_score`` 0.2, the best F1 on the
    first half of PETS09-S2L1's frames (docs/detectors.md)."""

    min_score: float = 0.2


@dataclass
class SSDLiteConfig:
    """Options of the SSDLite person detector.

    ``min_score``: detection score (0..1) from which a box is a confident detection (the
    detector's ``confident_score``).  ``weak_score``: the floor, the score from which the
    boxes below ``min_score`` are returned as weak detections, which only continue tracks
    (see :class:`reid.detect.Detector`); None, or a score above ``min_score``: no weak
    ones.  Both in [0, 1), else ConfigError.  ``min_height``:
    the height in frame pixels of the smallest person sought, which adds a second pass
    at the scale that person needs (None: one pass at 300x300, the fastest; it finds
    people taller than about a tenth of the frame).  ``nms_iou``: overlap above which the weaker
    of two boxes is dropped.
    """

    min_score: float = 0.4
    weak_score: float | None = 0.1
    min_height: int | None = None
    nms_iou: float = 0.45

    def __post_init__(self) -> None:
        check_score_tiers("ssdlite", self.min_score, self.weak_score)
        if self.min_height is not None and self.min_height < 8:
            raise ConfigError(f"ssdlite min_height must be at least 8 pixels, got {self.min_height}")

    @property
    def floor(self) -> float:
        """The lowest score a box is returned with: ``weak_score``, or ``min_score`` when
        there is no weak tier."""
        return score_floor(self.min_score, self.weak_score)


# Caltech Pedestrian's and CityPersons' box width over height.
PEDESTRIAN_ASPECT = 0.41


@dataclass
class PedestrianConfig:
    """Options of the pedestrian detector.

    ``min_score``, ``weak_score``, ``min_height``, ``nms_iou``: SSDLite's
    (:class:`reid.detect.SSDLiteConfig`, same defaults and checks: ConfigError).  ``box_aspect``: the width of every
    box over its height (0.41: Caltech Pedestrian's and CityPersons' convention); None keeps
    SSDLite's own widths.
    """

    min_score: float = SSDLiteConfig.min_score
    weak_score: float | None = SSDLiteConfig.weak_score
    min_height: int | None = None
    nms_iou: float = SSDLiteConfig.nms_iou
    box_aspect: float | None = PEDESTRIAN_ASPECT

    def __post_init__(self) -> None:
        # SSDLite's own checks (scores in [0, 1), min_height) hold for the same settings.
        self.ssdlite()
        if self.box_aspect is not None and not 0.1 <= self.box_aspect <= 2.0:
            raise ConfigError(f"pedestrian box_aspect must be between 0.1 and 2 (width over height), got {self.box_aspect}")

    def ssdlite(self) -> SSDLiteConfig:
        """The SSDLite settings underneath."""
        return SSDLiteConfig(
            min_score=self.min_score, weak_score=self.weak_score, min_height=self.min_height, nms_iou=self.nms_iou
        )


# yolox-raw: a YOLOX head known to be raw (a publisher's file), which skips the check of
# its centres: on a blank frame a raw head's weakest rows may reach past that check's bound.
LAYOUTS = ("auto", "yolov5", "yolov8", "yolox", "yolox-raw")


# What the network is given: auto (by layout: bgr for YOLOX, rgb for the others), BGR 0..255,


# RGB 0..1, or RGB 0..1 normalised by ImageNet's mean and standard deviation.
PIXELS = ("auto", "bgr", "rgb", "rgb-imagenet")


@dataclass
class YoloConfig:
    """Options of the YOLO ONNX person detector.

    ``layout``: auto, yolov5, yolov8, yolox or yolox-raw (see the module notes and
    :data:`LAYOUTS`).  ``min_score``:
    score (0..1) from which a person box is a confident detection (the detector's
    ``confident_score``); ``weak_score``: the floor, the score from which the boxes below
    ``min_score`` are returned as weak detections, which only continue tracks (see
    :class:`reid.detect.Detector`; None, or a score above ``min_score``: no weak ones);
    both in [0, 1), else ConfigError;
    ``nms_iou``: overlap above which the
    weaker of two boxes is dropped.  ``input_size`` (height, width) is only needed when the
    file's input size is dynamic (default 640x640).  ``pixels``: what the network is given
    (:data:`PIXELS`; auto: BGR 0..255 for YOLOX, RGB 0..1 for the others).  ``threads``:
    onnxruntime's threads for one frame (None: its default, every core).
    """

    layout: str = "auto"
    min_score: float = 0.25
    weak_score: float | None = 0.1
    nms_iou: float = 0.45
    input_size: tuple[int, int] | None = None
    pixels: str = "auto"
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigError(f"unknown YOLO layout {self.layout!r}; choose one of {', '.join(LAYOUTS)}")
        if self.pixels not in PIXELS:
            raise ConfigError(f"unknown YOLO pixels {self.pixels!r}; choose one of {', '.join(PIXELS)}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"YOLO threads must be at least 1, got {self.threads}")
        check_score_tiers("YOLO", self.min_score, self.weak_score)

    @property
    def floor(self) -> float:
        """The lowest score a box is returned with: ``weak_score``, or ``min_score`` when
        there is no weak tier."""
        return score_floor(self.min_score, self.weak_score)


@dataclass
class YoloxConfig(YoloConfig):
    """Settings of the YOLOX COCO files by name (``yolox-nano``, ``yolox-tiny``,
    ``yolox-s``): YOLOX's raw head, BGR 0..255 in, person = COCO class 0, NMS at 0.45 (its
    demo's).  ``min_score`` 0.6: the best F1 on the first half of PETS09-S2L1's frames with
    yolox-nano (docs/detectors.md; tiny and s were not measured and take it too); at YOLOX's
    demo's 0.5 a static object at the street's left edge passes for a person in 610 of its
    795 frames."""

    layout: str = "yolox-raw"
    pixels: str = "bgr"
    min_score: float = 0.6


@dataclass
class ByteTrackConfig(YoloConfig):
    """Settings of ByteTrack's YOLOX-Nano person detector (MOT17 + CrowdHuman, one class) by
    name (``bytetrack-nano``): raw head, RGB 0..1 normalised by ImageNet's mean and standard
    deviation, NMS at 0.7 (ByteTrack's own for it).  ``min_score`` 0.55: the best F1 on
    the first half of PETS09-S2L1's frames (docs/detectors.md)."""

    layout: str = "yolox-raw"
    pixels: str = "rgb-imagenet"
    min_score: float = 0.55
    nms_iou: float = 0.7


@dataclass
class YuNetConfig:
    """Options of the YuNet face detector: ``min_score`` (0..1) from which a face is kept."""

    min_score: float = 0.5

    def __post_init__(self) -> None:
        if not 0 <= self.min_score < 1:
            raise ConfigError(f"yunet min_score must be in [0, 1), got {self.min_score}")


# Each ``--detector`` name's settings (:data:`reid.detect.build.DETECTORS` builds the
# detector from them and checks at import that it pairs each name with the same).
NAMED_CONFIGS: dict[str, type] = {
    "bytetrack-nano": ByteTrackConfig,
    **{f"yolox-{size}": YoloxConfig for size in ("nano", "tiny", "s")},
    "person-detection-retail-0013": RetailPersonConfig,
    "pedestrian-detection-adas-0002": AdasPedestrianConfig,
    "pedestrian": PedestrianConfig,
    "hog": PersonDetectorConfig,
    "ssdlite": SSDLiteConfig,
    "yolo:FILE.onnx": YoloConfig,
    "haar": FaceDetectorConfig,
    "yunet": YuNetConfig,
}
