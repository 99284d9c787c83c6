"""Verification metrics on hand-made distances, and the threshold chooser."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reid.errors import ConfigError, DataError
from reid.evaluation import choose_threshold, roc_curve, verification_metrics
from reid.evaluation.names import far_percent, percent
from reid.evaluation.verification import LOW_TAR, fold_assignment, unresolved_far_note


def separable(n=20):
    genuine = np.linspace(0.1, 0.5, n)
    impostor = np.linspace(0.9, 1.4, n)
    return np.r_[genuine, impostor], np.r_[np.ones(n, bool), np.zeros(n, bool)]


def test_perfectly_separable():
    d, same = separable()
    result = verification_metrics(d, same, folds=10)
    assert result.accuracy == 1.0
    assert result.accuracy_std == 0.0
    assert result.auc == 1.0
    assert result.eer == 0.0
    assert result.tar_at_far == {1e-3: 1.0, 1e-2: 1.0}
    assert 0.5 < result.threshold < 0.9
    assert result.threshold == pytest.approx(0.7)
    assert result.folds == 10
    assert all(0.5 < t < 0.9 for t in result.fold_thresholds)


def test_known_overlap_by_hand():
    # Genuine 0.1, 0.2, 0.6; impostor 0.4, 0.8, 0.9.  Sorted: G G I G I I.
    d = np.array([0.1, 0.2, 0.6, 0.4, 0.8, 0.9])
    same = np.array([1, 1, 1, 0, 0, 0], bool)
    curve = roc_curve(d, same)
    np.testing.assert_allclose(curve.far, [0, 0, 0, 1 / 3, 1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(curve.tar, [0, 1 / 3, 2 / 3, 2 / 3, 1, 1, 1])
    result = verification_metrics(d, same, folds=3)
    # AUC = P(genuine < impostor) = 8 of 9 genuine/impostor orderings.
    assert result.auc == pytest.approx(8 / 9)
    # FAR = FRR = 1/3 between the points (1/3, 2/3 TAR) and (1/3, 1 TAR): EER 1/3.
    assert result.eer == pytest.approx(1 / 3)
    assert result.tar_at_far[1e-2] == pytest.approx(2 / 3)
    # Best accuracy over all pairs: accept <= 0.2 (5/6) and accept <= 0.6 (5/6) tie; the
    # smaller threshold wins, halfway between 0.2 and 0.4.
    assert result.threshold == pytest.approx(0.3)


def test_tied_distances_count_half_in_auc():
    d = np.array([0.5, 0.5])
    result = roc_curve(d, np.array([True, False]))
    from reid.evaluation.verification import auc, equal_error_rate

    assert auc(result) == pytest.approx(0.5)
    assert equal_error_rate(result) == pytest.approx(0.5)


def test_kfold_threshold_is_chosen_on_the_other_folds():
    # Fold 0 (first genuine and first impostor) has a genuine pair at 0.95: the other
    # folds put the threshold below it, so fold 0 loses exactly that pair.
    genuine = np.array([0.95, 0.2, 0.25, 0.3])
    impostor = np.array([1.2, 1.1, 1.3, 1.25])
    d, same = np.r_[genuine, impostor], np.r_[np.ones(4, bool), np.zeros(4, bool)]
    result = verification_metrics(d, same, folds=4)
    assert result.fold_accuracies == [0.5, 1.0, 1.0, 1.0]
    assert result.accuracy == pytest.approx(0.875)
    assert result.accuracy_std == pytest.approx(np.std([0.5, 1, 1, 1]))


def test_fold_assignment_reproduces_lfw_sets():
    # Two sets of 3 matched then 3 mismatched pairs, as LFW's pairs.txt lists them.
    same = np.array([1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0], bool)
    assert fold_assignment(same, 2).tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    # A CSV with all genuine pairs first still gets both kinds in every fold.
    same = np.array([1, 1, 1, 1, 0, 0, 0, 0], bool)
    assert fold_assignment(same, 2).tolist() == [0, 0, 1, 1, 0, 0, 1, 1]


def test_explicit_fold_ids():
    d, same = separable(6)
    result = verification_metrics(d, same, folds=[0, 0, 0, 1, 1, 1] * 2)
    assert result.folds == 2 and result.accuracy == 1.0


def test_choose_threshold_for_target_far():
    rng = np.random.default_rng(0)
    genuine = rng.normal(0.6, 0.1, 2000)
    impostor = rng.normal(1.2, 0.1, 5000)
    d, same = np.r_[genuine, impostor], np.r_[np.ones(2000, bool), np.zeros(5000, bool)]
    choice = choose_threshold(d, same, target_far=1e-3)
    accepted_impostors = np.count_nonzero(impostor <= choice.threshold)
    assert accepted_impostors <= 5
    assert choice.far == pytest.approx(accepted_impostors / 5000)
    assert choice.tar == pytest.approx(np.mean(genuine <= choice.threshold))
    # The next impostor would break the target: the threshold is as generous as allowed.
    assert np.count_nonzero(impostor <= np.sort(impostor)[5]) > 5
    assert choice.threshold < np.sort(impostor)[5]
    best = choose_threshold(d, same)
    assert best.criterion == "best accuracy"
    assert best.accuracy >= choice.accuracy
    assert best.accuracy == pytest.approx(np.mean((d <= best.threshold) == same))


def test_a_choice_that_accepts_almost_no_genuine_pair_says_the_model_does_not_separate_them():
    """Genuine and impostor distances drawn alike: at FAR 1e-3 the threshold accepts almost
    no genuine pair, and accuracy is high only because impostors are most of the pairs."""
    rng = np.random.default_rng(0)
    d = rng.uniform(0.5, 1.5, 20_000)
    same = np.zeros(d.size, bool)
    same[:300] = True
    choice = choose_threshold(d, same, target_far=1e-3)
    assert choice.tar < LOW_TAR and choice.accuracy > 0.95
    assert choice.note is not None and choice.note.startswith(f"note: TAR {percent(choice.tar)} at FAR {far_percent(choice.far)}")
    assert "does not separate these identities" in choice.note and len(choice.note.splitlines()) == 1
    genuine = rng.normal(0.4, 0.05, 300)
    separated = choose_threshold(np.r_[genuine, d[300:]], same, target_far=1e-3)
    assert separated.tar >= LOW_TAR and separated.note is None


def test_to_dict_is_json():
    d, same = separable()
    data = json.loads(json.dumps(verification_metrics(d, same).to_dict()))
    assert data["tar_at_far"] == {"0.001": 1.0, "0.01": 1.0}
    assert sum(data["histogram"]["genuine"]) == 20 and sum(data["histogram"]["impostor"]) == 20
    assert data["rule"] == "same identity when distance <= threshold"


def test_bad_inputs():
    with pytest.raises(DataError, match="both genuine and impostor"):
        verification_metrics([0.1, 0.2], [True, True])
    with pytest.raises(DataError, match="3 distances but 2 labels"):
        verification_metrics([0.1, 0.2, 0.3], [True, False])
    with pytest.raises(DataError, match="10 folds need"):
        verification_metrics([0.1, 0.2, 0.3], [True, False, True])
    with pytest.raises(ConfigError, match="target FAR"):
        choose_threshold([0.1, 0.9], [True, False], target_far=0)


def _separated_pairs(genuine: int, impostor: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    d = np.concatenate([rng.uniform(0.2, 0.6, genuine), rng.uniform(0.5, 1.6, impostor)])
    return d, np.arange(genuine + impostor) < genuine


def test_a_rate_too_few_impostor_pairs_resolve_is_said_so_in_the_criterion_and_the_one_note():
    d, same = _separated_pairs(100, 300)
    choice = choose_threshold(d, same, target_far=1e-3)
    assert choice.criterion == "FAR <= 0.001, not resolved by 300 impostor pairs"
    assert choice.note is not None
    first = choice.note.splitlines()[0]
    assert first.startswith("note: 300 impostor pairs cannot resolve FAR 0.001 (that takes 10,000, so that 10 lie")
    assert first.endswith(f"the threshold admits {choice.admitted} of them (FAR {far_percent(choice.far)})")


def test_a_replaced_rate_names_the_rate_asked_and_what_the_threshold_admits_consistently():
    d, same = _separated_pairs(100, 480)
    choice = choose_threshold(d, same, target_far=0.021, asked_far=1e-3)
    assert choice.criterion == "FAR <= 0.021, 0.001 asked: not resolved by 480 impostor pairs"
    assert choice.admitted == round(choice.far * 480) and choice.admitted > 0
    assert choice.note is not None and choice.note.splitlines()[0].endswith(
        f"chosen at FAR <= 0.021 instead, the threshold admits {choice.admitted} of them (FAR {far_percent(choice.far)})"
    )
    assert choice.to_dict()["asked_far"] == 1e-3


def test_enough_impostor_pairs_give_no_resolution_note():
    d, same = _separated_pairs(100, 10_000)
    choice = choose_threshold(d, same, target_far=1e-3)
    assert choice.criterion == "FAR <= 0.001"
    assert unresolved_far_note(10_000, 1e-3, "x") is None
    assert choice.note is None or "cannot resolve" not in choice.note
    assert unresolved_far_note(9_999, 1e-3, "x") is not None
