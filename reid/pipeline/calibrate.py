"""Choosing a model's verification threshold on labelled pairs and writing it to its card
(the embedding is here, the threshold rule in :func:`reid.evaluation.choose_threshold`).

The pairs come from a pair file (LFW's pairs.txt, or CSV) or from a labelled data set
(``KIND:PATH``, as every command reads one): every query x gallery pair of its evaluation
split, the same identity seen by two cameras a genuine pair, two identities an impostor
pair (:func:`dataset_pairs`).  ``reid train`` chooses its threshold so on the held-out
identities of the set it trained on (:func:`choose_on_dataset`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reid.data import ReidDataset, load_dataset
from reid.decision import impostor_quantiles, similarity_to_distance
from reid.errors import DataError, ModelError
from reid.evaluation.names import count, far_percent, percent
from reid.evaluation.pairs import PairSet, read_pairs
from reid.evaluation.verification import ThresholdChoice, choose_threshold
from reid.gallery.calibration import round_rate_up, smallest_far
from reid.models.card import CARD_FILE, ModelCard, load_card, save_card, verify_card
from reid.models.encoder import Encoder
from reid.models.folder import load_encoder, resolve_model_path
from reid.pipeline.embed import PairScores, ProgressFn, embed_paths, score_pairs
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
        f"{pair_set.format}, {count(used)} of {count(scores.num_pairs_total)} pairs: {count(choice.num_genuine)} "
        f"genuine, {count(choice.num_impostor)} impostor); there FAR {far_percent(choice.far)}, "
        f"TAR {percent(choice.tar)}, accuracy {percent(choice.accuracy)}"
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
    pair_set = read_pairs(pairs_file, root)
    encoder = load_encoder(folder)
    scores = score_pairs(
        encoder, pair_set, batch_size=batch_size, on_progress=on_progress, subject=subject, no_face=no_face
    )
    if scores.distances.size == 0:
        raise DataError(f"{pair_set.source}: no pair has two readable images ({len(scores.skipped_images)} unreadable)")
    try:
        choice = choose_threshold(scores.distances, scores.is_same, target_far)
    except DataError as exc:
        raise DataError(f"{pair_set.source}: {exc}") from None
    return _write_choice(folder, encoder, choice, scores, describe_source(pair_set, scores, choice), pair_set.source.name)


def _write_choice(
    folder: Path, encoder: Encoder, choice: ThresholdChoice, scores: PairScores, source: str, pairs: str
) -> Calibration:
    """``choice`` written into the card of ``folder`` (which ``encoder`` was loaded from),
    with its source line and the impostor distance quantiles of ``scores``."""
    try:
        card = verify_card(load_card(folder), encoder.card.weights_fingerprint, str(folder / CARD_FILE), str(folder))
    except ModelError as exc:
        raise ModelError(f"{folder / CARD_FILE}: the model changed while calibrating; run calibrate again") from exc
    if card.fingerprint != encoder.fingerprint:
        raise ModelError(f"{folder / CARD_FILE}: the model changed while calibrating; run calibrate again")
    record_choice(card, choice, scores, source, pairs)
    return Calibration(choice, scores, save_card(card, folder), source)


def record_choice(card: ModelCard, choice: ThresholdChoice, scores: PairScores, source: str, pairs: str) -> None:
    """Set ``card``'s threshold, its source line, the impostor distance quantiles --far
    reads, and ``metrics["calibration"]`` (the choice and the pairs it was made on)."""
    card.threshold = choice.threshold
    card.threshold_source = source
    card.impostor_quantiles = impostor_quantiles(scores.distances[~scores.is_same])
    card.metrics = {**card.metrics, "calibration": {**choice.to_dict(), "pairs": pairs}}


@dataclass
class DatasetPairs:
    """The scored query x gallery pairs of a labelled set: ``scores`` (genuine and impostor
    distances, Euclidean between unit embeddings), over ``identities`` identities of
    ``images`` images embedded."""

    scores: PairScores
    identities: int
    images: int


def dataset_pairs(
    encoder: Encoder,
    dataset: ReidDataset,
    *,
    batch_size: int = 64,
    on_progress: ProgressFn | None = None,
    subject: SubjectRule | None = None,
    no_face: str = "skip",
) -> DatasetPairs:
    """Every pair of a query image and a gallery image of ``dataset``'s evaluation split:
    the same identity a genuine pair, two identities (distractors, pid 0, included) an
    impostor pair.  Junk images (pid -1) are nobody's and left out, and so are pairs of one
    identity seen by one camera, as in ranking: the genuine pairs are the cross-camera ones
    a threshold has to accept.  Unreadable images (or photos ``subject`` finds no one in)
    are left out and listed.  Raises DataError when the split has no query or no gallery
    image to pair, or no genuine or no impostor pair."""
    query = [r for r in dataset.query if r.pid >= 0]
    gallery = [r for r in dataset.gallery if r.pid >= 0]
    if not query or not gallery:
        raise DataError(f"{dataset.root}: no query and gallery images of known identities to make pairs of")
    records = query + gallery
    embedded = embed_paths(
        encoder,
        [r.path for r in records],
        batch_size=batch_size,
        on_progress=on_progress,
        skip_unreadable=True,
        subject=subject,
        no_face=no_face,
    )
    keep_q, keep_g = embedded.embedded[: len(query)], embedded.embedded[len(query) :]
    q_pid, g_pid = np.array([r.pid for r in query]), np.array([r.pid for r in gallery])
    q_cam, g_cam = np.array([r.camid for r in query]), np.array([r.camid for r in gallery])
    same = q_pid[:, None] == g_pid[None, :]
    # Every pair but one identity in one camera; those of an image not embedded are unscored.
    paired = ~(same & (q_cam[:, None] == g_cam[None, :]))
    scored = paired & keep_q[:, None] & keep_g[None, :]
    q_feat, g_feat = embedded.features[: len(query)], embedded.features[len(query) :]
    distances = similarity_to_distance(q_feat[keep_q] @ g_feat[keep_g].T)[scored[keep_q][:, keep_g]]
    is_same = same[scored]
    if not is_same.any() or is_same.all():
        kind = "genuine" if not is_same.any() else "impostor"
        raise DataError(f"{dataset.root}: its query and gallery images give no {kind} pair to choose a threshold on")
    scores = PairScores(distances, is_same, None, int(paired.sum()), embedded.failures)
    identities = len({int(p) for p in (*q_pid[keep_q].tolist(), *g_pid[keep_g].tolist()) if p > 0})
    return DatasetPairs(scores, identities, int(keep_q.sum() + keep_g.sum()))


def describe_dataset_choice(
    command: str, spec: str, pairs: DatasetPairs, choice: ThresholdChoice, held_out: bool
) -> str:
    """One line for the card's ``threshold_source``: what chose it, on which pairs of which
    set (how many, of how many identities, held out of training or not), and what it does there."""
    whose = "held-out identities" if held_out else "identities"
    return (
        f"{command}: {choice.criterion} on the query x gallery pairs of {spec} ({count(pairs.identities)} {whose}, "
        f"{count(pairs.images)} images: {count(choice.num_genuine)} genuine, {count(choice.num_impostor)} impostor "
        f"pairs); there FAR {far_percent(choice.far)}, TAR {percent(choice.tar)}"
    )


def choose_on_dataset(
    encoder: Encoder,
    dataset: ReidDataset,
    target_far: float | None,
    *,
    batch_size: int = 64,
    on_progress: ProgressFn | None = None,
    subject: SubjectRule | None = None,
    no_face: str = "skip",
) -> tuple[ThresholdChoice, DatasetPairs]:
    """The threshold at ``target_far`` (best accuracy when None) on :func:`dataset_pairs`;
    at the smallest rate the impostor pairs resolve instead when they are too few for
    ``target_far`` (:func:`reid.gallery.calibration.smallest_far`; the choice's
    ``target_far`` says which was used)."""
    pairs = dataset_pairs(
        encoder, dataset, batch_size=batch_size, on_progress=on_progress, subject=subject, no_face=no_face
    )
    rate = target_far
    if target_far is not None:
        # A rate the impostor pairs cannot resolve would admit none of them: the threshold
        # would refuse most genuine pairs too, and the rate on the card would say nothing.
        least = smallest_far(int((~pairs.scores.is_same).sum()))
        if least is not None and least > target_far:
            rate = round_rate_up(least)
    return choose_threshold(pairs.scores.distances, pairs.scores.is_same, rate, asked_far=target_far), pairs


def calibrate_model_on_data(
    model: str | Path,
    data: str,
    *,
    target_far: float | None = 1e-3,
    batch_size: int = 64,
    on_progress: ProgressFn | None = None,
    subject: SubjectRule | None = None,
    no_face: str = "skip",
    dataset: ReidDataset | None = None,
) -> Calibration:
    """As :func:`calibrate_model`, on the pairs of the labelled set ``data`` (``KIND:PATH``,
    read by :func:`reid.data.load_dataset`, unless ``dataset`` is that set already read;
    :func:`dataset_pairs`).  The set is read before the model is looked for or loaded, so a
    wrong path is named before any download."""
    dataset = load_dataset(data) if dataset is None else dataset
    folder = model_folder(model)
    encoder = load_encoder(folder)
    choice, pairs = choose_on_dataset(
        encoder, dataset, target_far, batch_size=batch_size, on_progress=on_progress, subject=subject, no_face=no_face
    )
    source = describe_dataset_choice("reid calibrate", data, pairs, choice, held_out=False)
    return _write_choice(folder, encoder, choice, pairs.scores, source, data)
