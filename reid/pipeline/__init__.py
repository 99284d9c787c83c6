"""The live side: enrol images into a gallery, query images, videos, cameras and streams.

Library functions return data or yield results and never print; ``reid enroll`` and
``reid query`` are thin layers over them, and the apps build on the same parts: the frame
loop (:func:`frame_crops`), the box drawing and video writer (:func:`draw_box`,
:class:`VideoWriter`), enrolment (:func:`enrol`) and the stand-in model for demos.
"""

from reid.detect.base import largest_detection
from reid.pipeline.enrol import (
    DUPLICATE,
    EnrolConfig,
    EnrolEntry,
    EnrolReport,
    camera_of,
    enrol,
    enrol_into,
    plan_enrolment,
)
from reid.pipeline.subject import SubjectRule, Subjects
from reid.pipeline.frames import (
    ChooseCrop,
    FrameCrops,
    ScaledDetector,
    cut_frame,
    frame_crops,
    margin_for,
    whole_box,
)
from reid.pipeline.live import FramePipeline
from reid.pipeline.outputs import (
    FOURCC,
    KNOWN_COLOUR,
    UNKNOWN_COLOUR,
    CropWriter,
    JsonlWriter,
    QueryOutputs,
    TracksWriter,
    VideoOutput,
    VideoWriter,
    annotate,
    check_outputs,
    draw_box,
    identity_colour,
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
    gallery_threshold,
    resolve_threshold,
)
from reid.pipeline.sources import Frame, MediaSource, open_source
from reid.pipeline.scene import calibrate_on_scene, parse_frames, scene_tracks
from reid.pipeline.stages import STAGES, intra_op_threads, stage_timer
from reid.pipeline.stream import Sighting, attach, choose_to_embed, link_frame

__all__ = [
    "DETECT_CHOICES",
    "DUPLICATE",
    "FOURCC",
    "KNOWN_COLOUR",
    "STAGES",
    "UNKNOWN_COLOUR",
    "ChooseCrop",
    "CropWriter",
    "DetectionResult",
    "EnrolConfig",
    "EnrolEntry",
    "EnrolReport",
    "Frame",
    "FrameCrops",
    "FramePipeline",
    "FrameResult",
    "JsonlWriter",
    "MediaSource",
    "QueryConfig",
    "QueryOutputs",
    "QueryRun",
    "QueryStats",
    "ScaledDetector",
    "Sighting",
    "TrackSummary",
    "TracksWriter",
    "VideoOutput",
    "VideoWriter",
    "annotate",
    "attach",
    "calibrate_on_scene",
    "camera_of",
    "choose_to_embed",
    "check_outputs",
    "choose_detector",
    "cut_frame",
    "draw_box",
    "enrol",
    "enrol_into",
    "frame_crops",
    "identity_colour",
    "intra_op_threads",
    "largest_detection",
    "link_frame",
    "margin_for",
    "open_source",
    "parse_frames",
    "plan_enrolment",
    "gallery_threshold",
    "resolve_threshold",
    "safe_name",
    "scene_tracks",
    "stage_timer",
    "SubjectRule",
    "Subjects",
    "whole_box",
]
