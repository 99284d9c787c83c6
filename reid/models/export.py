"""Export a model folder to ONNX or TorchScript, checked against PyTorch before it is kept.

The exported graph takes preprocessed (N, 3, H, W) float32 images (H and W from the card,
N dynamic) and returns the embedding after BNNeck: L2-normalized by default, or raw, as the
card written beside the file (``NAME.card.json``) states in ``normalized_output``.

Before the file is moved into place it is run (onnxruntime, or ``torch.jit.load``) on a few
batches of random images of sizes other than the one traced, and compared with the PyTorch
model; a max abs difference above the tolerance is an error and leaves no file behind.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from reid.errors import ConfigError, ConfigValueError, ModelError
from reid.models.card import ModelCard, file_fingerprint, seal_card
from reid.models.encoder import preprocess
from reid.models.folder import load_model, resolve_model_path
from reid.models.names import DEFAULT_TOLERANCE, EXPORT_FORMATS
from reid.models.onnx import card_path_for, write_card_file
from reid.models.runtime import first_line, import_onnx, import_onnxruntime
from reid.paths import check_output_file, replaced_atomically

SUFFIXES = {"onnx": ".onnx", "torchscript": ".torchscript.pt"}
ONNX_OPSET = 17
TRACE_BATCH = 2
CHECK_BATCHES = (1, 3)


@dataclass
class ExportResult:
    """Where the export went and how closely it reproduces the PyTorch model."""

    path: Path
    card_path: Path
    format: str
    normalized: bool
    max_abs_diff: float
    tolerance: float
    checked_batches: tuple[int, ...]
    card: ModelCard


class EmbeddingHead(nn.Module):
    """The network's eval-mode embedding (after BNNeck), optionally L2-normalized."""

    def __init__(self, network: nn.Module, normalize: bool) -> None:
        super().__init__()
        self.network = network
        self.normalize = normalize

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        embedding = self.network(images).embedding
        return nn.functional.normalize(embedding, dim=1) if self.normalize else embedding


def default_export_path(folder: Path, card: ModelCard, fmt: str) -> Path:
    """``models/NAME/NAME.onnx`` (or ``.torchscript.pt``), beside the weights it came from."""
    return folder / f"{folder.name or card.name}{SUFFIXES[fmt]}"


def check_images(card: ModelCard, batch: int, seed: int) -> torch.Tensor:
    """Random images of odd sizes, preprocessed as the card says: what the file will see."""
    rng = np.random.default_rng(seed)
    height, width = card.input_size
    images = [rng.integers(0, 256, (height + 7 * i, width + 3 * i, 3), dtype=np.uint8) for i in range(batch)]
    return torch.from_numpy(preprocess(images, card))


def _require_onnx(path: Path) -> Any:
    """The onnx module, after checking that onnxruntime is there too for the check."""
    onnx = import_onnx(f"{path}: exporting to ONNX")
    import_onnxruntime(f"{path}: checking an exported ONNX model")
    return onnx


def _write_onnx(head: EmbeddingHead, example: torch.Tensor, path: Path, onnx: Any) -> None:
    with warnings.catch_warnings():
        # The torch.export-based exporter needs onnxscript, which reid does not depend on;
        # the TorchScript-based one handles these networks exactly and warns only about its age.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        torch.onnx.export(
            head,
            (example,),
            str(path),
            dynamo=False,
            input_names=["images"],
            output_names=["embedding"],
            dynamic_axes={"images": {0: "batch"}, "embedding": {0: "batch"}},
            opset_version=ONNX_OPSET,
        )
    onnx.checker.check_model(str(path))


def _write_torchscript(head: EmbeddingHead, example: torch.Tensor, path: Path) -> None:
    with warnings.catch_warnings():
        # torch marks TorchScript deprecated; LibTorch deployments still load only this format.
        warnings.simplefilter("ignore", FutureWarning)
        # The built-in trace check runs the model again; the check below covers more batch sizes.
        traced = torch.jit.trace(head, example, check_trace=False)
        torch.jit.save(traced, str(path))


def _runner(fmt: str, path: Path) -> Callable[[torch.Tensor], np.ndarray]:
    if fmt == "onnx":
        ort = import_onnxruntime(f"{path}: checking the exported ONNX model")
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return lambda batch: session.run(["embedding"], {"images": batch.numpy()})[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        loaded = torch.jit.load(str(path), map_location="cpu").eval()

    def run(batch: torch.Tensor) -> np.ndarray:
        # The profiling executor spends seconds re-optimizing the graph for each new batch
        # size; the check is about the traced operations, which run the same without it.
        with torch.jit.optimized_execution(False), torch.inference_mode():
            return loaded(batch).numpy()

    return run


def _max_abs_diff(head: EmbeddingHead, fmt: str, path: Path, card: ModelCard) -> float:
    run = _runner(fmt, path)
    worst = 0.0
    for seed, batch_size in enumerate(CHECK_BATCHES):
        batch = check_images(card, batch_size, seed)
        with torch.inference_mode():
            expected = head(batch).numpy()
        got = np.asarray(run(batch))
        if got.shape != expected.shape:
            raise ModelError(
                f"{path}: the exported model returned shape {list(got.shape)} for a batch of {batch_size}, "
                f"PyTorch {list(expected.shape)}"
            )
        worst = max(worst, float(np.abs(got.astype(np.float64) - expected).max()))
    return worst


def export_model(
    model: str | Path,
    fmt: str = EXPORT_FORMATS[0],
    out: str | Path | None = None,
    *,
    normalize: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
) -> ExportResult:
    """Export a model folder (path or name under ``models/``) to ``out`` and write its card.

    Raises ModelError, leaving no file at ``out``, when the exported file's embeddings
    differ from PyTorch's by more than ``tolerance`` (max abs difference).
    """
    if fmt not in EXPORT_FORMATS:
        raise ConfigValueError("fmt", f"{fmt!r}: choose one of {', '.join(EXPORT_FORMATS)}", sep=" ")
    if tolerance <= 0:
        raise ConfigValueError("tolerance", f"must be positive, got {tolerance}", sep=" ")
    folder = resolve_model_path(model)
    network, card = load_model(folder)
    path = Path(out) if out is not None else default_export_path(folder, card, fmt)
    check_output_file(path, "--out")
    check_output_file(card_path_for(path), "--out")
    if fmt == "onnx" and path.suffix != ".onnx":
        raise ConfigError(f"{path}: an ONNX export needs a file name ending in .onnx")
    onnx = _require_onnx(path) if fmt == "onnx" else None
    path.parent.mkdir(parents=True, exist_ok=True)
    head = EmbeddingHead(network.cpu(), normalize).eval()
    example = check_images(card, TRACE_BATCH, seed=len(CHECK_BATCHES))
    # Written under a temporary name so that a failed check never leaves a file to be used.
    with replaced_atomically(path) as tmp:
        if fmt == "onnx":
            try:
                _write_onnx(head, example, tmp, onnx)
            except onnx.checker.ValidationError as exc:
                raise ModelError(f"{path}: the exported file fails onnx's checker ({first_line(exc)})") from exc
        else:
            _write_torchscript(head, example, tmp)
        diff = _max_abs_diff(head, fmt, tmp, card)
        if not diff <= tolerance:
            raise ModelError(
                f"{path}: exported model differs from PyTorch by {diff:.3g} (max abs), "
                f"above the tolerance {tolerance:g}"
            )
    exported = seal_card(
        replace(
            card,
            format=fmt,
            normalized_output=normalize,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            training={
                **card.training,
                "exported_from": {"model": folder.name, "fingerprint": card.fingerprint, "max_abs_diff": diff},
            },
        ),
        file_fingerprint(path),
    )
    card_path = write_card_file(exported, card_path_for(path))
    return ExportResult(path, card_path, fmt, normalize, diff, tolerance, CHECK_BATCHES, exported)
