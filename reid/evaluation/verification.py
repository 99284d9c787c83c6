"""Verification metrics on labelled pairs: k-fold accuracy, ROC AUC, EER, TAR at FAR, and
the choice of a decision threshold.

A pair is declared "same" when its distance is at most the threshold.  Distances are the
Euclidean distances between L2-normalized embeddings (0..2), as on the model card, but
nothing here depends on that beyond the histogram range.

Protocol (LFW): the pairs are split into ``folds`` folds; for each fold the threshold that
maximizes accuracy on the other folds is applied to it; the accuracy is the mean (and
standard deviation) over folds.  ROC AUC, EER and TAR at a given FAR are computed over all
pairs at once.  See docs/evaluation.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reid.errors import ConfigError, DataError
from reid.evaluation.names import count, far_percent, percent
from reid.gallery.calibration import MIN_ADMITTED
from reid.serial import as_dict

DEFAULT_FARS = (1e-3, 1e-2)
HISTOGRAM_BINS = 40
DECISION_RULE = "same identity when distance <= threshold"


@dataclass
class RocCurve:
    """Operating points, one per distinct distance, from accepting nothing to accepting all.

    Point k accepts every pair with distance <= ``values[k]``; point 0 accepts none.
    """

    far: np.ndarray
    tar: np.ndarray
    values: np.ndarray
    num_genuine: int
    num_impostor: int

    @property
    def accuracy(self) -> np.ndarray:
        correct = self.tar * self.num_genuine + (1.0 - self.far) * self.num_impostor
        return correct / (self.num_genuine + self.num_impostor)

    def threshold_at(self, k: int) -> float:
        """A threshold realizing point k: halfway to the next distinct distance."""
        if k == len(self.values) - 1:
            return float(self.values[k])
        if k == 0:
            return float(np.nextafter(self.values[1], -np.inf))
        return float((self.values[k] + self.values[k + 1]) / 2)


def _validate(distances: Any, is_same: Any) -> tuple[np.ndarray, np.ndarray]:
    d = np.asarray(distances, dtype=np.float64).reshape(-1)
    s = np.asarray(is_same).reshape(-1)
    if d.size != s.size:
        raise DataError(f"{d.size} distances but {s.size} labels")
    if not np.isfinite(d).all():
        raise DataError("distances contain NaN or infinite values")
    s = s.astype(bool)
    if s.all() or not s.any():
        raise DataError(
            f"pairs need both genuine and impostor examples; got {int(s.sum())} genuine, {int((~s).sum())} impostor"
        )
    return d, s


def roc_curve(distances: Any, is_same: Any) -> RocCurve:
    """The ROC over every distinct distance, ties kept together (no arbitrary order).

    ``distances``: (N,) pair distances (Euclidean between unit embeddings, 0..2; a pair is
    accepted as the same identity at distance <= threshold); ``is_same``: (N,) booleans.

    Raises:
        DataError: the two differ in length, a distance is NaN or infinite, or the pairs
            are all genuine or all impostor.
    """
    d, s = _validate(distances, is_same)
    values, inverse = np.unique(d, return_inverse=True)
    genuine = np.bincount(inverse[s], minlength=values.size)
    impostor = np.bincount(inverse[~s], minlength=values.size)
    num_genuine, num_impostor = int(s.sum()), int((~s).sum())
    tar = np.r_[0.0, np.cumsum(genuine) / num_genuine]
    far = np.r_[0.0, np.cumsum(impostor) / num_impostor]
    return RocCurve(far, tar, np.r_[-np.inf, values], num_genuine, num_impostor)


def auc(curve: RocCurve) -> float:
    """Area under the ROC (TAR against FAR), trapezoids; ties count one half."""
    return float(np.sum(np.diff(curve.far) * (curve.tar[1:] + curve.tar[:-1]) / 2))


def equal_error_rate(curve: RocCurve) -> float:
    """The rate where FAR equals FRR = 1 - TAR, interpolated linearly between points."""
    frr = 1.0 - curve.tar
    k = int(np.argmax(curve.far >= frr))
    if k == 0:
        return float(curve.far[0])
    far0, far1, frr0, frr1 = curve.far[k - 1], curve.far[k], frr[k - 1], frr[k]
    step = (frr0 - far0) / ((far1 - far0) - (frr1 - frr0))
    return float(far0 + step * (far1 - far0))


def tar_at_far(curve: RocCurve, target: float) -> tuple[float, int]:
    """The highest TAR whose FAR does not exceed ``target``, and the point that gives it."""
    # FARs are ratios k/n: the slack keeps k/n == target from failing on the last bit.
    k = int(np.flatnonzero(curve.far <= target + 1e-12)[-1])
    return float(curve.tar[k]), k


# Below this true-accept rate at the chosen threshold a model does not separate the pairs'
# identities, however high its accuracy: on pairs that are mostly impostors, rejecting every
# pair is already accurate.
LOW_TAR = 0.1


def impostors_to_resolve(far: float) -> int:
    """How many impostor pairs resolve the false-accept rate ``far``: enough that
    ``MIN_ADMITTED`` of them lie within its threshold (the rule a gallery's calibration
    keeps too, :data:`reid.gallery.calibration.MIN_ADMITTED`)."""
    return math.ceil(MIN_ADMITTED / far - 1e-9)


def unresolved_far_note(num_impostor: int, far: float, consequence: str) -> str | None:
    """The one note for a figure at false-accept rate ``far`` (a threshold for it, a
    TAR@FAR) measured on ``num_impostor`` impostor pairs, too few to resolve it; None when
    they are enough.  ``consequence`` says what the figure stands on instead."""
    needed = impostors_to_resolve(far)
    if num_impostor >= needed:
        return None
    return (
        f"note: {count(num_impostor)} impostor pairs cannot resolve FAR {far:g} (that takes {count(needed)}, "
        f"so that {MIN_ADMITTED} lie within its threshold); {consequence}"
    )


@dataclass
class ThresholdChoice:
    """A decision threshold and what it does on the pairs it was chosen on.  ``target_far``
    is the rate it was chosen for (None: best accuracy); ``asked_far`` the rate asked when
    the pairs were too few for it and ``target_far`` is the smallest they resolve (else None)."""

    threshold: float
    criterion: str
    target_far: float | None
    far: float
    tar: float
    accuracy: float
    num_genuine: int
    num_impostor: int
    asked_far: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**as_dict(self), "rule": DECISION_RULE}

    @property
    def admitted(self) -> int:
        """How many of the impostor pairs the threshold admits."""
        return round(self.far * self.num_impostor)

    @property
    def note(self) -> str | None:
        """The notes on this choice, one a line, or None: the asked rate the pairs cannot
        resolve (:func:`unresolved_far_note`), and TAR at this threshold below
        :data:`LOW_TAR` (the model does not separate these identities, whatever the accuracy)."""
        notes = []
        asked = self.asked_far if self.asked_far is not None else self.target_far
        if asked is not None:
            instead = f"chosen at FAR <= {self.target_far:g} instead, " if self.target_far != asked else ""
            admits = f"the threshold admits {count(self.admitted)} of them (FAR {far_percent(self.far)})"
            notes.append(unresolved_far_note(self.num_impostor, asked, instead + admits))
        if self.tar < LOW_TAR:
            notes.append(
                f"note: TAR {percent(self.tar)} at FAR {far_percent(self.far)}: the model does not separate these "
                f"identities (accuracy {percent(self.accuracy)} counts the {count(self.num_impostor)} impostor pairs "
                "it rejects)"
            )
        return "\n".join(n for n in notes if n) or None


def choose_threshold(
    distances: Any, is_same: Any, target_far: float | None = None, asked_far: float | None = None
) -> ThresholdChoice:
    """The threshold with the highest TAR at FAR <= ``target_far``, or, when ``target_far``
    is None, the one with the best accuracy (the smallest such threshold if several).
    ``asked_far``: the rate a user asked when ``target_far`` replaces it (too few impostor
    pairs for it), named in the criterion and the note.

    Inputs as for :func:`roc_curve`; the threshold is a Euclidean distance (0..2).

    Raises:
        DataError: as :func:`roc_curve`.
        ConfigError: ``target_far`` outside (0, 1].
    """
    curve = roc_curve(distances, is_same)
    if target_far is None:
        k = int(np.argmax(curve.accuracy))
        criterion = "best accuracy"
    else:
        if not 0.0 < target_far <= 1.0:
            raise ConfigError(f"target FAR must lie in (0, 1], got {target_far}")
        _, k = tar_at_far(curve, target_far)
        criterion = f"FAR <= {target_far:g}"
        if asked_far is not None and asked_far != target_far:
            criterion += f", {asked_far:g} asked: not resolved by {count(curve.num_impostor)} impostor pairs"
        elif curve.num_impostor < impostors_to_resolve(target_far):
            criterion += f", not resolved by {count(curve.num_impostor)} impostor pairs"
    return ThresholdChoice(
        threshold=curve.threshold_at(k),
        criterion=criterion,
        target_far=target_far,
        far=float(curve.far[k]),
        tar=float(curve.tar[k]),
        accuracy=float(curve.accuracy[k]),
        num_genuine=curve.num_genuine,
        num_impostor=curve.num_impostor,
        asked_far=asked_far if asked_far != target_far else None,
    )


def fold_assignment(is_same: np.ndarray, folds: int) -> np.ndarray:
    """Fold of each pair: the genuine pairs, in order, are cut into ``folds`` consecutive
    blocks, and so are the impostor pairs.  For LFW's pairs.txt this gives its ten sets."""
    fold = np.empty(is_same.size, dtype=np.int64)
    for label in (True, False):
        where = np.flatnonzero(is_same == label)
        fold[where] = np.arange(where.size) * folds // where.size
    return fold


@dataclass
class VerificationResult:
    """Verification metrics; accuracy, TAR, FAR and EER are fractions in [0, 1]."""

    accuracy: float
    accuracy_std: float
    threshold: float
    auc: float
    eer: float
    tar_at_far: dict[float, float]
    num_pairs: int
    num_genuine: int
    num_impostor: int
    fold_accuracies: list[float] = field(default_factory=list)
    fold_thresholds: list[float] = field(default_factory=list)
    histogram_edges: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    genuine_histogram: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    impostor_histogram: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    roc: RocCurve | None = field(default=None, repr=False)

    @property
    def folds(self) -> int:
        return len(self.fold_accuracies)

    def to_dict(self) -> dict[str, Any]:
        return {
            "accuracy": self.accuracy,
            "accuracy_std": self.accuracy_std,
            "threshold": self.threshold,
            "auc": self.auc,
            "eer": self.eer,
            "tar_at_far": {f"{far:g}": tar for far, tar in self.tar_at_far.items()},
            "num_pairs": self.num_pairs,
            "num_genuine": self.num_genuine,
            "num_impostor": self.num_impostor,
            "folds": self.folds,
            "fold_accuracies": self.fold_accuracies,
            "fold_thresholds": self.fold_thresholds,
            "rule": DECISION_RULE,
            "histogram": {
                "edges": [float(v) for v in self.histogram_edges],
                "genuine": [int(v) for v in self.genuine_histogram],
                "impostor": [int(v) for v in self.impostor_histogram],
            },
        }


def verification_metrics(
    distances: Any,
    is_same: Any,
    folds: int | Sequence[int] = 10,
    fars: Sequence[float] = DEFAULT_FARS,
) -> VerificationResult:
    """k-fold accuracy (threshold chosen on the other folds), ROC AUC, EER, TAR at ``fars``.

    ``folds`` is a number of folds (assigned by :func:`fold_assignment`) or one fold id per
    pair (as LFW's pairs.txt defines them).  ``threshold`` is the best-accuracy threshold
    over all pairs.
    """
    d, s = _validate(distances, is_same)
    if isinstance(folds, (int, np.integer)):
        if folds < 2:
            raise ConfigError(f"k-fold verification needs at least 2 folds, got {folds}")
        if min(s.sum(), (~s).sum()) < folds:
            raise DataError(
                f"{folds} folds need at least {folds} genuine and {folds} impostor pairs; "
                f"got {int(s.sum())} and {int((~s).sum())}"
            )
        fold_ids = fold_assignment(s, int(folds))
    else:
        fold_ids = np.asarray(folds, dtype=np.int64).reshape(-1)
        if fold_ids.size != d.size:
            raise DataError(f"{fold_ids.size} fold ids for {d.size} pairs")
    accuracies, thresholds = [], []
    for fold in np.unique(fold_ids):
        test = fold_ids == fold
        train = ~test
        if s[train].all() or not s[train].any():
            raise DataError(f"fold {fold}: the other folds lack genuine or impostor pairs")
        chosen = choose_threshold(d[train], s[train]).threshold
        thresholds.append(chosen)
        accuracies.append(float(np.mean((d[test] <= chosen) == s[test])))
    curve = roc_curve(d, s)
    edges = np.linspace(0.0, max(2.0, float(d.max())), HISTOGRAM_BINS + 1)
    return VerificationResult(
        accuracy=float(np.mean(accuracies)),
        accuracy_std=float(np.std(accuracies)),
        threshold=choose_threshold(d, s).threshold,
        auc=auc(curve),
        eer=equal_error_rate(curve),
        tar_at_far={float(far): tar_at_far(curve, far)[0] for far in fars},
        num_pairs=int(d.size),
        num_genuine=curve.num_genuine,
        num_impostor=curve.num_impostor,
        fold_accuracies=accuracies,
        fold_thresholds=thresholds,
        histogram_edges=edges,
        genuine_histogram=np.histogram(d[s], bins=edges)[0],
        impostor_histogram=np.histogram(d[~s], bins=edges)[0],
        roc=curve,
    )
