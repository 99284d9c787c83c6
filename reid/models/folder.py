"""Model folders: ``weights.pt`` (a state_dict) and ``card.json`` side by side; and
:func:`load_encoder`, the one place that turns a model spec into an Encoder.

Weights are always loaded with ``weights_only=True``; a model folder never unpickles
arbitrary objects.  The card's fingerprint covers the weights file and the card fields
that change embeddings (see :mod:`reid.models.card`); it is checked on load, so that a
card and weights from different trainings are never mixed and an edited card is refused.
"""

from __future__ import annotations

import io
from datetime import datetime, timezone
from pathlib import Path

import torch

from reid.errors import ConfigError, ConfigValueError, ModelError
from reid.models.card import (
    CARD_FILE,
    WEIGHTS_FILE,
    ModelCard,
    file_fingerprint,
    load_card,
    save_card,
    seal_card,
    verify_card,
)
from reid.models.checkpoints import check_tensors, load_checkpoint_file
from reid.models.dlib_face import DLIB_FACE, DlibFaceEncoder
from reid.models.encoder import Encoder, TorchEncoder
from reid.models.network import ReidNet, build_network
from reid.models.onnx import OnnxEncoder, Preprocessing
from reid.models.registry import ARTEFACTS
from reid.models.sface import ARCHITECTURE as SFACE_ARCHITECTURE
from reid.models.sface import SFACE, SFaceEncoder
from reid.paths import replaced_folder, resolve_named, write_bytes_atomic



def save_model(network: ReidNet, card: ModelCard, folder: Path) -> ModelCard:
    """Write ``weights.pt`` and ``card.json`` as the model folder ``folder``; returns the
    card with the fingerprint of the weights written.

    The folder is built beside ``folder`` and swapped in whole (:func:`reid.paths.replaced_folder`;
    its other files, a run's history say, are carried over): a run killed at any point
    leaves the old model or the new one, each loadable, never new weights beside an old card.

    Raises:
        ModelError: a card field is invalid (nothing is written then).
        OSError: the folder cannot be written.
    """
    folder = Path(folder)
    buffer = io.BytesIO()
    torch.save(network.state_dict(), buffer)
    with replaced_folder(folder, (WEIGHTS_FILE, CARD_FILE)) as stage:
        write_bytes_atomic(stage / WEIGHTS_FILE, buffer.getvalue())
        card = seal_card(card, file_fingerprint(stage / WEIGHTS_FILE))
        card.created = card.created or datetime.now(timezone.utc).isoformat(timespec="seconds")
        save_card(card, stage)
    return card


def holds_model(folder: Path) -> bool:
    """True when ``folder`` holds a finished model (its card or weights)."""
    return (Path(folder) / CARD_FILE).exists() or (Path(folder) / WEIGHTS_FILE).exists()


def check_model_output(folder: Path, what: str, overwrite: bool, keep: str = "") -> None:
    """Refuse, before any work, to replace the finished model in ``folder`` unless
    ``overwrite``; ``what`` names the option that gave the folder, ``keep`` what else the
    user can do (``continue it with --resume``).

    Raises:
        ConfigError: ``folder`` holds a model and ``overwrite`` is False; one line saying
            how to choose another folder or replace it.
    """
    if not overwrite and holds_model(folder):
        also = f", {keep}" if keep else ""
        raise ConfigError(
            f"{folder}: holds a finished model ({CARD_FILE}, {WEIGHTS_FILE}); choose another {what}{also}, "
            "or pass --overwrite to replace it"
        )


def load_state(path: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise ModelError(f"{path}: weights file not found")
    state = load_checkpoint_file(path, "weights file", "not a readable PyTorch state_dict")
    if not isinstance(state, dict):
        raise ModelError(f"{path}: expected a state_dict, found {type(state).__name__}")
    return check_tensors(state, path)


def load_model(folder: Path) -> tuple[ReidNet, ModelCard]:
    """Load a model folder written by :func:`save_model`.

    Raises ModelError when the card is malformed, was edited since saving, or does not
    describe these weights.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelError(f"{folder}: model folder not found")
    card = load_card(folder)
    weights = folder / WEIGHTS_FILE
    state = load_state(weights)
    card = verify_card(card, file_fingerprint(weights), str(folder / CARD_FILE), str(weights))
    if card.format != "torch":
        raise ModelError(f"{folder / CARD_FILE}: a model folder holds a torch model, not format {card.format!r}")
    try:
        network = build_network(card)
    except ConfigError as exc:
        raise ModelError(f"{folder / CARD_FILE}: {exc}") from exc
    try:
        network.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise ModelError(f"{weights}: weights do not fit {card.architecture} as the card describes ({first})") from exc
    return network, card


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def parse_device(name: str) -> torch.device:
    """The PyTorch device ``name`` names (``cpu``, ``cuda``, ``cuda:1`` ...), not yet checked
    to exist.

    Raises:
        ConfigValueError: not a device name, naming the key ``device``.
    """
    try:
        return torch.device(name)
    except (RuntimeError, TypeError):
        raise ConfigValueError("device", f"{name!r}: not a device (cpu, cuda, cuda:1 ...)", sep=" ") from None


def check_device(name: str) -> torch.device:
    """The PyTorch device ``name`` (``cpu``, ``cuda``, ``cuda:1`` ...), checked to exist on
    this machine before any work runs on it.

    Raises:
        ConfigValueError: not a device name, or a CUDA device this machine does not have;
            one line naming the key ``device``, the value and what there is.
    """
    device = parse_device(name)
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise ConfigValueError("device", f"{name}: reid runs on cpu or cuda", sep=" ")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ConfigValueError("device", f"{name}: this machine has no CUDA device (PyTorch sees none); use cpu", sep=" ")
    if device.index is not None and device.index >= count:
        raise ConfigValueError(
            "device", f"{name}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}", sep=" "
        )
    return device


def resolve_model_path(spec: str | Path) -> Path:
    """A model given by path (``./m``, ``a/m``: that path), or by bare name of a folder under ``models/``."""
    return resolve_named(spec, Path("models"))


def recorded_model(name: str, fingerprint: str) -> str | None:
    """The model a gallery records (its model's card ``name`` and ``fingerprint``), where
    this machine has it: the folder ``name`` names (:func:`resolve_model_path`), else a
    folder under ``models/``, whose card has that fingerprint (or, for a card older than
    fingerprints over the card, those weights); else ``name`` itself when it is a published
    model in the cache or an installed package.  None when none is here.  Reads cards only."""
    from reid.models.card import CARD_FILE, read_card_json
    from reid.models.registry import ARTEFACTS, cache_state

    if not fingerprint:
        return None
    home = Path("models")
    candidates = [resolve_model_path(name)] if name else []
    candidates += sorted(p for p in home.iterdir() if p.is_dir()) if home.is_dir() else []
    for folder in candidates:
        try:
            card = read_card_json(folder / CARD_FILE)
        except (ModelError, ConfigError, OSError):
            continue  # not a model folder, or one that cannot be read: not the recorded model
        if fingerprint in (card.fingerprint, card.weights_fingerprint):
            return str(folder)
    if name in ARTEFACTS and cache_state(ARTEFACTS[name]) in ("yes", "installed"):
        return name
    return None


def load_encoder(
    spec: str | Path, device: str | None = None, preprocessing: Preprocessing | None = None
) -> Encoder:
    """Load an encoder: a model folder by path (``models/demo``) or bare name (``demo``), an
    ONNX file (``x.onnx``, preprocessing from its card or ``preprocessing``), ``dlib-face``,
    ``sface``, or a published person Re-ID model by its registry name
    (``person-reidentification-retail-0277``, ``osnet_x0_25.msmt17``; :mod:`reid.models.zoo`).

    A model folder whose card has format ``dlib`` holds a (calibrated) card of dlib-face;
    one whose card describes SFace's architecture, a (calibrated) card of sface; one whose
    card (format ``openvino`` or ``onnx``) is named after a published Re-ID model, a
    (calibrated) card of that model, checked against its cached files.
    ``device`` is where a PyTorch model runs (default: CUDA when available).

    Raises:
        ModelError: no such model, an unsupported file, or a folder whose card or weights
            are missing, invalid or do not match (fingerprint); one line naming the file.
        ConfigError: ``preprocessing`` given for anything but an ONNX file.
    """
    path = resolve_model_path(spec)
    if path.suffix.lower() == ".onnx" and not path.is_dir():
        return OnnxEncoder(path, preprocessing, device)
    if preprocessing is not None and not preprocessing.is_empty():
        raise ConfigError(
            f"{spec}: --input-size, --mean, --std and --rgb/--bgr apply to ONNX files only; "
            "this model's preprocessing comes from its card"
        )
    if path.is_dir():
        card = load_card(path)
        if card.format == "dlib":
            return DlibFaceEncoder(card)
        if card.format == "onnx" and card.architecture == SFACE_ARCHITECTURE:
            return SFaceEncoder(card, device=device)
        if card.format in ("openvino", "onnx") and card.name in ARTEFACTS:
            # A (calibrated) card of a published model, saved into a folder.
            from reid.models.zoo import zoo_encoder

            return zoo_encoder(card.name, device, card=card)
        target = check_device(device or default_device())
        network, card = load_model(path)
        return TorchEncoder(network, card, target)
    if str(spec) == DLIB_FACE:
        return DlibFaceEncoder()
    if str(spec) == SFACE:
        return SFaceEncoder(device=device)
    if str(spec) in ARTEFACTS:
        # Imported here: the zoo builds on this module (model folders, imports).
        from reid.models.zoo import zoo_encoder

        return zoo_encoder(str(spec), device)
    if path.is_file():
        raise ModelError(f"{path}: unsupported model file; give a model folder, an .onnx file, {DLIB_FACE} or {SFACE}")
    raise ModelError(f"{spec}: no such model folder, nor a model name of `reid models list`")
