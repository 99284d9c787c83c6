"""What a check-in enrols and decides, and how faces are found (:class:`CheckinConfig`),
in a module that imports no engine (PyTorch, OpenCV, FAISS): the command lines build their
options and help from these fields (:func:`reid.cli.with_config_options`) without loading a
detector or an encoder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reid import THRESHOLD_HELP, ConfigValueError, check_distance_threshold, check_fields, option
from reid.pipeline import (
    EVERY_FRAME, NO_FACE_HELP, BatchSize, EnrolConfig, Every, MaxFrames, QueryConfig, TopK, check_detect,
)  # fmt: skip

if TYPE_CHECKING:
    from reid.detect import Detector
    from reid.models import Encoder
    from reid.pipeline import ChooseCrop, SubjectRule

# Impostor pairs a calibration half takes at most (a seeded sample beyond).
DEFAULT_MAX_IMPOSTORS = 50_000
DETECT_HELP = (
    "auto: photos whole (aligned chips when the model's card asks), video frames through the face detector; "
    "face: detect everywhere (photos: see --no-face); none: everything whole."
)


@dataclass
class CheckinConfig:
    """``gallery`` None: ``out/gallery``.  ``claim``: the name a 1:1 check compares every face
    with (None: 1:N).  ``threshold`` None: the model card's, else the gallery's.  ``detect``
    ("auto", "face" or "none"), ``face_detector`` and ``no_face`` say where faces come
    from (see :mod:`apps.face_checkin.checkin`).  ``threshold_source`` says how a given
    threshold was chosen (None: given by the user).  The defaults and ranges of the face
    crops, of the batches, of the nearest people logged and of the frames kept are reid's
    (:class:`reid.pipeline.EnrolConfig`, :class:`reid.pipeline.QueryConfig`,
    :func:`reid.pipeline.open_source`).  Raises ConfigValueError naming the key of a wrong
    value."""

    people: Path | None = option(help="Folder of <person>/<photos> to enrol (photos already enrolled are skipped).")
    out: Path = option(short="-o", help="Folder for decisions.jsonl, summary.json (and the gallery).")
    sources: list[str]
    gallery: str | None = option(
        None, short="-g", help="Gallery: a folder, or a bare name under galleries/ as reid's --gallery.",
        default_text="OUT/gallery",
    )
    claim: str | None = option(None, help="1:1: is each face this enrolled person?", default_text="1:N")
    threshold: float | None = option(None, help=THRESHOLD_HELP, default_text="the model card's calibrated one")
    threshold_source: str | None = None
    detect: str = option(EnrolConfig.detect, help=DETECT_HELP)
    face_detector: str | None = option(
        None, flag="--detector", help="Face detector: haar or yunet.", default_text="haar; yunet for aligned chips"
    )
    no_face: str = option(EnrolConfig.no_face, help=f"{NO_FACE_HELP} Incoming photos skipped are logged as no_face.")
    every: Every = option(EVERY_FRAME, help="Videos and cameras: keep one frame in N.")
    max_frames: MaxFrames | None = option(None, help="Videos and cameras: stop after N frames.", default_text="every frame")
    top_k: TopK = option(QueryConfig.top_k, help="Nearest people logged with each decision.")
    margin: float | None = EnrolConfig.margin
    batch_size: BatchSize = EnrolConfig.batch_size
    append: bool = option(False, switch=True, help="Add to OUT/decisions.jsonl instead of starting it afresh.")

    def __post_init__(self) -> None:
        check_fields(self)
        # Check-in finds faces; --detect person is reid's word for people, not for this app.
        if self.detect == "person":
            raise ConfigValueError("detect", "person: check-in finds faces; choose auto, face or none", sep=" ")
        try:
            check_detect(self.detect, self.no_face, self.face_detector)
            if self.face_detector is not None:
                # The detectors' table is imported here, when a check-in is set up, not for help.
                from reid.detect import check_detector

                check_detector(self.face_detector, "face")
        except ConfigValueError as exc:
            # reid's checks name the detector by its option's key; this config's is face_detector.
            raise ConfigValueError("face_detector" if exc.key == "detector" else exc.key, exc.problem, exc.sep) from None
        check_distance_threshold(self.threshold, "threshold")
        if self.claim is not None and not self.claim.strip():
            raise ConfigValueError("claim", "must name an enrolled person", sep=" ")

    @property
    def gallery_path(self) -> Path:
        """The gallery's folder: ``gallery`` resolved as reid resolves ``--gallery``
        (:func:`reid.gallery.resolve_gallery_path`), else ``out/gallery``."""
        from reid.gallery import resolve_gallery_path

        return resolve_gallery_path(self.gallery) if self.gallery is not None else self.out / "gallery"

    @property
    def mode(self) -> str:
        return "1:1" if self.claim is not None else "1:N"

    def photo_rule(self, encoder: Encoder, pick: str | ChooseCrop = "all") -> SubjectRule:
        """How photos (enrolment photos, ``pick`` "largest"; incoming image files, "all")
        are cut to their faces for ``encoder``: reid's :func:`reid.pipeline.photo_rule`,
        where ``face_detector`` under "auto" is the detector of video frames and cuts
        photos only into the aligned chips an encoder asks for."""
        from reid.pipeline import photo_rule

        aligned = encoder.aligned_face_size
        detector = None if self.detect == "auto" and aligned is None else self.face_detector
        return photo_rule(self.detect, detector, self.no_face, aligned, self.margin, pick)

    def frame_detector(self, encoder: Encoder) -> Detector | None:
        """The face detector of video and camera frames (None under "none": taken whole):
        ``face_detector``, else reid's default for faces given to ``encoder`` (YuNet, whose
        landmarks align the chips, when it asks for aligned faces)."""
        from reid.pipeline import photo_rule

        if self.detect == "none":
            return None
        return photo_rule("face", self.face_detector, self.no_face, encoder.aligned_face_size, self.margin).detector
