"""Published person Re-ID models by name (``--model person-reidentification-retail-0277``,
``--model osnet_x0_25.msmt17``): a registry artefact of task ``person-reid`` becomes an
Encoder run by its own runtime with its own preprocessing.

- an OpenVINO IR (the Open Model Zoo's models): :class:`reid.models.openvino.OpenVinoEncoder`;
- an ONNX file: :class:`reid.models.onnx.OnnxEncoder` with the artefact's preprocessing;
- a PyTorch checkpoint (torchreid's, fast-reid's): imported once, exactly
  (:func:`reid.models.imports.import_model`), into a model folder beside the file in the
  cache (``NAME/model``), then loaded like any model folder.

The card carries the artefact's preprocessing, its provenance and the publisher's figures
(``metrics``, ``published_`` keys). No threshold is set: none has been calibrated for these
models on data held out from their evaluation, so ``reid verify`` asks for ``--threshold``
and ``reid calibrate`` writes one into a model folder's card.
"""

from __future__ import annotations

from dataclasses import replace

from reid.errors import ModelError
from reid.models.card import ModelCard
from reid.models.encoder import Encoder, TorchEncoder
from reid.models.folder import check_device, default_device, holds_model, load_model
from reid.models.imports import import_model
from reid.models.onnx import OnnxEncoder, Preprocessing
from reid.models.openvino import OpenVinoEncoder
from reid.models.registry import ARTEFACTS, Artefact, cache_dir, fetch_files, get_artefact

# The folder, beside the file in the cache, that a PyTorch checkpoint is imported into.
IMPORTED = "model"


def is_zoo_model(name: str) -> bool:
    """True when ``name`` is a registry artefact of task ``person-reid``."""
    artefact = ARTEFACTS.get(str(name))
    return artefact is not None and artefact.kind == "person-reid"


def _described(artefact: Artefact, card: ModelCard) -> ModelCard:
    """``card`` with the artefact's name, provenance and published figures (none of them
    fields of the fingerprint)."""
    return replace(
        card,
        name=artefact.name,
        pretrained=f"{artefact.name}: {artefact.description} ({artefact.licence}), from {artefact.origin}",
        metrics={**card.metrics, **{f"published_{key}": value for key, value in artefact.metrics}},
    )


def zoo_encoder(name: str, device: str | None = None, threads: int | None = None) -> Encoder:
    """The Encoder of person Re-ID artefact ``name``, its files fetched (or taken from the
    cache) and checked first.

    ``device`` is where a PyTorch model runs (default: CUDA when available; OpenVINO runs on
    the CPU); ``threads`` caps OpenVINO's threads. Raises ModelError, one line: an artefact
    that is not a person Re-ID model, files that cannot be fetched (naming the URL and
    ``reid models add``), or a runtime that is not installed (naming the extra).
    """
    artefact = get_artefact(name)
    if artefact.kind != "person-reid":
        raise ModelError(f"{name} is a {artefact.kind}, not a person Re-ID model; `reid models list` shows the Re-ID models")
    paths = fetch_files(name)
    if artefact.runtime == "openvino":
        card = ModelCard(
            name=artefact.name,
            architecture=artefact.architecture,
            embedding_dim=1,
            input_size=artefact.input_size,
            mean=artefact.mean,
            std=artefact.std,
            channel_order=artefact.channel_order,
            neck="none",
        )
        return _described_encoder(artefact, OpenVinoEncoder(paths[0], card, threads))
    if artefact.runtime == "onnxruntime":
        given = Preprocessing(artefact.input_size, artefact.mean, artefact.std, artefact.channel_order)
        return _described_encoder(artefact, OnnxEncoder(paths[0], given, device))
    folder = cache_dir() / artefact.name / IMPORTED
    if not holds_model(folder):
        import_model(paths[0], artefact.architecture, folder, source=artefact.layout, input_size=artefact.input_size)
    network, card = load_model(folder)
    return _described_encoder(artefact, TorchEncoder(network, card, check_device(device or default_device())))


def _described_encoder(artefact: Artefact, encoder: Encoder) -> Encoder:
    encoder.card = _described(artefact, encoder.card)
    return encoder
