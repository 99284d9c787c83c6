"""SSD text graphs: what OpenCV's DNN module needs beside a TensorFlow Object Detection API
frozen graph to run it without TensorFlow.

The frozen graph's pre- and post-processing (resize loops, anchor generation, box
decoding, NMS) are TensorFlow control flow that OpenCV cannot import.  The text graph keeps
the convolutional body and replaces the rest by OpenCV's own layers: ``Flatten`` and
``ConcatV2`` over the box predictors' outputs, one ``PriorBox`` per feature map with the
anchor widths and heights of the SSD anchor generator, a ``Sigmoid`` on the class scores
and ``DetectionOutput`` (box decoding and NMS).

What the graph itself says is read from it: the number of feature maps (``BoxPredictor_i``
scopes), the anchors per location and the number of classes (from the predictors' 1x1
convolution shapes), the box coder's scale factors and the NMS IoU threshold.  What it
does not say (the anchor scales and aspect ratios, the input size) comes from
:class:`SSDAnchors`, whose defaults are those of the TF Object Detection API's SSDLite
MobileNetV2 configs; the anchor counts read from the graph are checked against them.
"""

from __future__ import annotations

import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cv2

from reid.detect.textgraph import Message, Scalar, attr_value, format_text, parse_text
from reid.errors import ModelError

# Ops of the convolutional body that OpenCV's TensorFlow importer builds.
_KEEP_OPS = frozenset(
    {"Conv2D", "BiasAdd", "Add", "AddV2", "Relu", "Relu6", "Placeholder", "FusedBatchNorm", "FusedBatchNormV3",
     "DepthwiseConv2dNative", "ConcatV2", "Mul", "MaxPool", "AvgPool", "Sub", "Pad", "Mean"}
)
# Scopes of TensorFlow-only pre- and post-processing, replaced by OpenCV layers.
_DROP_SCOPES = ("MultipleGridAnchorGenerator/", "Concatenate/", "Postprocessor/", "Preprocessor/")
# Attributes the importer ignores; dropping them keeps the text graph small.
_UNUSED_ATTRS = frozenset({"T", "Tshape", "N", "Tidx", "Tdim", "use_cudnn_on_gpu", "Index", "Tperm", "is_training", "Tpaddings"})
_PREDICTOR = re.compile(r"^BoxPredictor_(\d+)/(ClassPredictor|BoxEncodingPredictor)/weights$")
_INPUT = "image_tensor"


@dataclass(frozen=True)
class SSDAnchors:
    """The SSD anchor generator's settings (``ssd_anchor_generator`` of a pipeline config).

    Layer i of ``layers`` has scale ``min_scale + (max_scale - min_scale) * i / (layers - 1)``
    of the input's shorter side, one anchor per aspect ratio plus one of the geometric mean
    of this and the next scale; with ``reduce_boxes_in_lowest_layer`` the first layer has
    three anchors instead (0.1 square, and ``min_scale`` at ratios 2 and 0.5).
    ``input_size`` is (height, width) in pixels.
    """

    min_scale: float = 0.2
    max_scale: float = 0.95
    aspect_ratios: tuple[float, ...] = (1.0, 2.0, 0.5, 3.0, 0.3333)
    reduce_boxes_in_lowest_layer: bool = True
    input_size: tuple[int, int] = (300, 300)

    def sizes(self, layer: int, layers: int) -> tuple[list[float], list[float]]:
        """Anchor widths and heights of ``layer`` in pixels of the network input."""
        scales = [self.min_scale + (self.max_scale - self.min_scale) * i / (layers - 1) for i in range(layers)] + [1.0]
        if layer == 0 and self.reduce_boxes_in_lowest_layer:
            widths = [0.1, self.min_scale * math.sqrt(2.0), self.min_scale * math.sqrt(0.5)]
            heights = [0.1, self.min_scale / math.sqrt(2.0), self.min_scale / math.sqrt(0.5)]
        else:
            widths = [scales[layer] * math.sqrt(r) for r in self.aspect_ratios]
            heights = [scales[layer] / math.sqrt(r) for r in self.aspect_ratios]
            between = math.sqrt(scales[layer] * scales[layer + 1])
            widths.append(between)
            heights.append(between)
        side = min(self.input_size)
        return [w * side for w in widths], [h * side for h in heights]

    def per_location(self, layer: int) -> int:
        return 3 if layer == 0 and self.reduce_boxes_in_lowest_layer else len(self.aspect_ratios) + 1


@dataclass(frozen=True)
class SSDGraphInfo:
    """What the frozen graph says about its SSD head."""

    layers: int
    anchors_per_location: tuple[int, ...]
    num_classes: int
    box_scales: tuple[float, float, float, float]
    nms_iou: float


def _node_name(node: Message) -> str:
    return node.text("name")


def _attr(node: Message, key: str) -> Message | None:
    for entry in node.all("attr"):
        if isinstance(entry, Message) and entry.text("key") == key:
            value = entry.first("value")
            return value if isinstance(value, Message) else None
    return None


def _set_attr(node: Message, key: str, value: bool | int | float | str | list[float] | list[int]) -> None:
    node.fields = [
        (k, v) for k, v in node.fields if not (k == "attr" and isinstance(v, Message) and v.text("key") == key)
    ]
    node.add("attr", Message().add("key", Scalar(key, True)).add("value", attr_value(value)))


def _const_value(node: Message) -> list[float]:
    value = _attr(node, "value")
    tensor = value.first("tensor") if value is not None else None
    if not isinstance(tensor, Message):
        return []
    return [float(v.text) for v in tensor.all("float_val") + tensor.all("int_val") if isinstance(v, Scalar)]


def _weights_shape(node: Message) -> list[int]:
    value = _attr(node, "value")
    tensor = value.first("tensor") if value is not None else None
    shape = tensor.first("tensor_shape") if isinstance(tensor, Message) else None
    if not isinstance(shape, Message):
        return []
    return [int(dim.text("size", "0")) for dim in shape.all("dim") if isinstance(dim, Message)]


def _new_node(name: str, op: str, inputs: list[str], attrs: dict | None = None) -> Message:
    node = Message().add("name", Scalar(name, True)).add("op", Scalar(op, True))
    for source in inputs:
        node.add("input", Scalar(source, True))
    for key, value in (attrs or {}).items():
        _set_attr(node, key, value)
    return node


def read_graph_nodes(pb: Path) -> list[Message]:
    """The nodes of a frozen TensorFlow graph, without weights (via ``cv2.dnn.writeTextGraph``).

    Raises ModelError naming ``pb`` when OpenCV cannot read it.
    """
    with tempfile.TemporaryDirectory(prefix="reid-graph-") as scratch:
        dump = Path(scratch) / "graph.pbtxt"
        try:
            cv2.dnn.writeTextGraph(str(pb), str(dump))
        except cv2.error as exc:
            raise ModelError(f"{pb}: not a TensorFlow frozen graph OpenCV can read") from exc
        root = parse_text(dump.read_text(), str(pb))
    return [node for node in root.all("node") if isinstance(node, Message)]


def graph_info(nodes: list[Message], source: str) -> SSDGraphInfo:
    """The SSD head's layout read from the graph; ModelError naming ``source`` when the graph
    is not an SSD with convolutional box predictors."""
    predictors: dict[int, dict[str, int]] = {}
    box_scales: dict[str, float] = {}
    nms_iou = 0.6
    for node in nodes:
        name = _node_name(node)
        match = _PREDICTOR.match(name)
        if match:
            shape = _weights_shape(node)
            if len(shape) != 4:
                raise ModelError(f"{source}: {name} has shape {shape}, expected a 1x1 convolution")
            predictors.setdefault(int(match.group(1)), {})[match.group(2)] = shape[3]
        elif re.fullmatch(r"Postprocessor/Decode/truediv(_[1-3])?/y", name) and _const_value(node):
            box_scales[name] = _const_value(node)[0]
        elif name.endswith("/non_max_suppression/iou_threshold"):
            nms_iou = (_const_value(node) or [nms_iou])[0]
    layers = len(predictors)
    if layers < 2 or sorted(predictors) != list(range(layers)) or any(len(p) != 2 for p in predictors.values()):
        raise ModelError(f"{source}: no SSD box predictors (BoxPredictor_0..N) in the graph")
    per_location = tuple(predictors[i]["BoxEncodingPredictor"] // 4 for i in range(layers))
    classes = {predictors[i]["ClassPredictor"] // per_location[i] for i in range(layers)}
    if len(classes) != 1:
        raise ModelError(f"{source}: box predictors disagree on the number of classes ({sorted(classes)})")
    # The box decoder divides ty, tx, th, tw by the y, x, height and width scales, in that order.
    order = [f"Postprocessor/Decode/truediv{suffix}/y" for suffix in ("", "_1", "_2", "_3")]
    scales = tuple(box_scales[k] for k in order) if len(box_scales) == 4 else (10.0, 10.0, 5.0, 5.0)
    return SSDGraphInfo(layers, per_location, classes.pop() - 1, scales, float(nms_iou))  # type: ignore[arg-type]


def ssd_text_graph(pb: Path, anchors: SSDAnchors | None = None, max_detections: int = 100) -> str:
    """The text graph with which ``cv2.dnn.readNetFromTensorflow(pb, text)`` runs the SSD.

    The network's output is ``detection_out``: (1, 1, K, 7) rows of (image, class, score,
    x0, y0, x1, y1) with corners relative to the input (0..1).  Raises ModelError naming
    ``pb`` when it is not a readable SSD graph or its anchor counts differ from ``anchors``.
    """
    anchors = anchors or SSDAnchors()
    nodes = read_graph_nodes(pb)
    info = graph_info(nodes, str(pb))
    expected = tuple(anchors.per_location(i) for i in range(info.layers))
    if info.anchors_per_location != expected:
        raise ModelError(
            f"{pb}: the graph has {list(info.anchors_per_location)} anchors per location, the anchor settings "
            f"give {list(expected)}"
        )

    # Identity nodes only forward their input: point their consumers past them.
    forwards = {_node_name(n): n.text("input") for n in nodes if n.text("op") == "Identity"}

    def resolve(source: str) -> str:
        while source in forwards:
            source = forwards[source]
        return source

    kept: list[Message] = []
    dropped: set[str] = set()
    for node in nodes:
        name, op = _node_name(node), node.text("op")
        if op == "Const":
            continue  # weights are read from the binary graph by name
        if op not in _KEEP_OPS or name.startswith(_DROP_SCOPES):
            dropped.add(name)
            continue
        node.fields = [
            (k, v)
            for k, v in node.fields
            if not (k == "attr" and isinstance(v, Message) and v.text("key") in _UNUSED_ATTRS)
        ]
        kept.append(node)
    placeholder = next((n for n in kept if n.text("op") == "Placeholder" and _node_name(n) == _INPUT), None)
    if placeholder is None:
        raise ModelError(f"{pb}: no {_INPUT} input in the graph")
    for node in kept:
        inputs = [resolve(v.text) for k, v in node.fields if k == "input" and isinstance(v, Scalar)]
        inputs = [i for i in inputs if i.split(":")[0].lstrip("^") not in dropped]
        others = [(k, v) for k, v in node.fields if k != "input"]
        node.fields = others[:2] + [("input", Scalar(i, True)) for i in inputs] + others[2:]
    # The preprocessing (resize, scale to -1..1) is done before the network is called; the
    # first convolution reads the input directly, with its weights.
    first = next((n for n in kept if n.text("op") == "Conv2D"), None)
    if first is None or not first.all("input"):
        raise ModelError(f"{pb}: no convolution in the graph")
    weights = first.all("input")[-1]
    first.fields = [(k, v) for k, v in first.fields if k != "input"]
    first.fields[2:2] = [("input", Scalar(_INPUT, True)), ("input", weights)]

    head: list[Message] = [
        _new_node("concat/axis_flatten", "Const", [], {"value": [-1]}),
    ]
    for label in ("ClassPredictor", "BoxEncodingPredictor"):
        flats = []
        for i in range(info.layers):
            source = f"BoxPredictor_{i}/{label}/BiasAdd"
            head.append(_new_node(f"{source}/Flatten", "Flatten", [source]))
            flats.append(f"{source}/Flatten")
        head.append(_new_node(f"{label}/concat", "ConcatV2", [*flats, "concat/axis_flatten"]))
    for node in kept:
        if re.fullmatch(r"BoxPredictor_\d+/BoxEncodingPredictor/Conv2D", _node_name(node)):
            # TensorFlow orders box offsets (y, x, h, w); DetectionOutput is told so.
            _set_attr(node, "loc_pred_transposed", True)
    variance = [1.0 / info.box_scales[1], 1.0 / info.box_scales[0], 1.0 / info.box_scales[3], 1.0 / info.box_scales[2]]
    priors = []
    for i in range(info.layers):
        widths, heights = anchors.sizes(i, info.layers)
        head.append(
            _new_node(
                f"PriorBox_{i}",
                "PriorBox",
                [f"BoxPredictor_{i}/BoxEncodingPredictor/BiasAdd", _INPUT],
                {"flip": False, "clip": False, "width": widths, "height": heights, "variance": variance},
            )
        )
        priors.append(f"PriorBox_{i}")
    head.append(_new_node("PriorBox/concat", "ConcatV2", [*priors, "concat/axis_flatten"]))
    head.append(_new_node("ClassPredictor/concat3d/shape", "Const", [], {"value": [0, -1, info.num_classes + 1]}))
    head.append(_new_node("ClassPredictor/concat3d", "Reshape", ["ClassPredictor/concat", "ClassPredictor/concat3d/shape"]))
    head.append(_new_node("ClassPredictor/concat/sigmoid", "Sigmoid", ["ClassPredictor/concat3d"]))
    head.append(_new_node("ClassPredictor/concat/sigmoid/Flatten", "Flatten", ["ClassPredictor/concat/sigmoid"]))
    head.append(
        _new_node(
            "detection_out",
            "DetectionOutput",
            ["BoxEncodingPredictor/concat", "ClassPredictor/concat/sigmoid/Flatten", "PriorBox/concat"],
            {
                "num_classes": info.num_classes + 1,
                "share_location": True,
                "background_label_id": 0,
                "nms_threshold": info.nms_iou,
                "confidence_threshold": 0.01,
                "top_k": max_detections,
                "keep_top_k": max_detections,
                "code_type": "CENTER_SIZE",
            },
        )
    )
    graph = _reachable(kept + head, "detection_out")
    return format_text(Message([("node", n) for n in graph]))


def _reachable(nodes: list[Message], output: str) -> list[Message]:
    """The nodes ``output`` depends on, in their original order (the rest would be dead ends
    OpenCV refuses)."""
    by_name = {_node_name(n): n for n in nodes}
    needed: set[str] = set()
    todo = [output]
    while todo:
        name = todo.pop()
        if name in needed or name not in by_name:
            continue
        needed.add(name)
        todo += [v.text.split(":")[0].lstrip("^") for v in by_name[name].all("input") if isinstance(v, Scalar)]
    return [n for n in nodes if _node_name(n) in needed]
