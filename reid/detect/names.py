"""The ``--detector`` names by kind and which runs when none is named, in a module that
imports no detector (OpenCV, ONNX Runtime), so that help lists them at once.
:data:`reid.detect.build.DETECTORS` builds each name and checks at import that it holds
exactly these."""

from __future__ import annotations

DETECTOR_KINDS = ("person", "face")
# The names of each kind, in the order help lists them.
DETECTOR_NAMES = {
    "person": (
        "bytetrack-nano", "yolox-nano", "yolox-tiny", "yolox-s", "person-detection-retail-0013",
        "pedestrian-detection-adas-0002", "pedestrian", "hog", "ssdlite", "yolo:FILE.onnx",
    ),
    "face": ("haar", "yunet"),
}  # fmt: skip
# What each kind runs when no detector is named: the first of these whose model is on this
# machine, best first as measured on PETS09-S2L1 (docs/detectors.md, Measured).
DEFAULT_DETECTORS = {
    "person": ("bytetrack-nano", "yolox-nano", "pedestrian-detection-adas-0002", "person-detection-retail-0013", "pedestrian"),
    "face": ("haar",),
}
# What runs when none of them is: a detector that needs nothing installed or fetched.
FALLBACK_DETECTORS = {"person": "hog"}
# Detectors that run by default only for want of a published one, with a note that says so
# (fallback_note) and names the published detector to fetch.
STAND_INS = ("pedestrian", "hog")
SUGGESTED_DETECTOR = {"person": "yolox-nano"}
YOLO_PREFIX = "yolo:"
# The registry artefact each detector runs (``reid models list`` names), so that
# ``--detector`` takes either name and every hint to fetch one says which --detector runs it;
# an artefact two detectors run is named after the one that runs by default.
DETECTOR_ARTEFACTS = {
    "bytetrack_nano.mot17": "bytetrack-nano",
    "yolox_nano.coco": "yolox-nano",
    "yolox_nano.coco-export": "yolox-nano",
    "yolox_tiny.coco": "yolox-tiny",
    "yolox_s.coco": "yolox-s",
    "person-detection-retail-0013": "person-detection-retail-0013",
    "pedestrian-detection-adas-0002": "pedestrian-detection-adas-0002",
    "ssdlite_mobilenet_v2.voc-person": "pedestrian",
}

# --detector: the names it takes, and what runs when it is not given (each kind's default).
DETECTOR_NAMES_HELP = (
    f"Detector: {', '.join(DETECTOR_NAMES['person'])} (people), {', '.join(DETECTOR_NAMES['face'])} (faces)."
)
DETECTOR_DEFAULT_TEXT = (
    f"for people the first present of {', '.join(DEFAULT_DETECTORS['person'])}, else {FALLBACK_DETECTORS['person']}; "
    f"{DEFAULT_DETECTORS['face'][0]} for faces"
)
