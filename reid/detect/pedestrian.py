"""``--detector pedestrian`` (the person default): SSDLite person boxes in the shape
pedestrian benchmarks give a walking person.

The network is :class:`reid.detect.SSDLiteDetector`'s (SSDLite-MobileNetV2 trained on VOC
persons).  VOC's annotation guidelines box every visible pixel of a person, swinging
arms and a stride's feet included, and the network learnt boxes of that shape; pedestrian
benchmarks box the body.  Caltech Pedestrian (Dollar et al., "Pedestrian Detection: An
Evaluation of the State of the Art", PAMI 2012) standardises every box, ground
truth and detection alike, to a width of 0.41 times its height about its vertical centre
line, because annotated widths vary with the pose while heights do not; CityPersons
(Zhang et al., CVPR 2017) draws its full-body boxes at that aspect ratio.  This detector
does the same with SSDLite's boxes: the height and the centre line are kept, the width
becomes ``box_aspect`` x height, and the box is clipped to the frame.  The ratio comes
from those two benchmarks, not from any video the project is measured on.

One network pass at the trained 300x300 input by default, the cheapest SSDLite gives: a
live query at 10 frames a second has under 100 ms a frame for everything, and the pass
takes about half of it on two idle cores (docs/detectors.md, Measured).  ``min_height``
adds SSDLite's second pass for smaller people, at about twice the time (see
:class:`reid.detect.SSDLiteConfig`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from reid.detect.base import Detection, clipped_detection
from reid.detect.ssdlite import SSDLiteDetector
# The settings live where the command line reads them without this detector; named here too.
from reid.detect.configs import PEDESTRIAN_ASPECT as PEDESTRIAN_ASPECT, PedestrianConfig as PedestrianConfig


def standard_shape(detection: Detection, aspect: float, shape: tuple[int, ...]) -> Detection:
    """``detection`` with its width set to ``aspect`` x its height about its vertical centre
    line, clipped to an image of ``shape``; score and kind kept."""
    x, y, w, h = detection.box
    width = aspect * h
    rect = (x + w / 2 - width / 2, y, width, h)
    return clipped_detection(np.asarray(rect, dtype=np.float64), detection.score, shape, detection.kind)


class PedestrianDetector:
    """SSDLite-MobileNetV2 person boxes standardised to the pedestrian aspect ratio, best
    score first.  Raises ModelError (with the ``reid models fetch`` command) when the
    SSDLite graph is neither cached nor installed."""

    kind = "person"

    def __init__(self, config: PedestrianConfig | None = None, graph: Path | None = None) -> None:
        self.config = config or PedestrianConfig()
        self.ssd = SSDLiteDetector(self.config.ssdlite(), graph)

    @property
    def confident_score(self) -> float:
        return self.config.min_score

    def _shaped(self, found: list[Detection], shape: tuple[int, ...]) -> list[Detection]:
        if self.config.box_aspect is None:
            return found
        shaped = [standard_shape(d, self.config.box_aspect, shape) for d in found]
        return [d for d in shaped if d.box[2] > 0 and d.box[3] > 0]

    def detect(self, image: np.ndarray) -> list[Detection]:
        """People in an RGB uint8 (H, W, 3) image, confident and weak as SSDLite's (see
        :meth:`reid.detect.SSDLiteDetector.detect`), boxes in its pixels, best score first."""
        return self._shaped(self.ssd.detect(image), image.shape)
