"""Choosing a model's verification threshold on labelled pairs and writing it to its card
(the embedding is here, the threshold rule in :func:`reid.evaluation.choose_threshold`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from reid.decision import impostor_quantiles
from reid.errors import DataError, ModelError
from reid.evaluation.pairs import PairSet, read_pairs
from reid.evaluation.verification import ThresholdChoice, choose_threshold
from reid.models.card import CARD_FILE, load_card, save_card, verify_card
from reid.models.folder import load_encoder, resolve_model_path
from reid.pipeline.embed import PairScores, ProgressFn, score_pairs
from reid.photos import CalibrateConfig
from reid.pipeline.subject import SubjectRule


@dataclass
class Calibration:
    choice: ThresholdChoice
    scores: PairScores
    card_path: Path
    source: str


def model_folder(spec: str | Path) -> Path:
    """The folder of a model given by path or by bare name under ``models/``, as load_encoder finds it."""
    path = resolve_model_path(spec)
    if path.is_dir():
        return path
    raise ModelError(f"{spec}: no such model folder (calibration writes the threshold into its {CARD_FILE})")


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def describe_source(pair_set: PairSet, scores: PairScores, choice: ThresholdChoice) -> str:
    """One line saying where a threshold came from, for the card's ``threshold_source``."""
    used = scores.distances.size
    return (
        f"reid calibrate: {choice.criterion} on {pair_set.source.name} (sha256 {_file_digest(pair_set.source)}, "
        f"{pair_set.format}, {used} of {scores.num_pairs_total} pairs: {choice.num_genuine} genuine, "
        f"{choice.num_impostor} impostor); there FAR {choice.far:.4g}, TAR {choice.tar:.4g}, "
        f"accuracy {choice.accuracy:.4f}"
    )


def calibrate_model(
    model: str | Path,
    pairs_file: str | Path,
    root: str | Path,
    *,
    target_far: float | None = CalibrateConfig.far,
    batch_size: int = CalibrateConfig.batch_size,
    on_progress: ProgressFn | None = None,
    subject: SubjectRule | None = None,
    no_face: str = "skip",
) -> Calibration:
    """Choose the threshold for ``target_far`` (or the best accuracy when None) on a pair
    file and write it, with its provenance and the quantiles of the impostor distances
    (:func:`reid.decision.impostor_quantiles`, which ``--far`` reads), into the model
    folder's card atomically.  Photos are cut by ``subject`` and refused by a face model
    as :func:`reid.pipeline.embed.score_pairs` says (``no_face``), so that the threshold
    is chosen on the crops the model will be given."""
    folder = model_folder(model)
    encoder = load_encoder(folder)
    pair_set = read_pairs(pairs_file, root)
    scores = score_pairs(
        encoder, pair_set, batch_size=batch_size, on_progress=on_progress, subject=subject, no_face=no_face
    )
    if scores.distances.size == 0:
        raise DataError(f"{pair_set.source}: no pair has two readable images ({len(scores.skipped_images)} unreadable)")
    try:
        choice = choose_threshold(scores.distances, scores.is_same, target_far)
    except DataError as exc:
        raise DataError(f"{pair_set.source}: {exc}") from None
    try:
        card = verify_card(load_card(folder), encoder.card.weights_fingerprint, str(folder / CARD_FILE), str(folder))
    except ModelError as exc:
        raise ModelError(f"{folder / CARD_FILE}: the model changed while calibrating; run calibrate again") from exc
    if card.fingerprint != encoder.fingerprint:
        raise ModelError(f"{folder / CARD_FILE}: the model changed while calibrating; run calibrate again")
    source = describe_source(pair_set, scores, choice)
    card.threshold = choice.threshold
    card.threshold_source = source
    card.impostor_quantiles = impostor_quantiles(scores.distances[~scores.is_same])
    card.metrics = {**card.metrics, "calibration": {**choice.to_dict(), "pairs": pair_set.source.name}}
    return Calibration(choice, scores, save_card(card, folder), source)
