"""The settings of the live side: enrolment (:class:`EnrolConfig`), queries
(:class:`QueryConfig`) and the tracked-detection stream (:class:`StreamConfig`), in a
module that imports no engine (PyTorch, OpenCV, FAISS), so that the command line builds
its options and help from them at once.  Each is re-exported where it is used
(:mod:`reid.pipeline.enrol`, :mod:`reid.pipeline.query`, :mod:`reid.pipeline.stream`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from reid.decision import FAR_HELP, THRESHOLD_HELP, check_distance_threshold, check_far, check_threshold_or_far
from reid.detect.names import DETECTOR_DEFAULT_TEXT, DETECTOR_NAMES_HELP
from reid.errors import ConfigValueError
from reid.gallery.search import SCORES
from reid.options import check_fields, option
from reid.photos import DETECT_CHOICES, DETECT_HELP, NO_FACE_CHOICES, NO_FACE_HELP, BatchSize
from reid.track.config import TrackerConfig

# Keep one frame in N, and stop after N kept frames: the ranges of every config that sets them;
# a source keeps every frame unless told otherwise.
Every = Annotated[int, Field(ge=1, le=1_000_000)]
MaxFrames = Annotated[int, Field(ge=1, le=10**12)]
EVERY_FRAME = 1

# PyTorch intra-op threads while embedding (reid.pipeline.stages says why one).
EMBED_THREADS = 1


def check_detect(detect: str, no_face: str = "skip", detector: str | None = None) -> None:
    """Raise ConfigError for a ``--detect`` outside DETECT_CHOICES, a ``--no-face`` outside
    NONE_FOUND, or a ``--detector`` that is unknown, of the other kind than ``detect``, or
    given with ``detect`` "none"."""
    if detect not in DETECT_CHOICES:
        raise ConfigValueError("detect", f"{detect!r}: choose one of {', '.join(DETECT_CHOICES)}", sep=" ")
    if no_face not in NO_FACE_CHOICES:
        raise ConfigValueError("no_face", f"{no_face!r}: choose one of {', '.join(NO_FACE_CHOICES)}", sep=" ")
    if detector is None:
        return
    if detect == "none":
        raise ConfigValueError("detector", f"{detector}: detect none takes everything whole; drop one of them", sep=" ")
    from reid.detect.build import check_detector

    check_detector(detector, detect if detect in ("person", "face") else None)


# One of N of a track's crops embedded.
EmbedEvery = Annotated[int, Field(ge=1, le=1_000_000)]


@dataclass
class StreamConfig:
    """How detections become tracked, embedded sightings.

    ``track``: link the detections of videos, cameras and streams into tracks (False:
    every detection is searched alone).  ``tracker``: its settings; a ``high_score`` of
    None becomes the detector's ``confident_score`` (:func:`tracker_for`).
    ``embed_every``: embed a track's crop in one of this many of its boxes (its first
    included); above 1 tracks are linked on boxes alone (unless ``tracker.appearance`` is
    set, which needs every embedding).  Untracked, there is no track to sample and every
    crop is embedded, whatever it says.  ``batch_size``: crops embedded together (a live
    source does not wait to fill one).  ``no_face``: what the encoder does with a crop it
    refuses (:data:`reid.models.encoder.NO_FACE_CHOICES`).  ``thumbnails``: keep each
    track's largest crop.  Raises ConfigError for a value out of range.
    """

    track: bool = True
    tracker: TrackerConfig = field(default_factory=TrackerConfig)
    embed_every: EmbedEvery = 2
    batch_size: BatchSize = 32
    no_face: Literal[NO_FACE_CHOICES] = "skip"
    thumbnails: bool = False

    def __post_init__(self) -> None:
        check_fields(self)


# Identities listed per detection: beyond this a search would allocate without bound.
TopK = Annotated[int, Field(ge=1, le=10_000)]


@dataclass
class QueryConfig:
    """Options of a query run.

    ``detect`` (:data:`reid.pipeline.subject.DETECT_CHOICES`): "auto" runs the model's
    kind of detector (person or face) on videos, cameras and streams and takes image files
    as ready crops (aligned face chips when the model's card asks for them); "none" takes
    every frame as one crop.  ``no_face``: what happens to an image file in which the
    detector finds nobody, or which a face model refuses: "whole", "skip" (counted and
    named in :attr:`QueryStats.no_face`) or "error".  ``detector``: which detector (a :func:`reid.detect.build_detector`
    name; default: the kind's).  ``threshold`` (Euclidean distance between unit embeddings) defaults to
    the gallery's, which is the model card's calibrated one.  ``track``: link the
    detections of videos, cameras and streams into tracks (see :mod:`reid.track`).
    ``detect_scale`` in (0, 1]: detect on frames scaled by it (faster; people shorter than
    the detector's window divided by it are missed).  ``batch_size``, ``no_face``,
    ``track``, ``tracker`` and ``embed_every`` are the stream's
    (:class:`reid.pipeline.stream.StreamConfig`, same defaults and checks).
    ``threaded``: decode and detect on their own threads (:class:`FramePipeline`), so the
    stages overlap and a live source drops the frames it cannot keep up with; False runs
    every stage in turn on the caller's thread.
    ``embed_threads``: PyTorch intra-op threads while embedding (None: PyTorch's own
    setting); see :mod:`reid.pipeline.stages` for why one is the default.
    ``embed_every``: on tracked videos, embed a track's crop in one of this many of its
    frames (its first included); its other detections are answered by its mean so far.
    Successive frames of one person add little to the mean, so 2 halves the embedding
    work; above 1 (without ``tracker.appearance``) tracks are linked on boxes
    alone, without embeddings to order detections that overlap a track alike.
    ``min_height``: the height in frame pixels of the smallest person sought, for the
    ``ssdlite`` detector only (see :class:`reid.detect.SSDLiteConfig`; None: its default
    single pass).
    ``one_per_frame``: on tracked sources, name each enrolled identity at most once among
    the detections of one frame (:func:`reid.decision.one_identity_each`: a person is in
    one place at a time, so two tracks seen together are not one person), and never give
    a track an identity it lost so in an earlier frame (:func:`reid.decision.taken_from`); False, or
    untracked, names each detection alone (:func:`reid.decision.nearest_identity`).
    ``trail``: in the annotated video, each track's last this many centres drawn as a line
    (:class:`reid.pipeline.outputs.QueryOutputs`; 0: none).
    """

    # The fields that carry options (reid.options) are reid query's, with the tracker's.
    top_k: TopK = option(5, short="-k", help="Identities listed per detection.")
    detect: str = option("auto", help=DETECT_HELP)
    detector: str | None = option(None, help=DETECTOR_NAMES_HELP, default_text=DETECTOR_DEFAULT_TEXT)
    threshold: float | None = option(
        None,
        help=THRESHOLD_HELP,
        default_text="the gallery's own calibration (reid gallery calibrate, or once it holds enough identities), "
        "else the model card's",
    )
    far: float | None = option(None, help=FAR_HELP)
    score: Literal[SCORES] = option("best", help="Identity distance: best (nearest item) or mean (over its items).")
    batch_size: BatchSize = option(StreamConfig.batch_size, help="Crops embedded together.")
    margin: float | None = None
    no_face: str = option(StreamConfig.no_face, help=NO_FACE_HELP)
    track: bool = option(StreamConfig.track, help="Link detections into tracks and name each track by its mean embedding.")
    tracker: TrackerConfig = field(default_factory=TrackerConfig)
    embed_threads: Annotated[int, Field(ge=1)] | None = EMBED_THREADS
    detect_scale: Annotated[float, Field(gt=0, le=1)] = option(1.0, help="Detect on frames scaled by this, in (0, 1] (faster; misses small people).")
    threaded: bool = True
    min_height: Annotated[int, Field(ge=1, le=65_536)] | None = option(
        None,
        help="With --detector ssdlite: also find people down to this many pixels tall (a second, larger pass; slower).",
        default_text="one pass, people taller than about a tenth of the frame",
    )
    embed_every: EmbedEvery = option(
        StreamConfig.embed_every,
        help="Embed a track's crop in one of N of its frames (videos, cameras, streams); the others are answered "
        "by its mean so far; untracked, every crop is embedded.",
    )
    one_per_frame: bool = option(
        True,
        help="Tracked sources: name each enrolled identity at most once among one frame's detections, the nearest "
        "taking it (a person is in one place at a time), and never give a track a name it lost so; "
        "--no-one-per-frame names each detection alone.",
        default_text="on",
    )
    trail: Annotated[int, Field(ge=0, le=1000)] = option(
        0, help="With --save-video: draw each track's last N centres as a line behind its box (0: none)."
    )

    def __post_init__(self) -> None:
        check_fields(self)
        check_detect(self.detect, self.no_face)
        self.stream()  # batch size, embed_every, no_face: the stream's checks
        check_distance_threshold(self.threshold, "threshold")
        check_far(self.far, "far")
        check_threshold_or_far(self.threshold, self.far)
        if self.min_height is not None and self.detector != "ssdlite":
            raise ConfigValueError(
                "min_height", f"works with the ssdlite detector, not {self.detector or 'the default detector'}", sep=" "
            )

    def stream(self) -> StreamConfig:
        """The tracked-detection stream's settings of this query."""
        return StreamConfig(
            track=self.track, tracker=self.tracker, embed_every=self.embed_every, batch_size=self.batch_size,
            no_face=self.no_face,
        )  # fmt: skip


@dataclass
class EnrolConfig:
    """``batch_size`` images are embedded and committed together; ``margin`` grows each
    detection box by that share of its size (default: the detector kind's).  ``detect``
    (:data:`reid.pipeline.subject.DETECT_CHOICES`) and ``detector`` (a
    :func:`reid.detect.build_detector` name) say how each photo is cut to its subject
    (:func:`reid.pipeline.subject.photo_rule`: "auto" takes photos whole unless a
    ``detector`` is named or the encoder asks for aligned face chips), when no detector is
    given to :func:`enrol` itself.

    ``no_face`` (NONE_FOUND) says what happens to a photo in which the detector finds
    nobody or which the encoder refuses: "whole" takes the whole photo, "skip" skips and
    names it, "error" stops.  The fields that carry options (:mod:`reid.options`) are
    ``reid enroll``'s.
    """

    batch_size: BatchSize = option(32, help="Images embedded and committed together.")
    margin: float | None = None
    no_face: str = option("skip", help=NO_FACE_HELP)
    detect: str = option("auto", help=DETECT_HELP)
    detector: str | None = option(None, help=DETECTOR_NAMES_HELP, default_text=DETECTOR_DEFAULT_TEXT)

    def __post_init__(self) -> None:
        check_fields(self)
        check_detect(self.detect, self.no_face, self.detector)
