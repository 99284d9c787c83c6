"""MOT scoring: perfect tracks, an identity swap, a missed person, HOTA computed by hand on small
cases (localisation thresholds, matching by alignment), and files scored by the challenge's rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.errors import DataError
from reid.evaluation.mot import score_mot_files, score_tracks, scored_truth
from reid.track.mot import MotRow, write_mot


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


def box(x: float, y: float, w: float, h: float) -> tuple[float, float, float, float]:
    return (x, y, w, h)


def test_hota_averages_over_the_localisation_thresholds_by_hand() -> None:
    # One person in four frames; id 1 covers frames 1-2 exactly, id 2 frames 3-4 at IoU 0.5.
    truth = [MotRow(f, 1, box(0, 0, 10, 10), 1.0) for f in range(1, 5)]
    predicted = [MotRow(f, 1, box(0, 0, 10, 10), 1.0) for f in (1, 2)]
    predicted += [MotRow(f, 2, box(0, 0, 10, 5), 1.0) for f in (3, 4)]
    score = score_tracks(truth, predicted)
    # alpha 0.05..0.50 (10 of 19): every box matched, DetA 1; each id holds 2 of the
    # person's 4 boxes: TPA / (TPA + FNA + FPA) = 2 / (4 + 2 - 2) = 1/2 for each, AssA 1/2.
    # alpha 0.55..0.95 (9): frames 1-2 matched, DetA = 2 / (2 + 2 + 2) = 1/3, AssA 1/2.
    hota = (10 * (1 * 0.5) ** 0.5 + 9 * (1 / 3 * 0.5) ** 0.5) / 19
    assert score.hota == pytest.approx(100 * hota, abs=1e-9)
    assert score.deta == pytest.approx(100 * (10 * 1 + 9 / 3) / 19, abs=1e-9)
    assert score.assa == pytest.approx(50.0, abs=1e-9)


def test_hota_matches_by_alignment_over_the_sequence_not_by_overlap_alone() -> None:
    # Frames 1-3: person A with id 1 exactly, person B (far right) with id 2 exactly.
    # Frame 4: A alone; id 1 overlaps A at IoU 0.6, id 2 (drifted over) at IoU 0.8.
    truth = [MotRow(f, 1, box(0, 0, 10, 10), 1.0) for f in range(1, 5)]
    truth += [MotRow(f, 2, box(500, 0, 10, 10), 1.0) for f in range(1, 4)]
    predicted = [MotRow(f, 1, box(0, 0, 10, 10), 1.0) for f in range(1, 4)]
    predicted += [MotRow(f, 2, box(500, 0, 10, 10), 1.0) for f in range(1, 4)]
    predicted += [MotRow(4, 1, box(0, 0, 10, 6), 1.0), MotRow(4, 2, box(0, 0, 10, 8), 1.0)]
    # Alignment A-1: (3 + 0.6 / 1.4) / (4 + 4 - (3 + 0.6 / 1.4)) = 3/4; A-2: (0.8 / 1.4) /
    # (4 + 4 - 0.8 / 1.4) = 1/13.  Weighted, 3/4 * 0.6 beats 1/13 * 0.8: frame 4 matches A-1
    # (overlap alone would take A-2).
    # alpha <= 0.60 (12 of 19): TP 7, FN 0, FP 1; A-1 4 / (4 + 4 - 4) = 1, B-2 3 / (3 + 4 - 3)
    # = 3/4; AssA = (4 * 1 + 3 * 3/4) / 7 = 25/28.
    # alpha >= 0.65 (7): TP 6, FN 1, FP 2; A-1 3 / (4 + 4 - 3) = 3/5, B-2 3/4; AssA = 0.675.
    low, high = (7 / 8) * (25 / 28), (6 / 9) * 0.675
    score = score_tracks(truth, predicted)
    assert score.hota == pytest.approx(100 * (12 * low**0.5 + 7 * high**0.5) / 19, abs=1e-9)
    assert score.deta == pytest.approx(100 * (12 * 7 / 8 + 7 * 6 / 9) / 19, abs=1e-9)
    assert score.assa == pytest.approx(100 * (12 * 25 / 28 + 7 * 0.675) / 19, abs=1e-9)


def test_files_are_scored_by_the_challenge_rules_and_up_to_a_last_frame(tmp_path: Path) -> None:
    truth, tracks = tmp_path / "gt.txt", tmp_path / "tracks.txt"
    ignored = [MotRow(f, 3, (600.0, 50.0, 40.0, 100.0), 0.0) for f in range(1, 11)]
    write_mot(truth, TRUTH + ignored)
    # Tracks of the first five frames only, as a run stopped early writes them.
    write_mot(tracks, [MotRow(r.frame, r.id + 10, r.box, 0.9) for r in TRUTH if r.frame <= 5])
    whole = score_mot_files(truth, tracks)
    assert whole.recall == 0.5 and whole.truth_boxes == 20 and (whole.last_frame, whole.truth_last_frame) == (5, 10)
    first = score_mot_files(truth, tracks, last_frame=5)
    assert (first.mota, first.idf1, first.truth_boxes) == (100.0, 100.0, 10)
    assert first.named()["HOTA"] == pytest.approx(100.0) and first.named()["GT_Dets"] == 10
    write_mot(truth, ignored)
    with pytest.raises(DataError, match="gt.txt: no ground-truth box to score against"):
        score_mot_files(truth, tracks)
