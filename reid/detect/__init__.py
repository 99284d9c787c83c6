"""Person and face detectors for frames and photos, and the crop helpers that follow them.

>>> det = build_detector("yunet", "face")      # or build_detector(None, "face"): the default, haar
>>> for d in confident_detections(det, image_rgb):     # a photo's boxes; detect() adds weak ones
...     face = crop(image_rgb, d.box, margin=0.1)

``--detector`` names: ``bytetrack-nano``, ``yolox-nano``, ``yolox-tiny``, ``yolox-s``,
``person-detection-retail-0013``, ``pedestrian-detection-adas-0002`` (published files, found in
the registry's cache or named as ``NAME:FILE``), ``pedestrian``, ``hog``, ``ssdlite``,
``yolo:FILE.onnx`` (people), ``haar``, ``yunet`` (faces); :func:`build_detector` is the one
place they are read, and :func:`default_detector` says which runs when none is named.
"""

from __future__ import annotations

import numpy as np

from typing import TYPE_CHECKING

from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.detect.configs import (
        AdasPedestrianConfig,
        ByteTrackConfig,
        FaceDetectorConfig,
        OmzDetectorConfig,
        PedestrianConfig,
        PersonDetectorConfig,
        RetailPersonConfig,
        SSDLiteConfig,
        YoloConfig,
        YoloxConfig,
        YuNetConfig,
    )
    from reid.detect.names import DEFAULT_DETECTORS, DETECTOR_KINDS, DETECTOR_NAMES, FALLBACK_DETECTORS, STAND_INS
    from reid.detect.align import FACE_TEMPLATE_112, align_face, crop_detection, similarity_transform
    from reid.detect.base import (
        Box,
        Detection,
        Detector,
        Point,
        clipped_detection,
        confident_detections,
        crop,
        expand_box,
        non_max_suppression,
    )
    from reid.detect.build import (
        DETECTORS,
        build_detector,
        check_detector,
        default_detector,
        detector_kind,
        detector_names,
        fallback_note,
    )
    from reid.detect.opencv import FaceDetector, PersonDetector, cascade_path
    from reid.detect.omz import OmzDetector
    from reid.detect.pedestrian import PedestrianDetector
    from reid.detect.ssdlite import SSDLiteDetector
    from reid.detect.yolo import YoloDetector
    from reid.detect.yunet import YuNetDetector

__getattr__, __dir__ = lazy_names(__name__, __file__)

# Crops a little larger than the box: detectors cut off hair, shoulders and feet.
DEFAULT_MARGIN = {"person": 0.05, "face": 0.15}


def crop_detections(image: np.ndarray, detections: list[Detection], margin: float | None = None) -> list[np.ndarray]:
    """One crop per detection, each grown by ``margin`` (default: per detector kind)."""
    from reid.detect.base import crop

    return [crop(image, d.box, DEFAULT_MARGIN.get(d.kind, 0.0) if margin is None else margin) for d in detections]


__all__ = [
    "AdasPedestrianConfig",
    "ByteTrackConfig",
    "DEFAULT_DETECTORS",
    "DEFAULT_MARGIN",
    "DETECTORS",
    "DETECTOR_KINDS",
    "DETECTOR_NAMES",
    "FALLBACK_DETECTORS",
    "FACE_TEMPLATE_112",
    "OmzDetector",
    "OmzDetectorConfig",
    "Box",
    "Detection",
    "Detector",
    "FaceDetector",
    "FaceDetectorConfig",
    "PedestrianConfig",
    "PedestrianDetector",
    "PersonDetector",
    "PersonDetectorConfig",
    "Point",
    "RetailPersonConfig",
    "STAND_INS",
    "SSDLiteConfig",
    "SSDLiteDetector",
    "YoloConfig",
    "YoloDetector",
    "YoloxConfig",
    "YuNetConfig",
    "YuNetDetector",
    "align_face",
    "build_detector",
    "cascade_path",
    "check_detector",
    "clipped_detection",
    "confident_detections",
    "crop",
    "crop_detection",
    "crop_detections",
    "default_detector",
    "detector_kind",
    "detector_names",
    "expand_box",
    "fallback_note",
    "non_max_suppression",
    "similarity_transform",
]
