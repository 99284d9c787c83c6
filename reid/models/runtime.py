"""The model runtimes, imported where a model file is written, rewritten or run: the ONNX
packages and OpenVINO, each with one error naming the extra that brings it, and the first
line of the errors the runtimes raise."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from reid.errors import ModelError

ONNX_EXTRA = 'pip install "reid-toolkit[onnx]"'
OPENVINO_EXTRA = 'pip install "reid-toolkit[openvino]"'


def _imported(module: str, purpose: str, extra: str = ONNX_EXTRA) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ModelError(f"{purpose} needs the {module} package, which is not installed: {extra}") from None


def import_onnxruntime(purpose: str) -> Any:
    """onnxruntime, or ModelError (one line: ``purpose``, then the extra to install)."""
    return _imported("onnxruntime", purpose)


def import_onnx(purpose: str) -> Any:
    """The onnx package (reading and editing graphs), or ModelError as :func:`import_onnxruntime`."""
    return _imported("onnx", purpose)


def import_openvino(purpose: str) -> Any:
    """OpenVINO's runtime (Open Model Zoo IR files: an .xml graph beside its .bin weights),
    or ModelError as :func:`import_onnxruntime`."""
    return _imported("openvino", purpose, OPENVINO_EXTRA)


def read_openvino_ir(xml: Path, purpose: str) -> tuple[Any, Any]:
    """OpenVINO's ``Core`` and the model read from an IR: ``xml`` beside its ``.bin`` of
    the same stem. Raises ModelError, one line naming the file, when OpenVINO is not
    installed (``purpose`` says what needed it), a part is missing or unreadable, or the
    graph has other than one input and one output."""
    weights = xml.with_suffix(".bin")
    for part in (xml, weights):
        if not part.is_file():
            raise ModelError(f"{part}: OpenVINO IR file not found (an IR is an .xml beside its .bin)")
    ov = import_openvino(f"{xml}: {purpose}")
    core = ov.Core()
    try:
        model = core.read_model(str(xml), str(weights))
    except Exception as exc:
        raise ModelError(f"{xml}: not a readable OpenVINO IR ({first_line(exc)})") from None
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ModelError(f"{xml}: {purpose} has one input and one output, not {len(model.inputs)} and {len(model.outputs)}")
    return core, model


def first_line(exc: BaseException) -> str:
    """The first line of an onnxruntime error (its messages run to several), else its class."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__
