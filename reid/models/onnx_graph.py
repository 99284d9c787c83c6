"""Rewrites of published ONNX files that onnxruntime refuses or runs slowly, done once
when the artefact is fetched (:mod:`reid.models.registry`), never at load time.

:func:`float_weights` keeps only the graph inputs that are fed images: it drops the inputs
that no node reads (OpenCV zoo's block-quantised SFace declares 29 of them, left by its
quantiser) and those that merely repeat an initializer.  It also folds every
``DequantizeLinear`` of stored int8 weights into the float32 weights it computes
(``(q - zero_point) * scale``, per tensor, per axis or per block as the node says), which
the quantised file would otherwise redo on every call (measured on SFace: 1.8x faster,
embeddings equal to 1e-5).  The image input's batch size becomes free (``N``).  Every
other node is kept as it is, so the graph computes what the published one does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reid.errors import ModelError
from reid.models.runtime import import_onnx, import_onnxruntime

BATCH = "N"


def _dequantized(node: Any, stored: dict[str, np.ndarray], onnx: Any) -> np.ndarray:
    """The float32 tensor a DequantizeLinear node computes from stored tensors."""
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    quantised = stored[node.input[0]].astype(np.float32)
    scale = stored[node.input[1]].astype(np.float32)
    zero = stored[node.input[2]].astype(np.float32) if len(node.input) > 2 and node.input[2] else np.zeros_like(scale)
    axis = attributes.get("axis", 1) % max(quantised.ndim, 1)
    block = attributes.get("block_size", 0)
    if block:
        # One scale per block of ``block`` values along ``axis``; the last block may be short.
        scale = np.repeat(scale, block, axis=axis).take(np.arange(quantised.shape[axis]), axis=axis)
        zero = np.repeat(zero, block, axis=axis).take(np.arange(quantised.shape[axis]), axis=axis)
    elif scale.size > 1:
        shape = [1] * quantised.ndim
        shape[axis] = scale.size
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return ((quantised - zero) * scale).astype(np.float32)


def float_weights(payload: bytes, source: str) -> bytes:
    """The ONNX file ``payload`` with only its image inputs left as graph inputs, its stored
    int8 weights dequantised into float32 ones, and a free batch size; ``source`` names the
    file in errors.

    Raises ModelError when ``payload`` is not an ONNX model, or the rewritten graph fails
    onnx's checker or does not load in onnxruntime.
    """
    onnx = import_onnx(f"{source}: rewriting the graph")
    from onnx import numpy_helper

    try:
        model = onnx.load_model_from_string(payload)
    except Exception as exc:
        raise ModelError(f"{source}: not an ONNX model ({exc.__class__.__name__})") from exc
    graph = model.graph
    stored = {initializer.name: numpy_helper.to_array(initializer) for initializer in graph.initializer}
    nodes, folded = [], []
    for node in graph.node:
        if node.op_type == "DequantizeLinear" and all(name in stored for name in node.input if name):
            folded.append(numpy_helper.from_array(_dequantized(node, stored, onnx), node.output[0]))
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    read = {name for node in graph.node for name in node.input} | {output.name for output in graph.output}
    fed = [value for value in graph.input if value.name in read and value.name not in stored]
    kept = [initializer for initializer in graph.initializer if initializer.name in read]
    del graph.input[:]
    graph.input.extend(fed)
    del graph.initializer[:]
    graph.initializer.extend(kept + folded)
    for value in list(graph.input) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = BATCH
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise ModelError(f"{source}: the rewritten graph is not valid ONNX ({exc.__class__.__name__})") from exc
    rewritten = model.SerializeToString()
    ort = import_onnxruntime(f"{source}: checking the rewritten graph")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        ort.InferenceSession(rewritten, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ModelError(f"{source}: onnxruntime refuses the rewritten graph ({exc.__class__.__name__})") from exc
    return rewritten


REWRITES = {"float-weights": float_weights}
