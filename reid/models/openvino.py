"""Encoders from OpenVINO IR files: the Open Model Zoo's person Re-ID models.

An IR is two files, the graph (``NAME.xml``) and its weights (``NAME.bin``, beside it).
OpenVINO (the ``openvino`` extra) runs it on the CPU.  The Open Model Zoo's Re-ID models
take ``data`` [1, 3, 256, 128], BGR pixels 0-255 as they are, and return a 256-d
embedding that is not normalised; the graph is reshaped to a free batch size so that a
batch runs at once, and rows are L2-normalised here, as for every encoder.

Inference runs in float32 (OpenVINO's CPU plugin would otherwise pick bfloat16 where the
processor has it, and an image's embedding would then depend on the batch it came in).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from reid.errors import ModelError
from reid.models.card import ModelCard, seal_card
from reid.models.encoder import Encoder, embed_with_runtime
from reid.models.runtime import first_line, import_openvino, read_openvino_ir
from reid.paths import file_sha256


def ir_fingerprint(xml: Path, weights: Path) -> str:
    """One fingerprint for an IR's two files: the SHA-256 prefix over both files' SHA-256."""
    return hashlib.sha256((file_sha256(xml) + file_sha256(weights)).encode()).hexdigest()[:16]


class OpenVinoEncoder(Encoder):
    """An OpenVINO IR with one image input (1, 3, H, W) and one (1, D) embedding output.

    ``card`` gives the preprocessing (input size, mean/std on 0..1 pixels, channel order)
    and the fields it is described by; its ``embedding_dim`` is taken from the model and it
    is sealed with :func:`ir_fingerprint`.  ``threads`` caps OpenVINO's CPU threads (None:
    its own choice).  Raises ModelError, one line naming the file, when OpenVINO is not
    installed, the files are missing or unreadable, or the graph is not an image encoder
    of the card's input size.
    """

    def __init__(self, xml: str | Path, card: ModelCard, threads: int | None = None) -> None:
        self.path = Path(xml)
        core, model = read_openvino_ir(self.path, "an image encoder")
        ov = import_openvino(f"{self.path}: an image encoder")
        shape = model.inputs[0].get_partial_shape()
        height, width = card.input_size
        if shape.rank.get_length() != 4 or shape[1].get_length() != 3 or (shape[2].get_length(), shape[3].get_length()) != (height, width):
            raise ModelError(f"{self.path}: input has shape {shape}, expected (1, 3, {height}, {width}) as the card says")
        try:
            model.reshape({model.inputs[0]: ov.PartialShape([-1, 3, height, width])})
            config = {"INFERENCE_PRECISION_HINT": "f32"}
            if threads is not None:
                config["INFERENCE_NUM_THREADS"] = int(threads)
            self._compiled = core.compile_model(model, "CPU", config)
        except Exception as exc:
            raise ModelError(f"{self.path}: OpenVINO cannot compile it for a free batch size ({first_line(exc)})") from None
        self._output = self._compiled.outputs[0]
        probe = self._run(np.zeros((1, 3, height, width), np.float32))
        if probe.ndim != 2:
            raise ModelError(f"{self.path}: output has shape {list(probe.shape)}, expected a 2-D (N, D) embedding")
        self.card = seal_card(
            replace(card, embedding_dim=int(probe.shape[1]), format="openvino", normalized_output=False),
            ir_fingerprint(self.path, self.path.with_suffix(".bin")),
        )

    def _run(self, batch: np.ndarray) -> np.ndarray:
        try:
            return np.asarray(self._compiled(batch)[self._output], dtype=np.float32)
        except Exception as exc:
            raise ModelError(f"{self.path}: OpenVINO failed on a batch of shape {list(batch.shape)} ({first_line(exc)})") from None

    def embed(self, images: Sequence[np.ndarray]) -> np.ndarray:
        return embed_with_runtime(self, images, self._run)
