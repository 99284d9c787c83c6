"""The ONNX packages, imported where an ONNX file is written, rewritten or run: one error
naming the extra that brings them, and the first line of the errors onnxruntime raises."""

from __future__ import annotations

import importlib
from typing import Any

from reid.errors import ModelError

ONNX_EXTRA = 'pip install "reid-toolkit[onnx]"'


def _imported(module: str, purpose: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ModelError(f"{purpose} needs the {module} package, which is not installed: {ONNX_EXTRA}") from None


def import_onnxruntime(purpose: str) -> Any:
    """onnxruntime, or ModelError (one line: ``purpose``, then the extra to install)."""
    return _imported("onnxruntime", purpose)


def import_onnx(purpose: str) -> Any:
    """The onnx package (reading and editing graphs), or ModelError as :func:`import_onnxruntime`."""
    return _imported("onnx", purpose)


def first_line(exc: BaseException) -> str:
    """The first line of an onnxruntime error (its messages run to several), else its class."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__
