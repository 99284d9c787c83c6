"""TUD-Campus and TUD-Stadtmitte (MOTChallenge 2015, 25 fps), from the files py-motmetrics
ships: the boxes of its sample tracker output (test.txt, ids dropped, no scores) tracked
by reid at the sequences' rate and scored against the ground truth.  Floors are well
below the figures measured, so that a regression fails; no time is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.evaluation.mot import score_tracks, scored_truth
from reid.track.mot import MotRow, read_mot, track_detection_file, write_mot

motmetrics = pytest.importorskip("motmetrics", reason="py-motmetrics (the mot extra) is not installed")
DATA = Path(motmetrics.__file__).parent / "data"
# MOT15's frame rate of both sequences.
FPS = 25.0


@pytest.mark.parametrize(
    ("sequence", "floors"),
    [
        # Measured: MOTA 54.0, IDF1 58.5, HOTA 40.7, 2 switches, 7 tracks (the sample output: 52.6, 55.8, 7 switches).
        ("TUD-Campus", {"mota": 48.0, "idf1": 50.0, "hota": 34.0, "switches": 6}),
        # Measured: MOTA 56.6, IDF1 53.4, HOTA 37.0, 5 switches, 9 tracks (the sample output: 56.4, 64.5, 7).
        ("TUD-Stadtmitte", {"mota": 48.0, "idf1": 46.0, "hota": 32.0, "switches": 10}),
    ],
)
def test_boxes_without_scores_tracked_at_25_fps_score_above_floors(
    tmp_path: Path, sequence: str, floors: dict[str, float]
) -> None:
    folder = DATA / sequence
    if not (folder / "test.txt").is_file() or not (folder / "gt.txt").is_file():
        pytest.skip(f"py-motmetrics ships no {sequence} files here")
    detections, out = tmp_path / "det.txt", tmp_path / "tracks.txt"
    write_mot(detections, [MotRow(r.frame, -1, r.box, r.score) for r in read_mot(folder / "test.txt")])
    result = track_detection_file(detections, out, fps=FPS)
    assert result.config is not None and result.config.high_score is None, "scores of -1 are no probabilities"
    score = score_tracks(scored_truth(read_mot(folder / "gt.txt")), read_mot(out))
    assert score.mota >= floors["mota"]
    assert score.idf1 >= floors["idf1"]
    assert score.hota >= floors["hota"]
    assert score.switches <= floors["switches"]
