"""PETS09-S2L1 (MOTChallenge 2015): the public Faster R-CNN detections tracked by reid, from
their boxes alone and with appearance cut from the video, and scored against the ground
truth.  The floors are well below the figures measured (docs/tracking.md), so that a
regression fails; no time is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.evaluation.mot import score_tracks, scored_truth
from reid.models import load_encoder, stand_in_model
from reid.track import TrackerConfig
from reid.track.appearance import VideoAppearance
from reid.track.mot import read_mot, track_detection_file
from tests.conftest import SHARED_DATA

SEQUENCE = SHARED_DATA / "video" / "pets09-s2l1"
VIDEO = SEQUENCE.parent / "vtest.avi"
# MOT15's frame rate for the sequence.
FPS = 7.0
# The appearance test embeds the boxes of the first frames only, to stay near half a minute.
FIRST_FRAMES = 200


@pytest.mark.skipif(not (SEQUENCE / "det-frcnn.txt").is_file(), reason="PETS09-S2L1 ground truth and detections absent")
@pytest.mark.parametrize(
    ("config", "floors"),
    [
        # The defaults (ByteTrack's thresholds for a file of probabilities); measured (joined,
        # consistent gaps filled, smoothed): MOTA 67.7, IDF1 53.4, HOTA 41.5, 59 switches, 52 tracks.
        (TrackerConfig(), {"mota": 62.0, "idf1": 47.0, "hota": 36.0, "switches": 85, "tracks": 80}),
        # Every box confident (all of these scores are from 0.5); measured: MOTA 65.9, IDF1
        # 50.1, HOTA 38.9, 77 switches, 60 tracks.
        (
            TrackerConfig(high_score=0.5),
            {"mota": 60.0, "idf1": 44.0, "hota": 33.0, "switches": 105, "tracks": 90},
        ),
    ],
    ids=["defaults", "every-box-confident"],
)
def test_frcnn_detections_tracked_score_above_floors(
    tmp_path: Path, config: TrackerConfig, floors: dict[str, float]
) -> None:
    out = tmp_path / "tracks.txt"
    track_detection_file(SEQUENCE / "det-frcnn.txt", out, config, fps=FPS)
    score = score_tracks(scored_truth(read_mot(SEQUENCE / "gt.txt")), read_mot(out))
    assert score.people == 19
    assert score.mota >= floors["mota"]
    assert score.idf1 >= floors["idf1"]
    assert score.hota >= floors["hota"]
    assert score.switches <= floors["switches"]
    assert score.tracks <= floors["tracks"]


@pytest.mark.slow
@pytest.mark.skipif(
    not (SEQUENCE / "det-frcnn.txt").is_file() or not VIDEO.is_file(),
    reason="PETS09-S2L1 detections or vtest.avi absent",
)
def test_frcnn_detections_tracked_with_appearance_from_the_video_score_above_floors(tmp_path: Path) -> None:
    """The first 200 frames (1,132 boxes, 8 people), embedded by an untrained ResNet-18 at
    64x32, ByteTrack's scores.  Measured (joined, consistent gaps filled, smoothed): MOTA
    47.1, IDF1 55.3, HOTA 38.6, 18 switches, 14 tracks (boxes alone: IDF1 51.6, 24
    switches, 23 tracks)."""
    rows = [r for r in read_mot(SEQUENCE / "det-frcnn.txt") if r.frame <= FIRST_FRAMES]
    detections, out = tmp_path / "det.txt", tmp_path / "tracks.txt"
    detections.write_text("".join(r.line() + "\n" for r in rows))
    model = stand_in_model(tmp_path / "model", "person", architecture="resnet18", embedding_dim=64, input_size=(64, 32))
    appearance = VideoAppearance(VIDEO, load_encoder(model, device="cpu"))
    config = TrackerConfig(high_score=0.6, start_score=0.7)
    result = track_detection_file(detections, out, config, fps=FPS, appearance=appearance)
    assert result.embedded == len(rows)
    truth = [r for r in scored_truth(read_mot(SEQUENCE / "gt.txt")) if r.frame <= FIRST_FRAMES]
    score = score_tracks(truth, read_mot(out))
    assert score.people == 8
    assert score.mota >= 38.0
    assert score.idf1 >= 45.0
    assert score.hota >= 31.0
    assert score.switches <= 30
    assert score.tracks <= 22
