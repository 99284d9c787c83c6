"""``--detector ssdlite``: an SSDLite-MobileNetV2 person detector run by OpenCV's DNN module.

The frozen graph (TF Object Detection API, trained on VOC persons, MIT) comes from the
pretrained-artefact registry (:data:`reid.models.registry.SSDLITE_PERSON`); the text graph
OpenCV needs beside it is derived from the graph itself (:mod:`reid.detect.ssd`).

The network was trained on 300x300 inputs, where its smallest anchor is 0.1 of the
input's side (30 px; on vtest.avi the tenth-shortest of its people are 33 px tall in the
input).  A whole 768x576 frame squeezed to 300x300 shows it people taller than about 60
frame pixels.  ``min_height`` asks for smaller people: the frame is then also given to the
network at the scale where a person ``min_height`` pixels tall spans those 30 px (the
network is convolutional and its anchors are sized in input pixels), and the boxes of both
passes are merged: the second pass's below a third of the frame's height, the trained
size's at every height.  Each input size has a network of its own: OpenCV re-plans a
network whose input changes shape, which costs more than the pass itself.
"""

from __future__ import annotations

from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np

from reid.detect.base import Detection, clipped_detection, non_max_suppression
from reid.detect.ssd import SSDAnchors, ssd_text_graph
# The settings live where the command line reads them without this detector; named here too.
from reid.detect.configs import SSDLiteConfig as SSDLiteConfig
from reid.detect.names import DETECTOR_ARTEFACTS
from reid.errors import ModelError
from reid.models.registry import SSDLITE_PERSON, cached, fetch_artefact, get_artefact

# Every side of the network input is a multiple of this (the feature maps halve five times).
_STRIDE = 32
# Inputs larger than this many pixels on their longer side are not worth the time.
MAX_INPUT_SIDE = 1600
# People taller than this share of the frame are left to the pass at the trained input size.
LARGE_SHARE = 1 / 3
# The smallest anchor (the lowest feature map's square one), as a share of the input's side.
SMALLEST_ANCHOR = 0.1
# Networks kept, one per input size: photos of many sizes must not pile them up.
MAX_NETS = 4


def model_file(name: str) -> Path:
    """The verified local file of registry artefact ``name``: from the cache, else copied
    from its installed package; ModelError with the fetch command when it is neither."""
    artefact = get_artefact(name)
    path = cached(artefact)
    if path is None and artefact.installed_member() is not None:
        path = fetch_artefact(artefact)
    if path is None:
        then = f", then --detector {DETECTOR_ARTEFACTS[name]}" if name in DETECTOR_ARTEFACTS else ""
        raise ModelError(
            f"model {name} is not in the cache; run `reid models fetch {name}` (needs the package index once){then}"
        )
    return path


def model_available(name: str) -> bool:
    """True when :func:`model_file` finds registry artefact ``name`` without the network:
    cached and verified, or inside its installed package."""
    artefact = get_artefact(name)
    return cached(artefact) is not None or artefact.installed_member() is not None


def _stride_multiple(side: float) -> int:
    return max(_STRIDE, int(round(side / _STRIDE)) * _STRIDE)


class SSDLiteDetector:
    """SSDLite-MobileNetV2 (Sandler et al. 2018) person boxes, best score first."""

    kind = "person"

    def __init__(self, config: SSDLiteConfig | None = None, graph: Path | None = None) -> None:
        self.config = config or SSDLiteConfig()
        self.anchors = SSDAnchors()
        self.graph = graph if graph is not None else model_file(SSDLITE_PERSON)
        self._weights = np.frombuffer(self.graph.read_bytes(), np.uint8)
        self._text = np.frombuffer(ssd_text_graph(self.graph, self.anchors).encode(), np.uint8)
        self._nets: OrderedDict[tuple[int, int], cv2.dnn.Net] = OrderedDict()
        self._net((self.anchors.input_size[1], self.anchors.input_size[0]))
        self._second_pass = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ssdlite-pass")

    def _net(self, size: tuple[int, int]) -> cv2.dnn.Net:
        """The network for inputs of ``size`` (w, h), built on first use."""
        net = self._nets.pop(size, None)
        if net is None:
            try:
                net = cv2.dnn.readNetFromTensorflow(self._weights, self._text)
            except cv2.error as exc:
                raise ModelError(f"{self.graph}: OpenCV {cv2.__version__} cannot build the SSD network from it") from exc
        self._nets[size] = net
        while len(self._nets) > MAX_NETS:
            self._nets.popitem(last=False)
        return net

    def input_size(self, height: int, width: int) -> tuple[int, int]:
        """The network input (width, height) for a frame of ``height`` x ``width`` pixels."""
        trained_h, trained_w = self.anchors.input_size
        if self.config.min_height is None:
            return trained_w, trained_h
        # Scale so that a min_height person is as tall as the smallest anchor, but never
        # above the frame's own pixels: upscaled, blank 768x576 frames showed the network
        # 6 to 8 confident people at min_height=8.
        scale = SMALLEST_ANCHOR * min(trained_h, trained_w) / self.config.min_height
        scale = min(scale, 1.0, MAX_INPUT_SIDE / max(height, width))
        size = _stride_multiple(width * scale), _stride_multiple(height * scale)
        # A pass no larger than the trained one finds no one smaller than it does.
        return (trained_w, trained_h) if size[0] <= trained_w and size[1] <= trained_h else size

    @property
    def confident_score(self) -> float:
        return self.config.min_score

    def _boxes(self, rgb: np.ndarray, size: tuple[int, int], floor: float) -> tuple[np.ndarray, np.ndarray]:
        """(N, 4) (x, y, w, h) frame boxes and (N,) scores (>= ``floor``) of one pass at
        input ``size`` (w, h)."""
        return self._pass(self._net(size), rgb, size, floor)

    @staticmethod
    def _pass(
        net: cv2.dnn.Net, rgb: np.ndarray, size: tuple[int, int], floor: float
    ) -> tuple[np.ndarray, np.ndarray]:
        height, width = rgb.shape[:2]
        # The graph's own preprocessing maps 0..255 to -1..1.
        net.setInput(cv2.dnn.blobFromImage(rgb, 1 / 127.5, size, (127.5, 127.5, 127.5)))
        rows = net.forward().reshape(-1, 7)
        rows = rows[rows[:, 2] >= max(floor, 1e-6)]
        corners = rows[:, 3:7].astype(np.float64) * np.array([width, height, width, height], dtype=np.float64)
        return np.c_[corners[:, :2], corners[:, 2:] - corners[:, :2]], rows[:, 2].astype(np.float64)

    def detect(self, image: np.ndarray) -> list[Detection]:
        """People in an RGB uint8 (H, W, 3) image down to the config's ``floor``, boxes in
        its pixels, best score first; those under ``confident_score`` are weak."""
        return self._detect(image, self.config.floor)

    def _detect(self, image: np.ndarray, floor: float) -> list[Detection]:
        height, width = image.shape[:2]
        if height == 0 or width == 0:
            return []
        rgb = image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        trained = (self.anchors.input_size[1], self.anchors.input_size[0])
        size = self.input_size(height, width)
        if size == trained:
            rects, scores = self._boxes(rgb, trained, floor)
        else:
            # The two passes run side by side on their own networks: OpenCV spreads one
            # small network poorly over the cores, and its forward pass releases the GIL.
            second = self._second_pass.submit(self._pass, self._net(size), rgb, size, floor)
            rects, scores = self._boxes(rgb, trained, floor)
            small_rects, small_scores = second.result()
            # Only the small boxes of the second pass are kept: its large ones lie beyond
            # the sizes the network learnt at that input size and are mostly false.
            small = small_rects[:, 3] < height * LARGE_SHARE
            rects, scores = np.r_[rects, small_rects[small]], np.r_[scores, small_scores[small]]
        if len(rects) == 0:
            return []
        keep = non_max_suppression(rects, scores, self.config.nms_iou)
        found = [clipped_detection(rects[i], float(scores[i]), image.shape, self.kind) for i in keep]
        return [d for d in found if d.box[2] > 0 and d.box[3] > 0]
