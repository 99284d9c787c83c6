"""Published person Re-ID models by name (``--model person-reidentification-retail-0277``,
``--model osnet_x0_25.msmt17``): a registry artefact of task ``person-reid`` becomes an
Encoder run by its own runtime with its own preprocessing.

- an OpenVINO IR (the Open Model Zoo's models): :class:`reid.models.openvino.OpenVinoEncoder`;
- an ONNX file: :class:`reid.models.onnx.OnnxEncoder` with the artefact's preprocessing;
- a PyTorch checkpoint (torchreid's, fast-reid's): imported once, exactly
  (:func:`reid.models.imports.import_model`), into a model folder beside the file in the
  cache (``NAME/model``), then loaded like any model folder.

The card carries the artefact's preprocessing, its provenance and the publisher's figures
(``metrics``, ``published_`` keys), and a threshold only where one was calibrated on people
the model never saw and no figure reported here was measured on (:data:`CALIBRATED`);
elsewhere ``reid verify`` asks for ``--threshold``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class Calibration:
    """A threshold (Euclidean distance between unit embeddings) with where it comes from, and
    the (rate, distance) quantiles of the impostor distances it was chosen on (``--far``)."""

    threshold: float
    source: str
    impostor_quantiles: tuple[tuple[float, float], ...]


# Chosen by ``python benchmarks/bench_zoo_calibration.py --data market1501-mini --models NAME``
# at FAR <= 1e-3 over every pair of the Market-1501 subset's training split, people a model
# trained on MSMT17 never saw. The Open Model Zoo does not say what its Re-ID models were
# trained on (Market-1501's training split, likely), so they get none.
CALIBRATED = {
    "osnet_x0_25.msmt17-onnx": Calibration(
        0.6249,
        "FAR <= 1e-3 over all 376,278 pairs of the Market-1501 subset's training split (868 images, 50 identities; "
        "13,970 genuine, 362,308 impostor), held out from this MSMT17-trained model: there FAR at most 0.1%, "
        "TAR 25.28%",
        (
            (1, 1.28367), (0.99, 1.1996), (0.95, 1.16783), (0.9, 1.14865),
            (0.8, 1.12194), (0.7, 1.10007), (0.6, 1.07899), (0.56234132519, 1.07108),
            (0.5, 1.05755), (0.4, 1.03349), (0.316227766017, 1.01013), (0.3, 1.00511),
            (0.2, 0.968148), (0.177827941004, 0.95789), (0.1, 0.909838), (0.056234132519, 0.864918),
            (0.031622776602, 0.824092), (0.0177827941, 0.787265), (0.01, 0.752688), (0.005623413252, 0.721226),
            (0.00316227766, 0.689076), (0.00177827941, 0.658626), (0.001, 0.624979), (0.000562341325, 0.586236),
            (0.000316227766, 0.557505), (0.000177827941, 0.532551), (0.0001, 0.504788), (5.6234133e-05, 0.486583),
            (3.1622777e-05, 0.466698), (1.7782794e-05, 0.462885), (1e-05, 0.443674), (5.623413e-06, 0.44205),
            (3.162278e-06, 0.428611),
        ),
    ),
}


def is_zoo_model(name: str) -> bool:
    """True when ``name`` is a registry artefact of task ``person-reid``."""
    artefact = ARTEFACTS.get(str(name))
    return artefact is not None and artefact.kind == "person-reid"


def _described(artefact: Artefact, card: ModelCard) -> ModelCard:
    """``card`` with the artefact's name, provenance, published figures and calibration
    (none of them fields of the fingerprint)."""
    card = replace(
        card,
        name=artefact.name,
        pretrained=f"{artefact.name}: {artefact.description} ({artefact.licence}), from {artefact.origin}",
        metrics={**card.metrics, **{f"published_{key}": value for key, value in artefact.metrics}},
    )
    calibration = CALIBRATED.get(artefact.name)
    if calibration is None:
        return card
    return replace(
        card,
        threshold=calibration.threshold,
        threshold_source=calibration.source,
        impostor_quantiles=calibration.impostor_quantiles,
    )


def zoo_encoder(name: str, device: str | None = None, threads: int | None = None, card: ModelCard | None = None) -> Encoder:
    """The Encoder of person Re-ID artefact ``name``, its files fetched (or taken from the
    cache) and checked first.

    ``device`` is where a PyTorch model runs (default: CUDA when available; OpenVINO runs on
    the CPU); ``threads`` caps OpenVINO's threads. ``card`` replaces the built card (one
    saved into a model folder and calibrated there by ``reid calibrate``); it must carry
    the fingerprint of these files and this preprocessing. Raises ModelError, one line: an
    artefact that is not a person Re-ID model, files that cannot be fetched (naming the URL
    and ``reid models add``), a runtime that is not installed (naming the extra), or a
    ``card`` of other files.
    """
    artefact = get_artefact(name)
    if artefact.kind != "person-reid":
        raise ModelError(f"{name} is a {artefact.kind}, not a person Re-ID model; `reid models list` shows the Re-ID models")
    paths = fetch_files(name)
    if artefact.runtime == "openvino":
        built = ModelCard(
            name=artefact.name,
            architecture=artefact.architecture,
            embedding_dim=1,
            input_size=artefact.input_size,
            mean=artefact.mean,
            std=artefact.std,
            channel_order=artefact.channel_order,
            neck="none",
        )
        return _described_encoder(artefact, OpenVinoEncoder(paths[0], built, threads), card)
    if artefact.runtime == "onnxruntime":
        preprocessing = Preprocessing(artefact.input_size, artefact.mean, artefact.std, artefact.channel_order)
        return _described_encoder(artefact, OnnxEncoder(paths[0], preprocessing, device), card)
    folder = cache_dir() / artefact.name / IMPORTED
    if not holds_model(folder):
        import_model(paths[0], artefact.architecture, folder, source=artefact.layout, input_size=artefact.input_size)
    network, imported = load_model(folder)
    return _described_encoder(artefact, TorchEncoder(network, imported, check_device(device or default_device())), card)


def _described_encoder(artefact: Artefact, encoder: Encoder, given: ModelCard | None) -> Encoder:
    encoder.card = _described(artefact, encoder.card)
    if given is not None:
        if given.fingerprint != encoder.card.fingerprint:
            raise ModelError(
                f"{given.name}: card fingerprint {given.fingerprint or 'missing'} does not describe the cached files of "
                f"{artefact.name} (fingerprint {encoder.card.fingerprint})"
            )
        encoder.card = given
    return encoder
