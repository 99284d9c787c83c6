"""The live side: enrol images into a gallery, query images, videos, cameras and streams.

Library functions return data or yield results and never print; ``reid enroll`` and
``reid query`` are thin layers over them.
"""

from reid.pipeline.enrol import EnrolConfig, EnrolEntry, EnrolReport, camera_of, enrol, enrol_into, plan_enrolment
from reid.pipeline.outputs import (
    CropWriter,
    JsonlWriter,
    QueryOutputs,
    TracksWriter,
    VideoOutput,
    annotate,
    check_outputs,
    safe_name,
)
from reid.pipeline.query import (
    DETECT_CHOICES,
    DetectionResult,
    FrameResult,
    QueryConfig,
    QueryRun,
    QueryStats,
    TrackSummary,
    choose_detector,
    resolve_threshold,
)
from reid.pipeline.sources import Frame, MediaSource, open_source

__all__ = [
    "DETECT_CHOICES",
    "CropWriter",
    "DetectionResult",
    "EnrolConfig",
    "EnrolEntry",
    "EnrolReport",
    "Frame",
    "FrameResult",
    "JsonlWriter",
    "MediaSource",
    "QueryConfig",
    "QueryOutputs",
    "QueryRun",
    "QueryStats",
    "TrackSummary",
    "TracksWriter",
    "VideoOutput",
    "annotate",
    "camera_of",
    "check_outputs",
    "choose_detector",
    "enrol",
    "enrol_into",
    "open_source",
    "plan_enrolment",
    "resolve_threshold",
    "safe_name",
]
