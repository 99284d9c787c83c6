"""What a camera search searches and how (:class:`SearchConfig`), in a module that imports
no engine (PyTorch, OpenCV, FAISS): the command line builds its options and help from these
fields (:func:`reid.cli.with_config_options`) without loading a detector or an encoder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import Field

from reid import (
    THRESHOLD_HELP, ConfigError, ConfigValueError, check_distance_threshold, check_fields, option,
)  # fmt: skip
from reid.detect import DETECTOR_NAMES, PersonDetectorConfig
from reid.pipeline import EVERY_FRAME, BatchSize, EmbedEvery, Every, MaxFrames, QueryConfig, StreamConfig, TopK
from reid.track import TrackerConfig

# Cameras a search takes, numbered from 0 in the order their videos are given.
MAX_CAMERAS = 1024


@dataclass
class SearchConfig:
    """What to search and how.  ``gallery`` None: enrol the tracks of ``reference_camera``
    into a fresh gallery under ``out`` and match the other cameras against it.  ``threshold``
    None: the model card's (else the gallery's); ``threshold_source`` says how a given one
    was chosen (None: given by the user).  A track is named when its nearest
    identity's distance is at most the threshold; with ``one_per_frame`` (the default) no
    two tracks of one camera that share a frame are named the same identity (a person is
    in one place at a time: :func:`reid.decision.one_identity_each_together`), False names
    each track alone.  ``every``, ``max_frames``: each camera's frames kept and read
    (:func:`reid.pipeline.open_source`); ``top_k``: identities fetched per track
    (:class:`reid.pipeline.QueryConfig`'s); ``batch_size``, ``embed_every`` and
    ``tracker``: the tracked-detection stream's (:class:`reid.pipeline.StreamConfig`).
    ``person_detector``: a ``--detector`` name of a person detector (None: reid's default).
    The same defaults and ranges as those.  Raises ConfigValueError naming the key of a
    wrong value."""

    videos: list[str]
    out: Path = option(short="-o", help="Folder for events, videos and the report.")
    gallery: str | None = option(
        None, short="-g",
        help="Match every track against this existing gallery instead of a reference camera: a folder, or a bare "
        "name under galleries/ as reid's --gallery.",
    )
    reference_camera: Annotated[int, Field(ge=0, lt=MAX_CAMERAS)] = option(
        0, help="Camera whose tracks are enrolled as the known people."
    )
    threshold: float | None = option(None, help=THRESHOLD_HELP, default_text="the model card's, else the gallery's")
    threshold_source: str | None = None
    every: Every = option(EVERY_FRAME, help="Keep one frame in N.")
    max_frames: MaxFrames | None = option(None, help="Stop each camera after N kept frames.", default_text="every frame")
    top_k: TopK = option(QueryConfig.top_k, help="Identities fetched per track.")
    batch_size: BatchSize = StreamConfig.batch_size
    embed_every: EmbedEvery = option(
        StreamConfig.embed_every,
        help="Embed a track's crop in one of N of its frames (1: every crop, before linking, so tracks link by "
        "appearance too; above 1: tracks link on boxes alone).",
    )
    detector: PersonDetectorConfig = field(default_factory=PersonDetectorConfig)
    person_detector: str | None = option(
        None,
        flag="--detector",
        help="Person detector.",
        choices=DETECTOR_NAMES["person"],
        default_text="reid's person default; hog with --demo",
    )
    tracker: TrackerConfig = field(default_factory=TrackerConfig)
    one_per_frame: bool = option(
        True,
        help="Never name two tracks of one camera that share a frame the same identity (a person is in one place "
        "at a time); --no-one-per-frame names each track alone.",
    )

    def __post_init__(self) -> None:
        if not self.videos:
            raise ConfigError("give at least one video (one per camera)")
        check_fields(self)
        if self.gallery is None and self.reference_camera >= len(self.videos):
            raise ConfigValueError(
                "reference_camera",
                f"{self.reference_camera}: cameras are numbered 0..{len(self.videos) - 1} in the order the videos are given",
                sep=" ",
            )
        if self.gallery is None and len(self.videos) < 2:
            raise ConfigError(
                "give at least two videos (a reference camera and one to search), or --gallery G to search one"
            )
        check_distance_threshold(self.threshold, "threshold")
        if self.person_detector is not None:
            # A misspelt detector is refused before any gallery is made under ``out``; the
            # detectors' table is imported here, when a search is set up, not for help.
            from reid.detect import check_detector

            try:
                check_detector(self.person_detector, "person")
            except ConfigValueError as exc:
                raise ConfigValueError("person_detector", exc.problem, exc.sep) from None
        self.stream()  # the stream's own checks of its settings together

    def stream(self) -> StreamConfig:
        """Each camera's stream: every track keeps its largest crop (the event thumbnail),
        and a crop a face model finds no face in is embedded whole."""
        return StreamConfig(
            tracker=self.tracker, embed_every=self.embed_every, batch_size=self.batch_size, no_face="whole",
            thumbnails=True,
        )  # fmt: skip
