"""Decisions on distances: how a distance is computed, what a valid threshold is, and which
threshold a run answers at.

Distances in reid are Euclidean between L2-normalized embeddings, so they lie in 0..2
(0: the same direction, sqrt(2): orthogonal, 2: opposite).  For unit vectors
``||a - b||^2 = 2 - 2 a.b``, so the distance follows from the inner product (FAISS's
score, the cosine similarity) as ``sqrt(2 - 2 a.b)``.  Every place that reports or
compares a distance — gallery search, pair verification, threshold calibration, ranking,
and the losses — computes it through this module, so a number means the same everywhere.

A threshold outside (0, 2] would accept nothing or everything, and is a mistake (a cosine
similarity, a percentage) rather than a choice; :func:`check_distance_threshold` refuses
it.  :func:`resolve_threshold` picks the threshold a run answers at and says where it came
from.

**Other tools' units.**  Thresholds of other tools are other quantities: a cosine
similarity ``s`` (insightface's 0.5) is the distance ``sqrt(2 - 2 s)`` here (1.0); a cosine
distance ``c = 1 - s`` (deepface's 0.40) is ``sqrt(2 c)`` (0.894); face_recognition's
tolerance 0.6 is a Euclidean distance between raw dlib descriptors of norm about 1.42,
about 0.42 here.  Since a wrong unit cannot be told from a loose choice by its value,
:func:`far_note` says when a given threshold accepts far more of the card's calibration
impostors than the card's own threshold does, and a threshold can instead be asked for by
its false-accept rate (:func:`threshold_at_far`), read from the impostor distance quantiles
a calibrated card carries (:func:`impostor_quantiles`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from reid.errors import ConfigError, ConfigValueError
from reid.evaluation.names import distance as distance_text
from reid.evaluation.names import far_percent

GIVEN, MODEL_CARD, GALLERY, DEFAULT = "given", "model card", "gallery", "default"
GALLERY_CALIBRATION = "gallery calibration"
THRESHOLD_SOURCES = (GIVEN, GALLERY_CALIBRATION, MODEL_CARD, GALLERY, DEFAULT)
SYNTHETIC = "synthetic"  # the data set name of reid's generated people ("synthetic" or "synthetic:DIR")
UNIT = "Euclidean distance between unit embeddings, in (0, 2]"
CONVERSIONS = "cosine similarity s is sqrt(2-2s), cosine distance c is sqrt(2c)"
# What every --threshold option says (reid's commands and the apps).
THRESHOLD_HELP = (
    f"Decision threshold, a {UNIT}: same identity at this distance or less. Other tools' units differ: "
    f"{CONVERSIONS} (insightface's similarity 0.5 is 1.0, deepface's cosine distance 0.40 is 0.894); "
    "face_recognition's tolerance 0.6 is on raw dlib descriptors of norm about 1.42, so about 0.42 here."
)
# What every --far option says.
FAR_HELP = (
    "Instead of --threshold: a target false-accept rate such as 1e-3, read from the impostor pairs the model "
    "card was calibrated on ('reid train' and 'reid calibrate' record them), else from the gallery's own pairs."
)
# The false-accept rates at which a calibration records its impostor distance quantiles:
# four a decade from 1 down to 1e-6, and every tenth above 0.1 (where a decade spans most
# impostors), kept where its impostor pairs resolve them.
QUANTILE_RATES = tuple(
    sorted({*(round(10.0 ** (-k / 4), 12) for k in range(25)), *(k / 10 for k in range(2, 10)), 0.95, 0.99}, reverse=True)
)
# A given threshold is called far looser than the card's when it accepts this many times
# the card's own share of its calibration impostors: a factor 10 is a decade on the ROC,
# beyond any choice of operating point among thresholds of the same unit.
FAR_NOTE_FACTOR = 10.0
# A given threshold at most this share of the card's own is said to be far stricter: the
# distances of one person's photos cluster near the card's threshold, not near 0, so a value
# that low is more often another tool's unit (a cosine similarity, a cosine distance).
STRICT_NOTE_SHARE = 0.5
# What leaving a person unknown costs in one_identity_each beyond the threshold itself.
UNKNOWN_MARGIN = 1e-9

Matrix = TypeVar("Matrix")


def check_distance_threshold(value: float | None, option: str = "threshold") -> float | None:
    """Return ``value`` as a float (None stays None) when it is a distance threshold in (0, 2].

    Raises ConfigValueError naming ``option`` (an option, or a config key the command line
    names by its option) for anything else (NaN, infinite, negative, 0, above 2).
    """
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or not 0 < value <= 2:
        raise ConfigValueError(option, f"is a distance between unit embeddings, in (0, 2]; got {value}", sep=" ")
    return float(value)


def check_far(value: float | None, option: str = "far") -> float | None:
    """Return ``value`` as a float (None stays None) when it is a false-accept rate in (0, 1).

    Raises ConfigValueError naming ``option`` (as :func:`check_distance_threshold`) for
    anything else (NaN, 0, 1 or more, a percentage).
    """
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or not 0 < value < 1:
        raise ConfigValueError(option, f"is a false-accept rate, a fraction in (0, 1) such as 1e-3; got {value}", sep=" ")
    return float(value)


def check_threshold_or_far(threshold: float | None, far: float | None) -> None:
    """Raise ConfigValueError (naming ``far``) when both a threshold and a false-accept rate
    are given: each decides the threshold, so only one may."""
    if threshold is not None and far is not None:
        raise ConfigValueError("far", f"{far:g}: give a threshold or a false-accept rate, not both", sep=" ")


def impostor_quantiles(impostor_distances: Any) -> tuple[tuple[float, float], ...]:
    """The ``(rate, distance)`` pairs a calibration records: for each rate of
    :data:`QUANTILE_RATES` that its impostor pairs resolve (at least one pair), the
    distance within which that share of them lies.

    ``impostor_distances``: (N,) distances of pairs of different identities (Euclidean
    between unit embeddings).  The distance for rate ``r`` is the ``ceil(r N)``-th smallest,
    so accepting at it admits at least that share.  Rates descend, distances do not rise.
    An empty input gives ().
    """
    d = np.sort(np.asarray(impostor_distances, dtype=np.float64).reshape(-1))
    d = d[np.isfinite(d)]
    if d.size == 0:
        return ()
    out = []
    for rate in QUANTILE_RATES:
        if rate * d.size < 1:
            break
        k = int(math.ceil(rate * d.size - 1e-9))
        out.append((float(rate), round(float(np.clip(d[k - 1], 0.0, 2.0)), 6)))
    return tuple(out)


def check_quantiles(quantiles: Any) -> tuple[tuple[float, float], ...]:
    """``quantiles`` as ``(rate, distance)`` pairs when rates strictly descend in (0, 1] and
    distances do not rise, in [0, 2]; ValueError naming the first problem otherwise."""
    pairs = tuple((float(rate), float(distance)) for rate, distance in quantiles)
    for n, (rate, distance) in enumerate(pairs):
        if not (0 < rate <= 1 and 0 <= distance <= 2):
            raise ValueError(f"entry {n} ({rate}, {distance}) is not a rate in (0, 1] and a distance in [0, 2]")
        if n and not (rate < pairs[n - 1][0] and distance <= pairs[n - 1][1]):
            raise ValueError(f"entry {n}: rates must descend and distances not rise")
    return pairs


def far_at(quantiles: Sequence[tuple[float, float]], threshold: float) -> float | None:
    """The share of the calibration's impostor pairs a ``threshold`` accepts, interpolated
    linearly in log-rate between the recorded quantiles; 1.0 at or above the largest
    impostor distance, None when the quantiles are empty.  Below the smallest recorded
    quantile it returns that quantile's rate, an upper bound (the pairs resolve no less)."""
    if not quantiles:
        return None
    rates = [rate for rate, _ in quantiles]
    distances = [distance for _, distance in quantiles]
    if threshold >= distances[0]:
        return rates[0]
    for (r_hi, d_hi), (r_lo, d_lo) in zip(quantiles, quantiles[1:]):
        if d_lo <= threshold < d_hi:
            step = (threshold - d_lo) / (d_hi - d_lo)
            return float(10 ** (math.log10(r_lo) + step * (math.log10(r_hi) - math.log10(r_lo))))
    return rates[-1]


def threshold_at_far(quantiles: Sequence[tuple[float, float]], far: float, where: str = "the model card") -> float:
    """The distance threshold at false-accept rate ``far`` on a calibration's impostor pairs:
    interpolated linearly in log-rate between the recorded quantiles (:func:`impostor_quantiles`).

    Raises ConfigError when ``far`` is not a rate in (0, 1), when there are no quantiles
    (naming ``where``), and when ``far`` is below the smallest rate they resolve.
    """
    check_far(far)
    if not quantiles:
        raise ConfigValueError(
            "far",
            f"{far:g}: {where} records no impostor distances to read a false-accept rate from; run 'reid calibrate' "
            "on labelled pairs or give a threshold",
            sep=" ",
        )
    rates = [rate for rate, _ in quantiles]
    if far < rates[-1]:
        raise ConfigValueError(
            "far",
            f"{far:g} is below what {where}'s calibration pairs resolve (down to {rates[-1]:.2g}); "
            "calibrate on more pairs or give a larger rate",
            sep=" ",
        )
    for (r_hi, d_hi), (r_lo, d_lo) in zip(quantiles, quantiles[1:]):
        if r_lo <= far <= r_hi:
            step = (math.log10(far) - math.log10(r_lo)) / (math.log10(r_hi) - math.log10(r_lo))
            return max(float(d_lo + step * (d_hi - d_lo)), 1e-6)
    return max(float(quantiles[0][1]), 1e-6)


def far_note(card: ThresholdCard, threshold: float, option: str = "--threshold") -> str:
    """One line when ``threshold`` accepts at least :data:`FAR_NOTE_FACTOR` times the share
    of the card's calibration impostors that the card's own threshold accepts, saying both
    rates and the unit (a value of another unit: a cosine similarity, a raw-descriptor
    distance, looks like a loose threshold); one line too when it is at most
    :data:`STRICT_NOTE_SHARE` of the card's own threshold (another unit looking like a strict
    one); "" otherwise or when the card has neither threshold nor quantiles."""
    quantiles = getattr(card, "impostor_quantiles", ())
    own = card.threshold
    if own is None:
        return ""
    if threshold <= STRICT_NOTE_SHARE * own:
        return (
            f"note: {option} {distance_text(threshold)} is under half of {card.name}'s own threshold {distance_text(own)}, so few photos of "
            f"one person will be that close; the unit is {UNIT} ({CONVERSIONS})"
        )
    if not quantiles:
        return ""
    given_rate, own_rate = far_at(quantiles, threshold), far_at(quantiles, own)
    if given_rate is None or own_rate is None or given_rate < FAR_NOTE_FACTOR * own_rate:
        return ""
    return (
        f"note: {option} {distance_text(threshold)} accepts about {far_percent(given_rate)} of the impostor pairs {card.name}'s "
        f"card was calibrated on (its own {distance_text(own)}: {far_percent(own_rate)}); the unit is {UNIT} ({CONVERSIONS})"
    )


def similarity_to_distance(similarity: Any) -> np.ndarray:
    """Euclidean distance between unit embeddings from their inner product (cosine similarity).

    ``similarity``: an array of any shape, values in [-1, 1]; returns float64 of the same
    shape in 0..2, ``sqrt(2 - 2 * similarity)``.  Rounding can push ``2 - 2 s`` just below 0
    (or a non-unit vector past 4), so it is clipped to [0, 4] before the root.
    """
    return np.sqrt(np.clip(2.0 - 2.0 * np.asarray(similarity, dtype=np.float64), 0.0, 4.0))


def pair_distance(a: Any, b: Any) -> np.ndarray:
    """Euclidean distance between matching rows of two (N, D) arrays of unit embeddings.

    Returns float64 (N,) in 0..2.  Computed from the difference in float64, not from the
    inner product: for near-identical rows ``2 - 2 a.b`` cancels to a few ulps, while the
    difference keeps full precision, and pair verification cares about small distances.
    """
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return np.sqrt(np.einsum("ij,ij->i", diff, diff))


def squared_distances_from_gram(gram: Matrix, row_norms: Any, col_norms: Any) -> Matrix:
    """Turn a Gram matrix ``u_i . v_j`` into squared Euclidean distances, in place, and return it.

    ``gram`` (..., N, M) is a float numpy array or torch tensor; ``row_norms`` (..., N, 1) and
    ``col_norms`` (..., 1, M) hold ``||u_i||^2`` and ``||v_j||^2``.  The result is
    ``||u||^2 - 2 u.v + ||v||^2`` clamped at 0 (rounding can make it slightly negative),
    computed in that order so numpy (ranking) and torch (losses, with autograd written out
    in :mod:`reid.losses.distances`) give the same bits.  For unit rows both norms are 1 and
    this is ``2 - 2 u.v``, the square of :func:`similarity_to_distance`.
    """
    gram *= -2.0
    gram += row_norms
    gram += col_norms
    if isinstance(gram, np.ndarray):
        np.maximum(gram, 0.0, out=gram)
    else:
        gram.clamp_(min=0.0)  # type: ignore[attr-defined]
    return gram


class ThresholdCard(Protocol):
    """What :func:`resolve_threshold` reads from a model card (and, where it has them, its
    ``impostor_quantiles``: ``(rate, distance)`` pairs of :func:`impostor_quantiles`, and
    its ``metrics["dataset"]``)."""

    name: str
    threshold: float | None
    threshold_source: str


class GalleryThreshold(Protocol):
    """A gallery's own calibration as :func:`resolve_threshold` uses it."""

    def as_threshold(self) -> Threshold: ...


class ThresholdGallery(Protocol):
    """What :func:`resolve_threshold` reads from a gallery (:class:`reid.gallery.GalleryBackend`):
    the threshold recorded at its creation, its location (a folder or a URI), its own calibration when it has
    one (``current_calibration``), one computed at a rate on its own pairs
    (``calibrate(far, store=False)``), and its first item (``items(limit=1)``)."""

    @property
    def threshold(self) -> float | None: ...

    @property
    def location(self) -> str: ...

    def current_calibration(self) -> GalleryThreshold | None: ...

    def calibrate(self, far: float, *, store: bool) -> GalleryThreshold: ...

    def items(self, identity: str | None = None, limit: int | None = None) -> list[Any]: ...


@dataclass(frozen=True)
class Threshold:
    """A decision threshold (Euclidean distance between unit embeddings, in (0, 2]) and its origin.

    ``source`` is one of :data:`THRESHOLD_SOURCES`: "given" (an option or the caller, as a
    distance or as a false-accept rate), "gallery calibration" (the gallery's own, from the
    impostor pairs of its identities), "model card" (its calibrated threshold), "gallery"
    (the one recorded at its creation) or "default"; ``detail`` says more where known (the
    card's ``threshold_source``, the gallery folder, how a given value was chosen).  ``note``
    is one line a command should print beside it ("" when none): a given threshold far
    looser than the card's, a card calibrated on synthetic people deciding on real images.
    """

    value: float
    source: str
    detail: str = ""
    note: str = ""

    def describe(self) -> str:
        """One line for summaries and JSON: ``source`` and, when known, ``(detail)``."""
        return f"{self.source} ({self.detail})" if self.detail else self.source


def resolve_threshold(
    given: float | None,
    card: ThresholdCard,
    gallery: ThresholdGallery | None = None,
    *,
    far: float | None = None,
    given_detail: str = "--threshold",
    model_name: str | None = None,
    default: float | None = None,
) -> Threshold:
    """The one rule for the threshold a decision is taken at, and where it came from.

    In order: ``given`` (an option, a request, a setting; ``given_detail`` says which);
    else the distance at false-accept rate ``far``, read from the impostor pairs the card
    was calibrated on (``impostor_quantiles``), or, when the card has none, measured on
    ``gallery``'s own pairs; else ``gallery``'s own calibration (``current_calibration``:
    the impostor pairs of the very identities a query is told apart from); else the card's
    threshold (written by ``reid train`` on held-out identities or by ``reid calibrate``);
    else the one ``gallery`` recorded at its creation; else ``default``.

    The card wins over the threshold a gallery recorded at its creation: recalibrating a
    model keeps its weights and so its fingerprint, and a gallery enrolled before must then
    answer at the new threshold.  ``note``: a given threshold far looser (or far stricter)
    than the card's (:func:`far_note`), or a card calibrated on synthetic people deciding
    on a gallery of other images (:func:`synthetic_card_note`).  ``model_name`` names the
    model in errors (default: the card's name).

    Raises ConfigError when ``given`` or ``default`` is outside (0, 2], when both ``given``
    and ``far`` are set, when ``far`` can be read neither from the card
    (:func:`threshold_at_far`) nor from the gallery's pairs, and when no source has a
    threshold (one line naming the model, the gallery when one was consulted, and what to
    run to get one).
    """
    name = model_name or card.name
    check_threshold_or_far(given, far)
    if check_distance_threshold(given) is not None:
        note = far_note(card, float(given), given_detail)  # type: ignore[arg-type]
        return Threshold(float(given), GIVEN, given_detail, note)  # type: ignore[arg-type]
    if far is not None:
        return _threshold_at_far(card, gallery, far, name)
    own = gallery.current_calibration() if gallery is not None else None
    if own is not None:
        return own.as_threshold()
    if card.threshold is not None:
        note = synthetic_card_note(card, gallery) if gallery is not None else ""
        return Threshold(float(card.threshold), MODEL_CARD, card.threshold_source, note)
    if gallery is not None and gallery.threshold is not None:
        return Threshold(float(gallery.threshold), GALLERY, str(gallery.location))
    if check_distance_threshold(default, "default threshold") is not None:
        return Threshold(float(default), DEFAULT)  # type: ignore[arg-type]
    where = f" and gallery {gallery.location} records none" if gallery is not None else ""
    gallery_step = f"'reid gallery calibrate {gallery.location}', " if gallery is not None else ""
    raise ConfigError(
        f"{name}: the model card has no calibrated threshold{where}; run 'reid calibrate --model {name} --data "
        f"KIND:PATH' (labelled images of people), {gallery_step}or pass --threshold ({UNIT})"
    )


def _threshold_at_far(card: ThresholdCard, gallery: ThresholdGallery | None, far: float, name: str) -> Threshold:
    """The threshold at rate ``far``: on the card's calibration pairs, else on the gallery's own."""
    check_far(far)
    quantiles = getattr(card, "impostor_quantiles", ())
    if quantiles or gallery is None:
        value = threshold_at_far(quantiles, far, f"{name}'s card")
        return Threshold(value, GIVEN, f"--far {far:g} on the impostor pairs {name}'s card was calibrated on")
    try:
        own = gallery.calibrate(far, store=False).as_threshold()
    except ConfigError as exc:
        raise ConfigValueError(
            "far",
            f"{far:g}: {name}'s card records no impostor distances to read a false-accept rate from, and gallery "
            f"{gallery.location}: {exc}",
            sep=" ",
        ) from None
    return Threshold(own.value, GIVEN, f"--far {far:g} on gallery {gallery.location}'s own pairs: {own.detail}")


def synthetic_card_note(card: Any, gallery: Any) -> str:
    """One line when ``card``'s threshold was calibrated on reid's generated (synthetic)
    people and ``gallery`` holds other images (its first item's source lies outside that
    data set's folder); "" otherwise.

    Generated people are another kind of data than camera images: their distances say
    nothing of where strangers of a real scene fall, so such a threshold names them.
    """
    data = str(getattr(card, "metrics", {}).get("dataset", ""))
    if data.split(":")[0] != SYNTHETIC and not re.search(rf"\b{SYNTHETIC}\b", card.threshold_source or ""):
        return ""
    root = data.partition(":")[2] if data.split(":")[0] == SYNTHETIC else ""
    first = gallery.items(limit=1)
    if root and first and Path(first[0].source).resolve().is_relative_to(Path(root).resolve()):
        return ""
    return (
        f"note: {card.name}'s threshold was calibrated on synthetic data (generated people), not on images like "
        f"this gallery's; strangers may be named: run 'reid gallery calibrate {gallery.location}', or give --threshold "
        f"({UNIT}) or --far"
    )


class Match(Protocol):
    """What :func:`nearest_identity` reads from a search answer (a gallery's ``IdentityMatch``)."""

    @property
    def identity(self) -> str: ...

    @property
    def distance(self) -> float: ...


def nearest_identity(matches: list[Any], threshold: Threshold) -> str | None:
    """The identity of the nearest of ``matches`` (nearest first, as a gallery search
    returns them) when its distance (Euclidean between unit embeddings, 0..2) is at most
    ``threshold.value``; None (unknown) when it is farther or there is none.  The one rule
    by which query, camera search and face check-in name a person."""
    nearest: Match | None = matches[0] if matches else None
    if nearest is None or not nearest.distance <= threshold.value:
        return None
    return nearest.identity


def one_identity_each(
    answers: Sequence[Sequence[Any]], threshold: Threshold, barred: Sequence[Collection[str]] | None = None
) -> list[str | None]:
    """Name people seen at the same time (the tracks of one frame of one camera), each
    enrolled identity at most once: a person is in one place at a time.

    ``answers``: per person, the search answer (matches nearest first, each with
    ``identity`` and ``distance``, Euclidean between unit embeddings, 0..2); identities an
    answer does not list are taken as farther than the threshold.  Among the assignments
    that name each person by an identity within ``threshold.value`` or leave them unknown,
    this chooses the one of least total distance, an unknown person counting as the
    threshold (a hair more, so that a person at it is named): the optimal assignment
    (Kuhn 1955, the Hungarian method; scipy's ``linear_sum_assignment``).  So a name goes
    where it is nearest, and no one is named who would not be named alone.  ``barred``:
    per answer, identities it may not take (see :func:`taken_from`); None bars none.
    Returns one identity (None: unknown) per answer, in order; raises nothing.
    """
    # Imported here: every command imports reid.decision, few of them assign.
    from scipy.optimize import linear_sum_assignment

    names = sorted({m.identity for answer in answers for m in answer if m.distance <= threshold.value})
    if not names:
        return [None] * len(answers)
    column = {name: n for n, name in enumerate(names)}
    people = len(answers)
    # Columns: the identities, then one "unknown" per person, costing a hair more than the
    # threshold so that a person at it is named, as nearest_identity names them; pairs
    # beyond the threshold cost more than leaving the person unknown.
    beyond = threshold.value + 1.0
    cost = np.full((people, len(names) + people), beyond)
    cost[:, len(names) :] = np.where(np.eye(people, dtype=bool), threshold.value + UNKNOWN_MARGIN, 2 * beyond)
    for row, answer in enumerate(answers):
        for match in answer:
            if match.distance <= threshold.value and (barred is None or match.identity not in barred[row]):
                cost[row, column[match.identity]] = min(cost[row, column[match.identity]], match.distance)
    rows, cols = linear_sum_assignment(cost)
    named: list[str | None] = [None] * people
    for row, col in zip(rows, cols, strict=True):
        if col < len(names) and cost[row, col] <= threshold.value:
            named[row] = names[col]
    return named


def taken_from(answers: Sequence[Sequence[Any]], named: Sequence[str | None], threshold: Threshold) -> list[set[str]]:
    """Per answer, the identities within ``threshold`` that :func:`one_identity_each` gave
    to another person of the same frame (``named``, its result): a track that lost an
    identity to someone seen beside it is someone else, and stays barred from that
    identity for the rest of its life (the rule of one place at a time carried across
    frames).  On PETS09-S2L1 a stranger who walked beside an enrolled person took that
    person's name once they left (docs/models.md, "Strangers called unknown")."""
    return [
        {m.identity for m in answer if m.distance <= threshold.value and m.identity in named and m.identity != own}
        for answer, own in zip(answers, named, strict=True)
    ]


def one_identity_each_together(
    answers: Sequence[Sequence[Any]], together: Iterable[Iterable[int]], threshold: Threshold
) -> list[str | None]:
    """Name people each seen in several frames (the tracks of one camera, each answered
    once) so that no two seen together are named the same identity.

    ``answers``: per person, the search answer (as :func:`one_identity_each` reads it);
    ``together``: groups of indices into ``answers`` (each in ``range(len(answers))``),
    the people seen in one frame (a person in no group is seen alone).  Each group is
    named by :func:`one_identity_each`; a person is named the identity every group holding
    them gave them, and is unknown (None) where their groups disagree: so two people who
    shared a frame never share a name, and no one is named who would not be named alone.  Returns one identity (None:
    unknown) per answer, in order.
    """
    given: list[set[str | None]] = [set() for _ in answers]
    alone = set(range(len(answers)))
    for group in {tuple(sorted(set(g))) for g in together}:
        for person, name in zip(group, one_identity_each([answers[i] for i in group], threshold), strict=True):
            given[person].add(name)
            alone.discard(person)
    for person in alone:
        given[person].add(nearest_identity(list(answers[person]), threshold))
    return [next(iter(names)) if len(names) == 1 else None for names in given]
