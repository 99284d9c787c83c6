"""The Open Model Zoo's person detectors (``--detector person-detection-retail-0013``,
``pedestrian-detection-adas-0002``), OpenVINO IR files run by OpenVINO's runtime on the CPU.

Both networks are SSDs ending in a DetectionOutput layer, as their model cards say: the
frame is resized to the input (no letterbox) and given as BGR 0..255, and the output
``[1, 1, 200, 7]`` holds one row per box, (image id, label, confidence, x0, y0, x1, y1)
with the corners as shares of the frame's width and height, already through the layer's
own NMS (0.45) and sorted by confidence.  A row of image id -1 ends the list; this
runtime fills unused rows with zeros instead (label 0, confidence 0), so rows of label 1
(person) alone are kept.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from reid.detect.base import Detection, clipped_detection
# The settings live where the command line reads them without this detector; named here too.
from reid.detect.configs import (
    AdasPedestrianConfig as AdasPedestrianConfig,
    OmzDetectorConfig as OmzDetectorConfig,
    RetailPersonConfig as RetailPersonConfig,
)
from reid.errors import ModelError
from reid.models.runtime import first_line, read_openvino_ir

# The DetectionOutput label of a person in both detectors (0 is the background).
PERSON_LABEL = 1


def detection_output_boxes(
    rows: np.ndarray, shape: tuple[int, ...], floor: float, label: int = PERSON_LABEL
) -> tuple[np.ndarray, np.ndarray]:
    """Boxes of a DetectionOutput layer's (N, 7) ``rows`` (image id, label, confidence,
    x0, y0, x1, y1 as shares of the frame) in a frame of ``shape`` (H, W, ...): (M, 4) float64
    (x, y, w, h) in frame pixels and their (M,) confidences, best first, of the rows before the
    first of image id -1 whose label is ``label`` and confidence at least ``floor``."""
    rows = np.asarray(rows, dtype=np.float64).reshape(-1, 7)
    ended = np.flatnonzero(rows[:, 0] < 0)
    if ended.size:
        rows = rows[: ended[0]]
    rows = rows[(rows[:, 1] == label) & (rows[:, 2] >= max(floor, 1e-6))]
    rows = rows[np.argsort(-rows[:, 2], kind="stable")]
    height, width = shape[0], shape[1]
    corners = rows[:, 3:7] * np.array([width, height, width, height], dtype=np.float64)
    return np.c_[corners[:, :2], corners[:, 2:] - corners[:, :2]], rows[:, 2]


class OmzDetector:
    """People from an Open Model Zoo SSD person detector's IR (``xml``, its ``.bin``
    beside it), best score first.  Raises ModelError naming the file when a part is
    missing or is no SSD person detector, or when OpenVINO is not installed."""

    kind = "person"

    def __init__(self, xml: str | Path, config: OmzDetectorConfig | None = None) -> None:
        self.path = Path(xml)
        self.config = config or OmzDetectorConfig()
        core, model = read_openvino_ir(self.path, "an Open Model Zoo SSD detector")
        in_shape, out_shape = list(model.inputs[0].get_shape()), list(model.outputs[0].get_shape())
        if len(in_shape) != 4 or in_shape[:2] != [1, 3] or len(out_shape) != 4 or out_shape[-1] != 7:
            raise ModelError(
                f"{self.path}: input {in_shape} and output {out_shape} are no SSD detector's "
                "([1, 3, H, W] in, DetectionOutput [1, 1, N, 7] out)"
            )
        self.size = (int(in_shape[2]), int(in_shape[3]))
        properties = {} if self.config.threads is None else {"INFERENCE_NUM_THREADS": self.config.threads}
        self._request = core.compile_model(model, "CPU", properties).create_infer_request()

    @property
    def confident_score(self) -> float:
        return self.config.min_score

    def network_input(self, image: np.ndarray) -> np.ndarray:
        """The (1, 3, H, W) float32 BGR 0..255 input of an RGB uint8 image, resized to the
        network's input without letterbox (as the Open Model Zoo's demos do)."""
        resized = cv2.resize(image, (self.size[1], self.size[0]), interpolation=cv2.INTER_LINEAR)
        return np.ascontiguousarray(resized[:, :, ::-1].transpose(2, 0, 1)[None], dtype=np.float32)

    def detect(self, image: np.ndarray) -> list[Detection]:
        """People in an RGB uint8 (H, W, 3) image down to the config's ``floor``, boxes in
        its pixels, best score first; those under ``confident_score`` are weak."""
        if image.shape[0] == 0 or image.shape[1] == 0:
            return []
        rgb = image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        try:
            rows = self._request.infer([self.network_input(rgb)])[0]
        except Exception as exc:
            size = f"{self.size[0]}x{self.size[1]}"
            raise ModelError(f"{self.path}: the network failed on a {size} input ({first_line(exc)})") from exc
        rects, scores = detection_output_boxes(np.asarray(rows), image.shape, self.config.floor)
        found = [clipped_detection(rect, float(score), image.shape, self.kind) for rect, score in zip(rects, scores)]
        return [d for d in found if d.box[2] > 0 and d.box[3] > 0]
