"""MOT scoring: perfect tracks, an identity swap, a missed person, and HOTA's definition on a small case."""

from __future__ import annotations

import pytest

from reid.evaluation.mot import score_tracks, scored_truth
from reid.track.mot import MotRow


def walk(track: int, frames: range, x0: float, step: float) -> list[MotRow]:
    return [MotRow(f, track, (x0 + step * f, 50.0, 40.0, 100.0), 1.0) for f in frames]


TRUTH = walk(1, range(1, 11), 0.0, 5.0) + walk(2, range(1, 11), 300.0, -5.0)


def test_perfect_tracks_score_full_marks() -> None:
    predicted = [MotRow(r.frame, r.id + 10, r.box, 0.9) for r in TRUTH]
    score = score_tracks(TRUTH, predicted)
    assert (score.precision, score.recall, score.mota, score.idf1) == (1.0, 1.0, 100.0, 100.0)
    assert score.hota == pytest.approx(100.0) and score.switches == 0 and score.tracks == 2


def test_a_swap_halfway_costs_identity_but_not_detection() -> None:
    predicted = [MotRow(r.frame, r.id if r.frame <= 5 else 3 - r.id, r.box, 0.9) for r in TRUTH]
    score = score_tracks(TRUTH, predicted)
    assert score.precision == 1.0 and score.recall == 1.0
    assert score.switches == 2
    assert score.idf1 == pytest.approx(50.0)
    # DetA is 1 at every alpha; each person's boxes split 5/5 between two ids: AssA = 1/3.
    assert score.deta == pytest.approx(100.0) and score.assa == pytest.approx(100 / 3)
    assert score.hota == pytest.approx(100 * (1 / 3) ** 0.5)


def test_a_missed_person_and_dropped_truth_rows() -> None:
    ignored = [MotRow(f, 3, (600.0, 50.0, 40.0, 100.0), 0.0) for f in range(1, 11)]
    truth = scored_truth(TRUTH + ignored)
    assert len(truth) == len(TRUTH)
    predicted = [r for r in TRUTH if r.id == 1]
    score = score_tracks(truth, predicted)
    assert score.precision == 1.0 and score.recall == 0.5 and score.mota == pytest.approx(50.0)
    assert score.people == 2
