"""Encoders from ONNX files: exported here, or by torchreid, fast-reid, insightface and others.

Preprocessing comes from the card beside the file, ``NAME.card.json`` for ``NAME.onnx``
(written by ``reid export``).  A file without a card gets torchreid's defaults (256x128,
ImageNet mean and std, RGB) unless :class:`Preprocessing` says otherwise; values given
there override the card's.  A model whose input height and width are fixed in the file
uses that size when neither a card nor the caller gives one.

The encoder's fingerprint covers the ``.onnx`` file and the preprocessing it is run with
(see :mod:`reid.models.card`), so a gallery built with one file, or with other
preprocessing, refuses queries from another.  A card beside the file that carries a
fingerprint must match the file and be unedited; one without a fingerprint only describes
preprocessing.  Rows are L2-normalized here whatever the file returns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from reid.errors import ConfigError, ModelError
from reid.models.card import ModelCard, file_fingerprint, read_card_json, seal_card, validate_card, verify_card
from reid.models.encoder import Encoder, embed_with_runtime
from reid.models.runtime import first_line, import_onnxruntime
from reid.paths import write_bytes_atomic

CARD_SUFFIX = ".card.json"
CHANNEL_ORDERS = ("rgb", "bgr")
INPUT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


@dataclass(frozen=True)
class Preprocessing:
    """Preprocessing given by the caller (flags); a field left None keeps the card's value."""

    input_size: tuple[int, int] | None = None
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None
    channel_order: str | None = None

    def is_empty(self) -> bool:
        return all(value is None for value in (self.input_size, self.mean, self.std, self.channel_order))

    def apply(self, card: ModelCard) -> ModelCard:
        """The card with every field given here replaced."""
        if self.channel_order is not None and self.channel_order not in CHANNEL_ORDERS:
            raise ConfigError(f"channel order {self.channel_order!r}: choose rgb or bgr")
        given = {
            key: value
            for key, value in (
                ("input_size", self.input_size),
                ("mean", self.mean),
                ("std", self.std),
                ("channel_order", self.channel_order),
            )
            if value is not None
        }
        return replace(card, **given)


def card_path_for(model_file: str | Path) -> Path:
    """Where the card of an exported file lives: ``NAME.card.json`` beside ``NAME.EXT``."""
    path = Path(model_file)
    return path.with_name(path.stem + CARD_SUFFIX)


def read_card_file(path: Path) -> ModelCard:
    """The card of an exported file (:func:`reid.models.card.read_card_json`)."""
    return read_card_json(Path(path))


def write_card_file(card: ModelCard, path: Path) -> Path:
    validate_card(card, str(path))
    write_bytes_atomic(path, (json.dumps(card.to_dict(), indent=2) + "\n").encode())
    return Path(path)


def _static(dim: Any) -> int | None:
    """A dimension fixed in the file, or None for a named or unknown (dynamic) one."""
    return dim if isinstance(dim, int) and dim > 0 else None


class OnnxEncoder(Encoder):
    """An ONNX model with one image input (N, 3, H, W) and a 2-D (N, D) embedding output.

    The onnxruntime session is created on construction so that a missing, corrupt or
    ill-fitting file is reported at load time; one probe batch checks the output shape.
    A file with a fixed batch size is run that many images at a time (padded at the end).
    """

    def __init__(
        self,
        path: str | Path,
        preprocessing: Preprocessing | None = None,
        device: str | None = None,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelError(f"{self.path}: ONNX file not found")
        ort = import_onnxruntime(f"{self.path}: reading an ONNX model")
        card_file = card_path_for(self.path)
        given_size = preprocessing is not None and preprocessing.input_size is not None
        fingerprint = file_fingerprint(self.path)
        if card_file.is_file():
            card = read_card_file(card_file)
            if card.fingerprint:
                card = verify_card(card, fingerprint, str(card_file), str(self.path))
            given_size = True
        else:
            card = ModelCard(name=self.path.stem, architecture="onnx", embedding_dim=0, normalized_output=False)
        if preprocessing is not None:
            card = preprocessing.apply(card)
        self.card = replace(card, format="onnx")
        # The output dimension is known once the model has run; 1 stands in for it until then,
        # so that flags and card are checked before the probe allocates a batch of their size.
        source = card_file if card_file.is_file() else self.path
        validate_card(replace(self.card, embedding_dim=self.card.embedding_dim or 1), str(source))

        providers = ["CPUExecutionProvider"]
        if device != "cpu" and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        try:
            self.session = ort.InferenceSession(str(self.path), providers=providers)
        except Exception as exc:
            raise ModelError(f"{self.path}: not a readable ONNX model ({first_line(exc)})") from exc
        self._check_signature(given_size)
        probe = self._run(np.zeros((self.batch_size or 1, 3, *self.card.input_size), dtype=np.float32))
        dim = probe.shape[1]
        if dim < 1:
            raise ModelError(
                f"{self.path}: output {self.output_name!r} has an empty embedding (shape {list(probe.shape)})"
            )
        if self.card.embedding_dim and self.card.embedding_dim != dim:
            raise ModelError(f"{self.path}: output has dimension {dim}, the card says {self.card.embedding_dim}")
        self.card = seal_card(replace(self.card, embedding_dim=int(dim)), fingerprint)

    def _check_signature(self, given_size: bool) -> None:
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        if len(inputs) != 1:
            names = ", ".join(i.name for i in inputs)
            raise ModelError(f"{self.path}: expected one image input, the model has {len(inputs)} ({names})")
        image_input = inputs[0]
        if image_input.type not in INPUT_DTYPES:
            raise ModelError(f"{self.path}: input {image_input.name!r} is {image_input.type}, expected float images")
        shape = list(image_input.shape)
        if len(shape) != 4 or _static(shape[1]) not in (None, 3):
            raise ModelError(f"{self.path}: input {image_input.name!r} has shape {shape}, expected (N, 3, H, W)")
        output_shape = list(outputs[0].shape)
        if len(output_shape) != 2:
            raise ModelError(
                f"{self.path}: output {outputs[0].name!r} has shape {output_shape}, expected a 2-D (N, D) embedding"
            )
        self.input_name = image_input.name
        self.input_dtype = INPUT_DTYPES[image_input.type]
        self.output_name = outputs[0].name
        self.batch_size = _static(shape[0])
        fixed = (_static(shape[2]), _static(shape[3]))
        if None in fixed:
            return
        if not given_size:
            # The size written in the file is the model's own statement, not a guess.
            self.card.input_size = (int(fixed[0]), int(fixed[1]))
        elif tuple(self.card.input_size) != fixed:
            height, width = self.card.input_size
            raise ModelError(
                f"{self.path}: the model takes {fixed[0]}x{fixed[1]} images, preprocessing gives "
                f"{height}x{width}; pass --input-size {fixed[0]}x{fixed[1]} or fix its card"
            )

    def _run(self, batch: np.ndarray) -> np.ndarray:
        """Run one preprocessed batch, in chunks of the file's fixed batch size if it has one."""
        count = batch.shape[0]
        step = self.batch_size or count
        outputs = []
        for start in range(0, count, step):
            chunk = batch[start : start + step]
            if chunk.shape[0] < step:
                padding = np.zeros((step - chunk.shape[0], *chunk.shape[1:]), dtype=chunk.dtype)
                chunk = np.concatenate([chunk, padding])
            try:
                (out,) = self.session.run([self.output_name], {self.input_name: chunk.astype(self.input_dtype)})
            except Exception as exc:
                raise ModelError(
                    f"{self.path}: onnxruntime failed on a batch of shape {list(chunk.shape)} ({first_line(exc)})"
                ) from exc
            out = np.asarray(out)
            if out.ndim != 2 or out.shape[0] != step:
                raise ModelError(
                    f"{self.path}: output {self.output_name!r} has shape {list(out.shape)} for {step} images, "
                    f"expected a 2-D ({step}, D) embedding"
                )
            outputs.append(out[: min(step, count - start)])
        return np.concatenate(outputs).astype(np.float32)

    def embed(self, images: Sequence[np.ndarray]) -> np.ndarray:
        return embed_with_runtime(self, images, self._run)
