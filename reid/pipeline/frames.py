"""The frame loop that ``reid query`` and the apps share: decode → detect → crop → drop
empty crops, with the seconds spent decoding and detecting.

>>> timing = stage_timer()
>>> for item in frame_crops(open_source("entrance.mp4"), build_detector(None, "person"), timing=timing):
...     item.frame.index, len(item.crops)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import cv2
import numpy as np

from reid.detect import DEFAULT_MARGIN, Box, Detection, Detector, confident_detections, crop_detection
from reid.errors import ConfigError
from reid.pipeline.sources import Frame, MediaSource


@dataclass
class FrameCrops:
    """A frame and what was cut from it.

    ``crops`` are RGB uint8 (H, W, 3) arrays, ``boxes`` their (x, y, w, h) in the frame
    (before the margin), ``scores`` the detector's scores; a score of None marks the whole
    frame taken as one crop.
    """

    frame: Frame
    crops: list[np.ndarray] = field(default_factory=list, repr=False)
    boxes: list[Box] = field(default_factory=list)
    scores: list[float | None] = field(default_factory=list)


def whole_box(image: np.ndarray) -> Box:
    """The box covering all of ``image``."""
    return (0, 0, int(image.shape[1]), int(image.shape[0]))


def margin_for(detector: Detector | None, margin: float | None) -> float:
    """``margin``, or the default of the detector's kind (0 without a detector)."""
    if margin is not None:
        return margin
    return DEFAULT_MARGIN.get(detector.kind, 0.0) if detector is not None else 0.0


# How the crop of a photo of one subject is chosen among the detector's finds (None:
# nothing usable was found).
ChooseCrop = Callable[[Sequence[Detection]], Detection | None]


def cut_frame(
    frame: Frame,
    detector: Detector | None,
    margin: float | None = None,
    whole_if_none: bool = False,
    align_to: tuple[int, int] | None = None,
    weak: bool = False,
) -> FrameCrops:
    """The crops of one frame: each detection grown by ``margin`` (crops left empty by a
    box outside the frame are dropped), or the whole frame when there is no detector, or
    when nothing is found and ``whole_if_none`` is set.  ``align_to`` (height, width):
    aligned face chips where the detector gives landmarks.  ``weak``: keep the detector's
    weak boxes too, for a tracker (:class:`reid.pipeline.stream.DetectionStream`); else
    only its confident ones (:func:`reid.detect.confident_detections`), as for a photo."""
    image = frame.image
    if detector is None:
        return FrameCrops(frame, [image], [whole_box(image)], [None])
    grow = margin_for(detector, margin)
    found = detector.detect(image) if weak else confident_detections(detector, image)
    cut = FrameCrops(frame)
    for detection in found:
        piece = crop_detection(image, detection, grow, align_to)
        if piece.size:
            cut.crops.append(piece)
            cut.boxes.append(detection.box)
            cut.scores.append(detection.score)
    if not cut.crops and whole_if_none:
        return FrameCrops(frame, [image], [whole_box(image)], [None])
    return cut


def frame_crops(
    source: MediaSource,
    detector: Detector | None,
    margin: float | None = None,
    timing: dict[str, float] | None = None,
    whole_if_none: bool = False,
    align_to: tuple[int, int] | None = None,
    weak: bool = False,
) -> Iterator[FrameCrops]:
    """Decode ``source`` and :func:`cut_frame` each kept frame, in order (``weak`` as there).

    ``timing`` (see :func:`reid.pipeline.stages.stage_timer`) gains the seconds spent in
    "decode" and in "detect" (detection and cropping).  The source is released when the
    iteration ends, however it ends.  Raises what the source raises (DataError for a
    video with no decodable frame).
    """
    frames = source.frames()
    try:
        while True:
            tick = time.perf_counter()
            frame = next(frames, None)
            if timing is not None:
                timing["decode"] += time.perf_counter() - tick
            if frame is None:
                return
            tick = time.perf_counter()
            cut = cut_frame(frame, detector, margin, whole_if_none, align_to, weak)
            if timing is not None:
                timing["detect"] += time.perf_counter() - tick
            yield cut
    finally:
        frames.close()


class ScaledDetector:
    """Runs ``detector`` on the frame scaled by ``scale`` and returns boxes in the frame.

    Below 1 it trades small people for speed: detection cost grows with the pixels it
    scans, while a detector that resizes to a fixed input (a DNN) or whose window is far
    smaller than the people (HOG's is 64x128) loses little.  Raises ConfigError for a
    scale outside (0, 1].
    """

    def __init__(self, detector: Detector, scale: float) -> None:
        if not 0 < scale <= 1:
            raise ConfigError(f"detection scale must be in (0, 1], got {scale}")
        self.detector, self.scale, self.kind = detector, scale, detector.kind
        self.confident_score = detector.confident_score

    def detect(self, image: np.ndarray) -> list[Detection]:
        if self.scale == 1:
            return self.detector.detect(image)
        height, width = image.shape[:2]
        size = (max(1, round(width * self.scale)), max(1, round(height * self.scale)))
        small = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        back = 1 / self.scale
        found = []
        for d in self.detector.detect(small):
            x, y, w, h = d.box
            x0, y0 = min(width, round(x * back)), min(height, round(y * back))
            box = (x0, y0, min(width - x0, round(w * back)), min(height - y0, round(h * back)))
            landmarks = tuple((px * back, py * back) for px, py in d.landmarks)
            found.append(replace(d, box=box, landmarks=landmarks))
        return found
