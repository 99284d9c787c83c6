"""The tracker's settings (:class:`TrackerConfig`), in a module that imports no engine:
the command line builds its options from them without loading the tracker
(:mod:`reid.track.tracker`, which re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from reid.decision import check_distance_threshold
from reid.options import check_fields, option

# The frame rate ByteTrack's settings are stated at (its track buffer: 30 frames at 30
# fps); used when a source does not say its own.
REFERENCE_FPS = 30.0

# A least overlap (intersection over union) in (0, 1]: at 0 any box would continue a track.
Overlap = Annotated[float, Field(gt=0, le=1)]
# A detection score a track's rules compare with: the scores of the detectors whose boxes
# are tracked are probabilities, in (0, 1].
Score = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


@dataclass
class TrackerConfig:
    """``iou``: least overlap that continues a track with a confident detection
    (ByteTrack's first-stage match threshold, a cost 1 - IoU of at most 0.8);
    ``low_iou``: least overlap for a weak one (ByteTrack's second stage, 0.5: weak
    boxes are less sure).
    ``high_score``: detection score (a probability, in (0, 1]) from which a detection
    is confident; None (the default, and the only choice for a detector whose scores are
    no probabilities, such as HOG's margins) counts every detection as confident, and the
    second stage then has nothing to do.  The commands fill a None in: ``reid query``
    with its detector's confident score (:func:`reid.pipeline.stream.tracker_for`),
    ``reid track`` with ByteTrack's 0.6 and 0.7 for a file of probabilities
    (:func:`reid.track.mot.file_config`).
    ``start_score``: least score of a detection that no track took to start a new track
    (ByteTrack: 0.1 above its confident score, 0.7); None: any confident detection does.
    ``lost_seconds``: how long a track may go unseen (a missed detection, an occlusion)
    before it ends: ByteTrack's buffer of 30 frames at 30 fps.  ``appearance``: largest
    embedding distance (Euclidean between unit vectors, 0..2) from a track's smoothed
    embedding for a match, or None for no gate.  ``min_boxes``: a new track is tentative
    until it has this many boxes in consecutive frames (at least 2): a tentative track
    missing a frame ends at once (ByteTrack's unconfirmed tracks, SORT's ``min_hits``
    probation), and tracks with fewer boxes are detector noise, never reported.
    ``embedding_momentum``: weight of the past in the exponential moving average of a
    track's embeddings that detections are compared with (BoT-SORT's and StrongSORT's
    0.9); None compares with the plain mean."""

    iou: Overlap = option(0.2, help="Least box overlap (IoU) that continues a track.")
    low_iou: Overlap = 0.5
    high_score: Score | None = option(
        None,
        flag="--track-high-score",
        help="Detection score from which a detection may start a track; weaker ones only continue tracks. "
        "ByteTrack's, for scores that are probabilities: 0.6.",
        default_text="reid track: 0.6 for scores that are probabilities, else every detection may",
    )
    start_score: Score | None = option(
        None,
        flag="--track-start-score",
        help="Least score of a detection no track took to start a new track. ByteTrack's: 0.7.",
        default_text="reid track: 0.7 for scores that are probabilities, else any confident one",
    )
    lost_seconds: Annotated[float, Field(ge=0, le=86_400, allow_inf_nan=False)] = option(
        1.0, help="Seconds a track may go unseen before it ends."
    )
    appearance: float | None = option(
        None, help="Also require this embedding distance or less to continue a track (none: boxes alone)."
    )
    min_boxes: Annotated[int, Field(ge=1, le=1_000_000)] = option(3, help="Drop tracks with fewer boxes (detector noise).")
    embedding_momentum: Annotated[float, Field(ge=0, lt=1)] | None = 0.9

    def __post_init__(self) -> None:
        check_fields(self)
        check_distance_threshold(self.appearance, "appearance")

    def lost_frames(self, fps: float | None) -> int:
        """``lost_seconds`` in frames at ``fps`` (None: :data:`REFERENCE_FPS`)."""
        return round(self.lost_seconds * (fps or REFERENCE_FPS))
