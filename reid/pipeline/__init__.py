"""The live side: enrol images into a gallery, query images, videos, cameras and streams.

Library functions return data or yield results and never print; ``reid enroll`` and
``reid query`` are thin layers over them, and the apps build on the same parts: the frame
loop (:func:`frame_crops`), the tracked-detection stream (:class:`DetectionStream`), the
annotated frames and video writer (:func:`annotate` over :mod:`reid.draw`, :class:`VideoWriter`), enrolment
(:func:`enrol`) and the stand-in model for demos.
"""

from typing import TYPE_CHECKING

from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.photos import DETECT_CHOICES, DETECT_HELP, NO_FACE_HELP, BatchSize, CalibrateConfig
    from reid.pipeline.configs import (
        EVERY_FRAME, EmbedEvery, Every, MaxFrames, EnrolConfig, QueryConfig, StreamConfig, TopK, check_detect,
    )  # fmt: skip
    from reid.detect.base import largest_detection
    from reid.pipeline.enrol import (
        DUPLICATE,
        EnrolEntry,
        EnrolPlan,
        EnrolReport,
        camera_of,
        enrol,
        enrol_into,
        plan_enrolment,
    )
    from reid.pipeline.subject import (
        NONE_FOUND,
        SubjectRule,
        Subjects,
        photo_rule,
    )
    from reid.pipeline.embed import (
        Embeddings,
        EncoderEvaluation,
        PairDecision,
        PairScores,
        PairVerification,
        compare_images,
        embed_paths,
        evaluate_encoder,
        score_pairs,
        verify_pairs,
    )
    from reid.pipeline.calibrate import Calibration, calibrate_model, calibrate_model_on_data, choose_on_dataset, model_folder
    from reid.pipeline.frames import (
        ChooseCrop,
        FrameCrops,
        ScaledDetector,
        cut_frame,
        frame_crops,
        margin_for,
        whole_box,
    )
    from reid.draw import Label, Trails, draw_labels, make_label
    from reid.pipeline.live import FramePipeline
    from reid.pipeline.outputs import (
        FOURCC,
        CropWriter,
        JsonlWriter,
        QueryOutputs,
        TracksWriter,
        VideoOutput,
        VideoWriter,
        annotate,
        check_outputs,
        safe_name,
    )
    from reid.pipeline.query import (
        DetectionResult,
        FrameResult,
        QueryRun,
        QueryStats,
        TrackSummary,
        choose_detector,
    )
    from reid.pipeline.sources import Frame, MediaSource, open_source
    from reid.pipeline.scene import calibrate_on_scene, parse_frames, scene_tracks
    from reid.pipeline.stages import STAGES, intra_op_threads, stage_timer
    from reid.pipeline.stream import (
        DetectionStream,
        Sighting,
        TrackedFrame,
        choose_to_embed,
        link_frame,
        tracker_for,
    )

__getattr__, __dir__ = lazy_names(__name__, __file__)

__all__ = [
    "BatchSize",
    "CalibrateConfig",
    "EmbedEvery",
    "Every",
    "MaxFrames",
    "TopK",
    "DETECT_CHOICES",
    "EVERY_FRAME",
    "DUPLICATE",
    "FOURCC",
    "STAGES",
    "ChooseCrop",
    "CropWriter",
    "DetectionResult",
    "DetectionStream",
    "EnrolConfig",
    "EnrolEntry",
    "EnrolPlan",
    "EnrolReport",
    "Frame",
    "FrameCrops",
    "FramePipeline",
    "FrameResult",
    "JsonlWriter",
    "Label",
    "MediaSource",
    "QueryConfig",
    "QueryOutputs",
    "QueryRun",
    "QueryStats",
    "ScaledDetector",
    "Sighting",
    "StreamConfig",
    "TrackSummary",
    "TrackedFrame",
    "Trails",
    "TracksWriter",
    "VideoOutput",
    "VideoWriter",
    "annotate",
    "draw_labels",
    "calibrate_on_scene",
    "camera_of",
    "choose_to_embed",
    "check_outputs",
    "choose_detector",
    "cut_frame",
    "enrol",
    "enrol_into",
    "frame_crops",
    "intra_op_threads",
    "largest_detection",
    "link_frame",
    "make_label",
    "margin_for",
    "open_source",
    "parse_frames",
    "plan_enrolment",
    "safe_name",
    "scene_tracks",
    "stage_timer",
    "tracker_for",
    "SubjectRule",
    "Subjects",
    "whole_box",
    "NONE_FOUND",
    "DETECT_HELP",
    "NO_FACE_HELP",
    "Calibration",
    "Embeddings",
    "EncoderEvaluation",
    "PairDecision",
    "PairScores",
    "PairVerification",
    "calibrate_model",
    "calibrate_model_on_data",
    "choose_on_dataset",
    "compare_images",
    "embed_paths",
    "evaluate_encoder",
    "model_folder",
    "photo_rule",
    "check_detect",
    "score_pairs",
    "verify_pairs",
]
