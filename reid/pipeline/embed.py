"""Running an encoder over image files: ranking on a dataset split, distances of pairs,
the decision on two photos.  Each photo is first cut to its subject by the one crop rule
(:class:`reid.pipeline.subject.SubjectRule`), fitted to the encoder (aligned face chips
when its card asks for them); the metrics come from :mod:`reid.evaluation`.

Library code never prints: long jobs report through an optional ``on_progress(done, total)``
callback, which the CLI turns into a progress bar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from reid.data.io import read_image
from reid.data.records import ImageRecord
from reid.decision import pair_distance, resolve_threshold
from reid.errors import DataError
from reid.evaluation.pairs import PairSet
from reid.evaluation.ranking import RankingResult, evaluate_features
from reid.evaluation.verification import VerificationResult, verification_metrics
from reid.models.card import ModelCard
from reid.models.encoder import Encoder, embed_images
from reid.models.names import READY_MADE_FACES
from reid.photos import EvalConfig, PairConfig
from reid.pipeline.subject import SubjectRule

ProgressFn = Callable[[int, int], None]

# Height over width from which a photo has a person's shape: person crops are about twice as
# tall as wide (Market-1501's 128x64, a Re-ID model's 256x128); face photos are nearly square
# (ORL's 112x92, LFW's 250x250).
PERSON_SHAPE = 1.5
# Photos of a pair file whose shapes are looked at (read again, whole).
SHAPE_SAMPLE = 8


def person_model_note(card: ModelCard, shapes: Sequence[tuple[int, ...]], model_name: str | None = None) -> str:
    """One line when a person Re-ID model (its card's ``kind``) is given photos none of which
    has a person's shape (each ``(height, width, ...)`` below :data:`PERSON_SHAPE` tall over
    wide: faces, most likely), else ""."""
    if card.kind != "person" or not shapes or any(h >= PERSON_SHAPE * w for h, w, *_ in shapes):
        return ""
    height, width = shapes[0][:2]
    return (
        f"note: {model_name or card.name} is a person Re-ID model (its card's kind) and these photos are not "
        f"a person's shape ({height}x{width}); for faces use a face model ({', '.join(READY_MADE_FACES)})"
    )


@dataclass
class Embeddings:
    """Features of the images that could be read; ``embedded[i]`` says whether path i was."""

    features: np.ndarray
    embedded: np.ndarray
    failures: list[tuple[Path, str]] = field(default_factory=list)


def _fitted(subject: SubjectRule | None, encoder: Encoder) -> SubjectRule | None:
    return subject.fitted_to(encoder) if subject is not None else None


def _cut(image: np.ndarray, path: Path, subject: SubjectRule | None) -> np.ndarray | DataError:
    """The photo cut to its subject, or a DataError (returned, not raised) naming a photo the
    rule leaves out ("skip").  Raises DataError when the rule says "error" and none is found."""
    if subject is None:
        return image
    subjects = subject.apply(image, path)
    if subjects.skipped:
        return DataError(f"{path}: {subjects.note()}")
    return subjects.crops[0]


def _load_batch(
    paths: Sequence[Path], subject: SubjectRule | None, skip_unreadable: bool
) -> list[np.ndarray | DataError]:
    """Each photo read and cut; without ``skip_unreadable`` the first that cannot be is raised."""
    out: list[np.ndarray | DataError] = []
    for path in paths:
        try:
            image = read_image(path)
        except DataError as exc:
            if not skip_unreadable:
                raise
            out.append(exc)
            continue
        cut = _cut(image, path, subject)
        if isinstance(cut, DataError) and not skip_unreadable:
            raise cut
        out.append(cut)
    return out


def _reason(exc: DataError, path: Path) -> str:
    """The problem without the file name that is listed beside it."""
    return str(exc).removeprefix(f"{path}: ")


def embed_paths(
    encoder: Encoder,
    paths: Sequence[str | Path],
    *,
    batch_size: int = 64,
    on_progress: ProgressFn | None = None,
    skip_unreadable: bool = False,
    subject: SubjectRule | None = None,
    no_face: str = "skip",
) -> Embeddings:
    """Embed image files in batches; the next batch is decoded while this one is embedded.

    ``subject`` cuts each photo to its subject first (fitted to ``encoder``: aligned chips
    when its card asks); a photo in which it finds none is taken whole, left out or raises
    DataError as its ``none_found`` says.  An unreadable image (or one the encoder
    refuses, such as a photo without a face for a face model, unless ``no_face`` is
    "whole") raises DataError naming the file, or with ``skip_unreadable`` is left out and
    listed in ``failures`` as (path, reason) (its row of ``features`` stays zero).
    Non-finite embeddings raise ModelError.
    """
    if batch_size < 1:
        raise DataError(f"batch size must be at least 1, got {batch_size}")
    paths = [Path(p) for p in paths]
    subject = _fitted(subject, encoder)
    total = len(paths)
    features = np.zeros((total, encoder.dim), dtype=np.float32)
    embedded = np.zeros(total, dtype=bool)
    failures: list[tuple[Path, str]] = []
    starts = list(range(0, total, batch_size))
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = None
        for i, start in enumerate(starts):
            batch = paths[start : start + batch_size]
            loaded = pending.result() if pending is not None else _load_batch(batch, subject, skip_unreadable)
            if i + 1 < len(starts):
                following = paths[starts[i + 1] : starts[i + 1] + batch_size]
                pending = pool.submit(_load_batch, following, subject, skip_unreadable)
            good = [j for j, item in enumerate(loaded) if not isinstance(item, DataError)]
            failures += [(batch[j], _reason(item, batch[j])) for j, item in enumerate(loaded) if isinstance(item, DataError)]
            if good:
                policy = no_face if skip_unreadable or no_face == "whole" else "error"
                images = [loaded[j] for j in good]
                out = embed_images(encoder, images, [str(batch[j]) for j in good], no_face=policy)  # type: ignore[arg-type]
                rows = np.asarray([good[k] for k in out.kept], dtype=np.int64) + start
                features[rows] = out.features
                embedded[rows] = True
                failures += [(batch[good[k]], reason) for k, reason in out.failures]
            if on_progress is not None:
                on_progress(start + len(batch), total)
    return Embeddings(features, embedded, failures)


class EncoderEvaluation(NamedTuple):
    """Ranking metrics plus the features they came from (query rows, gallery rows), the
    records evaluated (those whose image could be read) and the images skipped."""

    result: RankingResult
    query_features: np.ndarray
    gallery_features: np.ndarray
    query_records: list[ImageRecord]
    gallery_records: list[ImageRecord]
    skipped: list[tuple[Path, str]]


def evaluate_encoder(
    encoder: Encoder,
    query_records: Sequence[ImageRecord],
    gallery_records: Sequence[ImageRecord],
    *,
    batch_size: int = EvalConfig.batch_size,
    rerank: bool = False,
    max_rank: int = 50,
    chunk_size: int | None = None,
    on_progress: ProgressFn | None = None,
    skip_unreadable: bool = False,
    subject: SubjectRule | None = None,
    no_face: str = "skip",
) -> EncoderEvaluation:
    """Embed query and gallery images and evaluate them under the Market-1501 protocol.

    Distances are Euclidean between the encoder's L2-normalized embeddings.  ``subject``
    and ``no_face`` cut and refuse photos as in :func:`embed_paths`.  An unreadable image
    (or one left out by them) raises DataError naming the file, or with
    ``skip_unreadable`` is left out of the split and listed in ``skipped`` (the figures
    are then over the images that were embedded).
    """
    if not query_records:
        raise DataError("the dataset has no query images to evaluate")
    if not gallery_records:
        raise DataError("the dataset has no gallery images to evaluate")
    records = list(query_records) + list(gallery_records)
    embeddings = embed_paths(
        encoder,
        [r.path for r in records],
        batch_size=batch_size,
        on_progress=on_progress,
        skip_unreadable=skip_unreadable,
        subject=subject,
        no_face=no_face,
    )
    num_query = len(query_records)
    keep_q, keep_g = embeddings.embedded[:num_query], embeddings.embedded[num_query:]
    query_records = [r for r, keep in zip(query_records, keep_q, strict=True) if keep]
    gallery_records = [r for r, keep in zip(gallery_records, keep_g, strict=True) if keep]
    if not query_records or not gallery_records:
        side = "query" if not query_records else "gallery"
        first = "{}: {}".format(*embeddings.failures[0])
        raise DataError(f"no usable {side} image to evaluate ({len(embeddings.failures)} skipped; first {first})")
    q_feats = embeddings.features[:num_query][keep_q]
    g_feats = embeddings.features[num_query:][keep_g]
    result = evaluate_features(
        q_feats,
        g_feats,
        np.array([r.pid for r in query_records]),
        np.array([r.pid for r in gallery_records]),
        np.array([r.camid for r in query_records]),
        np.array([r.camid for r in gallery_records]),
        metric="euclidean",
        max_rank=max_rank,
        rerank=rerank,
        chunk_size=chunk_size,
    )
    return EncoderEvaluation(result, q_feats, g_feats, query_records, gallery_records, embeddings.failures)


@dataclass
class PairScores:
    """Distances of the pairs whose two images could be embedded, and what was skipped."""

    distances: np.ndarray
    is_same: np.ndarray
    fold_ids: np.ndarray | None
    num_pairs_total: int
    skipped_images: list[tuple[Path, str]]
    # A person model given photos whole that have no person's shape (person_model_note).
    note: str = ""

    @property
    def num_pairs_skipped(self) -> int:
        return self.num_pairs_total - int(self.distances.size)


def score_pairs(
    encoder: Encoder,
    pair_set: PairSet,
    *,
    batch_size: int = 64,
    on_progress: ProgressFn | None = None,
    subject: SubjectRule | None = None,
    no_face: str = "skip",
) -> PairScores:
    """Embed every distinct image once and measure each pair; unreadable images (and
    images in which ``subject`` or a face model finds no face, unless ``no_face`` and the
    rule say "whole") are skipped and counted, and so are the pairs that use them; under
    "error" such an image raises DataError naming it.  ``note``: :func:`person_model_note`
    on the first :data:`SHAPE_SAMPLE` photos, when they are given to the model whole."""
    unique = pair_set.image_paths()
    row = {path: i for i, path in enumerate(unique)}
    emb = embed_paths(
        encoder,
        unique,
        batch_size=batch_size,
        on_progress=on_progress,
        skip_unreadable=True,
        subject=subject,
        no_face=no_face,
    )
    kept = [p for p in pair_set.pairs if emb.embedded[row[p.a]] and emb.embedded[row[p.b]]]
    a = emb.features[[row[p.a] for p in kept]].reshape(len(kept), encoder.dim)
    b = emb.features[[row[p.b] for p in kept]].reshape(len(kept), encoder.dim)
    folds = pair_set.fold_ids
    fold_ids = None if folds is None else np.array([p.fold for p in kept], dtype=np.int64)
    return PairScores(
        distances=pair_distance(a, b),
        is_same=np.array([p.same for p in kept], dtype=bool),
        fold_ids=fold_ids,
        num_pairs_total=len(pair_set.pairs),
        skipped_images=emb.failures,
        note=_whole_photos_note(encoder, unique, subject),
    )


def _whole_photos_note(encoder: Encoder, paths: Sequence[Path], subject: SubjectRule | None) -> str:
    """:func:`person_model_note` on the first photos that can be read, when the model is
    given photos whole (no detector cuts them); "" otherwise."""
    if encoder.card.kind != "person" or (subject is not None and subject.detector is not None):
        return ""
    shapes = []
    for path in paths[:SHAPE_SAMPLE]:
        try:
            shapes.append(read_image(path).shape)
        except DataError:
            continue
    return person_model_note(encoder.card, shapes)


class PairVerification(NamedTuple):
    result: VerificationResult
    scores: PairScores

    @property
    def accuracy_with_unscored(self) -> float:
        """Accuracy over every pair of the set, the unscored ones counted as errors (the
        LFW practice): accuracy over the scored pairs x scored / all."""
        return self.result.accuracy * self.scores.distances.size / max(self.scores.num_pairs_total, 1)

    def summary(self) -> dict[str, float | int]:
        """The pair counts and both accuracies, for reports."""
        return {
            "pairs_total": self.scores.num_pairs_total,
            "pairs_scored": int(self.scores.distances.size),
            "pairs_unscored": self.scores.num_pairs_skipped,
            "accuracy_scored_pairs": self.result.accuracy,
            "accuracy_unscored_as_errors": self.accuracy_with_unscored,
        }


def verify_pairs(
    encoder: Encoder,
    pair_set: PairSet,
    *,
    folds: int = PairConfig.folds,
    batch_size: int = PairConfig.batch_size,
    on_progress: ProgressFn | None = None,
    subject: SubjectRule | None = None,
    no_face: str = "skip",
) -> PairVerification:
    """LFW-style verification of a pair set: folds from the file when it defines them
    (LFW's pairs.txt), else ``folds`` stratified folds in file order.  Metrics are over
    the scored pairs; :attr:`PairVerification.accuracy_with_unscored` counts the rest as errors."""
    scores = score_pairs(
        encoder, pair_set, batch_size=batch_size, on_progress=on_progress, subject=subject, no_face=no_face
    )
    if scores.distances.size == 0:
        raise DataError(f"{pair_set.source}: no pair has two readable images ({len(scores.skipped_images)} unreadable)")
    fold_spec = scores.fold_ids if scores.fold_ids is not None and len(np.unique(scores.fold_ids)) > 1 else folds
    try:
        result = verification_metrics(scores.distances, scores.is_same, folds=fold_spec)
    except DataError as exc:
        raise DataError(f"{pair_set.source}: {exc}") from None
    return PairVerification(result, scores)


@dataclass
class PairDecision:
    """A pair's distance (Euclidean between unit embeddings, 0..2), the threshold it was
    decided at, ``same`` when distance <= threshold, and where the threshold came from
    (:meth:`reid.decision.Threshold.describe`)."""

    distance: float
    threshold: float
    same: bool
    threshold_source: str
    note: str = ""
    # A person model given photos that have no person's shape (person_model_note).
    kind_note: str = ""


def compare_images(
    encoder: Encoder,
    path_a: str | Path,
    path_b: str | Path,
    *,
    threshold: float | None = None,
    far: float | None = None,
    model_name: str | None = None,
    subject: SubjectRule | None = None,
    no_face: str = "error",
) -> PairDecision:
    """Distance between two images and the same/different decision at the threshold given
    (or the card's distance at false-accept rate ``far``), else at the model card's
    calibrated threshold; ``note`` says when a given threshold is far looser than the
    card's (:func:`reid.decision.far_note`), ``kind_note`` when a person model is given two
    photos without a person's shape (:func:`person_model_note`).

    Raises ConfigError for a threshold outside (0, 2] or a card without one (naming
    ``model_name``, default the card's name), DataError naming the file that cannot be read
    or (unless ``no_face`` and ``subject``'s rule say "whole") shows no face to
    ``subject``'s detector or to a face model (two photos are compared or nothing is), and
    ModelError on non-finite embeddings.
    """
    chosen = resolve_threshold(threshold, encoder.card, far=far, model_name=model_name)
    images = _load_batch([Path(path_a), Path(path_b)], _fitted(subject, encoder), skip_unreadable=False)
    policy = "whole" if no_face == "whole" else "error"
    features = embed_images(encoder, images, [str(path_a), str(path_b)], no_face=policy).features
    distance = float(pair_distance(features[:1], features[1:])[0])
    kind_note = person_model_note(encoder.card, [image.shape for image in images], model_name)
    return PairDecision(distance, chosen.value, distance <= chosen.value, chosen.describe(), chosen.note, kind_note)
