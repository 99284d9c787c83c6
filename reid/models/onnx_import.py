"""Weights of an ONNX export of torchreid's OSNet, read back as torchreid's state_dict.

An exporter keeps the names of the layers it leaves alone (``conv2.0.conv2a.conv1.weight``,
a gate's ``fc1``) and folds every BatchNorm that follows a convolution into it: the
convolution gets weight ``W * g / sqrt(v + e)`` and bias ``b - m * g / sqrt(v + e)``, under
names such as ``onnx::Conv_1257``. The original BatchNorm cannot be recovered from that, but
the eval forward can: the folded convolution goes into the convolution and its bias into
the BatchNorm that follows it, which is set to the identity (weight 1, running mean 0,
running variance ``1 - eps``) plus that bias. Convolutions are matched by the order the
network runs them (the order of the graph's Conv nodes), each checked by shape; a BatchNorm
the exporter kept is read as it is. The result is then run beside the file (onnxruntime,
the same input) and refused unless its embedding agrees (cosine >= :data:`MIN_COSINE`, no
value off by more than :data:`MAX_RELATIVE_ERROR` of the largest).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from reid.errors import ModelError
from reid.models.osnet import OSNET_VARIANTS, OSNet, LightConv3x3
from reid.models.runtime import first_line, import_onnx, import_onnxruntime

# The least cosine between the file's embedding and the imported network's, and the
# largest difference between them as a share of the file's largest value: an exact import
# differs by float rounding (1e-6 here), one weight in a wrong place of one shape by
# 1e-3 or more while its cosine can stay above 0.99998.
MIN_COSINE = 0.9999
MAX_RELATIVE_ERROR = 1e-4
_CHECK_SEED = 0
_CHECK_BATCH = 2


def _conv_norms(network: nn.Module) -> dict[str, str]:
    """Each convolution followed by a BatchNorm2d, by module name: its BatchNorm's name."""
    pairs = {}
    for name, module in network.named_modules():
        bn = getattr(module, "bn", None)
        if not isinstance(bn, nn.BatchNorm2d):
            continue
        conv = "conv2" if isinstance(module, LightConv3x3) else "conv"
        pairs[f"{name}.{conv}"] = f"{name}.bn"
    return pairs


def _scope_module(node_name: str, convs: set[str]) -> str | None:
    """The module a Conv node was exported from, by its scoped name: ``/conv2/conv2.0/
    conv2b/conv2b.1/conv2/Conv`` is ``conv2.0.conv2b.1.conv2`` (a container's child is
    named with its parent's name, a module run again gets ``_1``, ``_2``, ...)."""
    parts: list[str] = []
    for token in node_name.strip("/").split("/")[:-1]:
        if parts and token.startswith(parts[-1] + "."):
            parts[-1] = token
        else:
            parts.append(token)
    name = ".".join(parts)
    if name not in convs:
        name = re.sub(r"_\d+$", "", name)
    return name if name in convs else None


class _Graph:
    """The graph's initializers as arrays and which node reads each node's output."""

    def __init__(self, model: Any, onnx: Any, path: Path) -> None:
        self.path = path
        self.nodes = list(model.graph.node)
        self.arrays = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        # An exporter stores equal tensors once and hands them on through Identity nodes.
        for node in self.nodes:
            if node.op_type == "Identity" and node.input[0] in self.arrays:
                self.arrays[node.output[0]] = self.arrays[node.input[0]]
        self.readers: dict[str, list[Any]] = {}
        for node in self.nodes:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)

    def array(self, node: Any, index: int) -> np.ndarray | None:
        """Input ``index`` of ``node`` as an array; None when absent, ModelError when it is
        computed rather than stored."""
        if index >= len(node.input) or not node.input[index]:
            return None
        name = node.input[index]
        if name not in self.arrays:
            raise ModelError(f"{self.path}: input {name} of {node.op_type} node {node.name} is not a stored tensor")
        return self.arrays[name]

    def next_norm(self, node: Any) -> Any | None:
        """The BatchNormalization that alone reads ``node``'s output, if one does."""
        readers = self.readers.get(node.output[0], [])
        return readers[0] if len(readers) == 1 and readers[0].op_type == "BatchNormalization" else None

    def attribute(self, node: Any, name: str, default: Any) -> Any:
        for attribute in node.attribute:
            if attribute.name == name:
                return attribute.f if attribute.type == attribute.FLOAT else attribute.i
        return default


def _put(state: dict[str, torch.Tensor], key: str, array: np.ndarray, path: Path) -> None:
    """Store ``array`` under ``key``; a key stored before (a module run twice) must get
    the same values again."""
    tensor = torch.from_numpy(np.array(array, dtype=np.float32))
    if key in state and not torch.equal(state[key], tensor):
        raise ModelError(f"{path}: {key} is run twice in the graph with different weights")
    state[key] = tensor


def _norm(state: dict[str, torch.Tensor], prefix: str, graph: _Graph, node: Any, eps: float) -> None:
    """A BatchNormalization node the exporter kept, as ``prefix``'s tensors (its epsilon
    must be the network's)."""
    node_eps = graph.attribute(node, "epsilon", 1e-5)
    if abs(node_eps - eps) > 1e-9:
        raise ModelError(f"{graph.path}: BatchNormalization {node.name} has epsilon {node_eps}, the network's is {eps}")
    for index, part in enumerate(("weight", "bias", "running_mean", "running_var"), start=1):
        _put(state, f"{prefix}.{part}", graph.array(node, index), graph.path)


def _identity_norm(state: dict[str, torch.Tensor], prefix: str, bias: np.ndarray, eps: float, path: Path) -> None:
    """The BatchNorm after a convolution it was folded into: the identity plus the folded bias."""
    _put(state, f"{prefix}.weight", np.ones_like(bias), path)
    _put(state, f"{prefix}.bias", bias, path)
    _put(state, f"{prefix}.running_mean", np.zeros_like(bias), path)
    _put(state, f"{prefix}.running_var", np.full_like(bias, 1.0 - eps), path)


def _shape_check(path: Path, what: str, array: np.ndarray | None, expected: torch.Tensor) -> np.ndarray:
    if array is None or tuple(array.shape) != tuple(expected.shape):
        shape = "nothing" if array is None else list(array.shape)
        raise ModelError(f"{path}: does not map onto {what}: {shape} in the file, {list(expected.shape)} here")
    return array


def osnet_onnx_state(path: Path, architecture: str) -> dict[str, torch.Tensor]:
    """The tensors of ``path``, an ONNX export of torchreid's ``architecture`` (an OSNet,
    its ``fc`` embedding included), under torchreid's names, classifier excluded, checked
    by running both on the same input.

    Raises ModelError, one line naming the file, for a file that is not ONNX, a graph whose
    convolutions, fully connected layer or BatchNorms do not map one to one by shape onto
    the network, or an import whose embedding differs from the file's (cosine below
    :data:`MIN_COSINE`, or a value off by more than :data:`MAX_RELATIVE_ERROR`).
    """
    path = Path(path)
    if architecture not in OSNET_VARIANTS:
        raise ModelError(f"{path}: an ONNX file imports as an OSNet only, not {architecture}")
    onnx = import_onnx(f"{path}: importing ONNX weights")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # onnx raises DecodeError, OSError, ... for a file that is not ONNX
        raise ModelError(f"{path}: not an ONNX model ({first_line(exc)})") from None
    graph = _Graph(model, onnx, path)
    network = OSNet(architecture, num_classes=1).eval()
    target = network.state_dict()
    norms = _conv_norms(network)
    inputs = [i for i in model.graph.input if i.name not in graph.arrays]
    dims = inputs[0].type.tensor_type.shape.dim if len(inputs) == 1 else []
    if len(dims) != 4 or not all(d.dim_value > 0 for d in dims[2:]):
        raise ModelError(f"{path}: an OSNet export has one image input [N,3,H,W] of fixed size")
    input_size = (int(dims[2].dim_value), int(dims[3].dim_value))
    modules = {name for name, module in network.named_modules() if isinstance(module, nn.Conv2d)}
    convs = [n for n in graph.nodes if n.op_type == "Conv"]
    order = [_scope_module(n.name, modules) for n in convs]
    unnamed = [n.name or "(unnamed)" for n, name in zip(convs, order) if name is None]
    if unnamed:
        raise ModelError(f"{path}: Conv node {unnamed[0]} is named after no convolution of {architecture}")
    absent = sorted(modules - set(order))
    if absent:
        raise ModelError(f"{path}: the graph has no convolution for {architecture}'s {absent[0]} ({len(absent)} absent)")
    state: dict[str, torch.Tensor] = {}
    used_norms = set()
    for name, node in zip(order, convs):
        weight = _shape_check(path, f"{name}.weight", graph.array(node, 1), target[f"{name}.weight"])
        _put(state, f"{name}.weight", weight, path)
        bias = graph.array(node, 2)
        kept = graph.next_norm(node)
        if name in norms:
            eps = getattr(network.get_submodule(norms[name]), "eps")
            if kept is not None and bias is None:
                _norm(state, norms[name], graph, kept, eps)
                used_norms.add(kept.name)
            else:
                bias = _shape_check(path, f"{name}'s folded BatchNorm bias", bias, target[f"{norms[name]}.bias"])
                _identity_norm(state, norms[name], bias, eps, path)
        elif f"{name}.bias" in target:
            _put(state, f"{name}.bias", _shape_check(path, f"{name}.bias", bias, target[f"{name}.bias"]), path)
        elif bias is not None:
            raise ModelError(f"{path}: the graph's convolution for {name} has a bias; {architecture}'s has none there")
    gemms = [n for n in graph.nodes if n.op_type in ("Gemm", "MatMul")]
    if len(gemms) != 1 or gemms[0].op_type != "Gemm":
        raise ModelError(f"{path}: {len(gemms)} fully connected layers in the graph; torchreid's OSNet has one (fc)")
    gemm = gemms[0]
    weight = graph.array(gemm, 1)
    if weight is not None and not graph.attribute(gemm, "transB", 0):
        weight = weight.T
    _put(state, "fc.0.weight", _shape_check(path, "fc.0.weight", weight, target["fc.0.weight"]), path)
    _put(state, "fc.0.bias", _shape_check(path, "fc.0.bias", graph.array(gemm, 2), target["fc.0.bias"]), path)
    fc_norm = graph.next_norm(gemm)
    if fc_norm is None:
        raise ModelError(f"{path}: the graph's fully connected layer is not followed by fc's BatchNorm1d")
    _norm(state, "fc.1", graph, fc_norm, network.fc[1].eps)
    used_norms.add(fc_norm.name)
    stray = [n.name or n.op_type for n in graph.nodes if n.op_type == "BatchNormalization" and n.name not in used_norms]
    if stray:
        raise ModelError(f"{path}: BatchNormalization {stray[0]} follows no layer of {architecture} that has one")
    state = {k: v.reshape(target[k].shape) for k, v in state.items()}
    # A graph keeps no BatchNorm counters; torchreid's checkpoints hold them.
    state.update({k: torch.zeros((), dtype=torch.long) for k in target if k.endswith("num_batches_tracked")})
    missing = [k for k in target if k not in state and not k.startswith("classifier.")]
    if missing:
        raise ModelError(f"{path}: the graph gives no value for {missing[0]} ({len(missing)} tensors)")
    _check(path, network, state, inputs[0].name, input_size)
    return state


def _check(path: Path, network: OSNet, state: dict[str, torch.Tensor], input_name: str, input_size: tuple[int, int]) -> None:
    """Run the file and the imported network on one seeded input; ModelError unless their
    embeddings agree row by row."""
    network.load_state_dict(state, strict=False)
    generator = torch.Generator().manual_seed(_CHECK_SEED)
    images = torch.randn(_CHECK_BATCH, 3, *input_size, generator=generator)
    ort = import_onnxruntime(f"{path}: checking ONNX weights against their graph")
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        expected = session.run(None, {input_name: images.numpy()})[0]
    except Exception as exc:  # onnxruntime's errors have no common base worth naming
        raise ModelError(f"{path}: onnxruntime cannot run the file ({first_line(exc)})") from None
    with torch.no_grad():
        got = network(images).numpy()
    if expected.shape != got.shape:
        raise ModelError(f"{path}: the file embeds to {list(expected.shape)}, the imported network to {list(got.shape)}")
    cosine = float(((expected * got).sum(1) / (np.linalg.norm(expected, axis=1) * np.linalg.norm(got, axis=1) + 1e-12)).min())
    error = float(np.abs(expected - got).max() / max(float(np.abs(expected).max()), 1e-12))
    if cosine < MIN_COSINE or error > MAX_RELATIVE_ERROR:
        raise ModelError(
            f"{path}: the imported weights do not reproduce the file: embedding cosine {cosine:.6f}, largest "
            f"difference {error:.1e} of its largest value (at least {MIN_COSINE} and at most {MAX_RELATIVE_ERROR} needed)"
        )
