"""The two-stage tracker on synthetic moving boxes: gaps, noise, crossings, weak boxes, ends and starts."""

from __future__ import annotations

import numpy as np
import pytest

from reid.errors import ConfigError
from reid.track import Observation, Tracker, TrackerConfig, iou


def box_at(frame: int, x: int, y: int = 50, score: float = 1.0) -> Observation:
    return Observation(frame, frame / 10, (x, y, 40, 100), score)


def test_iou_of_known_boxes() -> None:
    assert iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert iou((0, 0, 10, 10), (20, 0, 10, 10)) == 0.0
    assert iou((0, 0, 10, 10), (5, 0, 10, 10)) == pytest.approx(50 / 150)


def test_links_moving_boxes_bridges_gaps_and_drops_noise() -> None:
    tracker = Tracker(0, TrackerConfig(iou=0.3, lost_seconds=0.2, min_boxes=2, high_score=0.5), fps=10)
    for step in range(8):
        observations = [] if step in (3, 4) else [box_at(step, 10 + 6 * step)]
        if step == 5:
            observations.append(Observation(step, 0.5, (300, 0, 30, 30), 0.9))
        tracker.update(step, observations)
    tracks = tracker.finish()
    assert len(tracks) == 1, "the one-box false alarm is dropped and the gap of two frames bridged"
    assert [o.frame for o in tracks[0].observations] == [0, 1, 2, 5, 6, 7]
    assert tracks[0].id == 1


def test_motion_prediction_carries_a_fast_walker_across_an_occlusion() -> None:
    """20 px a frame for a 40 px wide box: after a 3-frame gap the last box no longer
    overlaps the new one at all; only the predicted position does."""
    tracker = Tracker(0, TrackerConfig(lost_seconds=0.3, min_boxes=1), fps=10)
    for step in range(12):
        tracker.update(step, [] if step in (5, 6, 7) else [box_at(step, 20 * step)])
    tracks = tracker.finish()
    assert len(tracks) == 1
    assert [o.frame for o in tracks[0].observations] == [0, 1, 2, 3, 4, 8, 9, 10, 11]


def test_two_people_crossing_keep_their_tracks() -> None:
    """Two walkers pass each other in opposite directions, one a little lower; every frame
    each box keeps its own track."""
    tracker = Tracker(0, TrackerConfig(min_boxes=1))
    left, right = [], []
    for step in range(21):
        a, b = box_at(step, 10 * step, y=50), box_at(step, 200 - 10 * step, y=58)
        tracks = tracker.update(step, [a, b])
        left.append(tracks[0])
        right.append(tracks[1])
    assert len({t.id for t in left}) == 1
    assert len({t.id for t in right}) == 1
    assert left[0] is not right[0]
    assert len(tracker.finish()) == 2


def test_appearance_breaks_the_tie_of_a_symmetric_crossing() -> None:
    """Two tracks meet in the same place: geometry alone cannot tell the two detections
    apart, the embeddings do."""
    red, blue = np.eye(4, dtype=np.float32)[0], np.eye(4, dtype=np.float32)[1]
    tracker = Tracker(0, TrackerConfig(min_boxes=1))
    first = tracker.update(0, [box_at(0, 120), box_at(0, 200)], embeddings=np.stack([red, blue]))
    tracker.update(1, [box_at(1, 140), box_at(1, 180)], embeddings=np.stack([red, blue]))
    # Both tracks predict x=160 next; the detections come in the other order.
    both = tracker.update(2, [box_at(2, 160), box_at(2, 160)], embeddings=np.stack([blue, red]))
    assert both[0] is first[1] and both[1] is first[0]


def test_appearance_gate_keeps_two_people_apart() -> None:
    red, blue = np.eye(4, dtype=np.float32)[0], np.eye(4, dtype=np.float32)[1]
    tracker = Tracker(0, TrackerConfig(appearance=0.5, min_boxes=1))
    first = tracker.update(0, [box_at(0, 100)], embeddings=red[None])
    # Another person steps into the same place: IoU alone would continue the first track.
    second = tracker.update(1, [box_at(1, 102)], embeddings=blue[None])
    assert first[0] is not second[0]
    assert len(tracker.finish()) == 2
    with pytest.raises(ConfigError, match="embedding"):
        tracker.update(2, [box_at(2, 102)])


def test_weak_boxes_continue_tracks_but_start_none() -> None:
    tracker = Tracker(0, TrackerConfig(high_score=0.5, min_boxes=1))
    strong = tracker.update(0, [box_at(0, 100)])
    # A half-hidden person scores low: the second stage still links it to its track.
    weak = tracker.update(1, [box_at(1, 104, score=0.2), Observation(1, 0.1, (400, 0, 30, 60), 0.2)])
    assert weak[0] is strong[0]
    assert weak[1] is None, "a weak box nobody continues is not a new person"
    assert len(tracker.finish()) == 1


def test_a_track_ends_and_a_new_one_starts() -> None:
    tracker = Tracker(0, TrackerConfig(lost_seconds=0.2, min_boxes=2), fps=10)
    for step in range(5):
        tracker.update(step, [box_at(step, 10 + 5 * step)])
    assert tracker.pop_ended() == []
    for step in range(5, 9):
        tracker.update(step, [])
    ended = tracker.pop_ended()
    assert [t.id for t in ended] == [1]
    assert (ended[0].first.frame, ended[0].last.frame, len(ended[0].observations)) == (0, 4, 5)
    for step in range(9, 12):
        tracker.update(step, [box_at(step, 500)])
    assert tracker.pop_ended() == [], "the first track is handed over once"
    rest = tracker.finish()
    assert [(t.id, t.first.frame, t.last.frame) for t in rest] == [(2, 9, 11)]


def test_track_embedding_is_the_normalized_mean_and_best_box_the_largest() -> None:
    tracker = Tracker(0, TrackerConfig(min_boxes=1))
    e0, e1 = np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)
    tracker.update(0, [Observation(0, 0.0, (10, 10, 40, 100), 1.0)], embeddings=e0[None])
    tracks = tracker.update(1, [Observation(1, 0.1, (12, 10, 44, 110), 1.0)], embeddings=e1[None])
    track = tracks[0]
    assert track is not None
    np.testing.assert_allclose(track.embedding, np.array([1, 1]) / np.sqrt(2), rtol=1e-6)
    assert track.best_box == (12, 10, 44, 110)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"iou": 0.0}, r"^iou: input should be greater than 0 \(got 0.0\)$"),
     ({"low_iou": 1.5}, "^low_iou: input should be less than or equal to 1 "),
     ({"lost_seconds": -1.0}, "^lost_seconds: input should be greater than or equal to 0 "),
     ({"lost_seconds": "1"}, "^lost_seconds: input should be a valid number "),
     ({"appearance": 3.0}, "^appearance "), ({"min_boxes": 0}, "^min_boxes: input should be greater than or equal to 1 "),
     ({"embedding_momentum": 1.0}, "^embedding_momentum: input should be less than 1 ")],
)
def test_bad_options_are_config_errors(options: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrackerConfig(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize("score", [float("nan"), float("inf")])
def test_a_high_score_must_be_a_number(score: float) -> None:
    with pytest.raises(ConfigError, match="^high_score: input should be a finite number"):
        TrackerConfig(high_score=score)


def test_a_person_hidden_for_20_frames_keeps_their_track() -> None:
    """At 30 frames/s a track lives a second unseen; the Kalman filter carries the walker's
    box 60 px on, well past any overlap with where they were last seen."""
    tracker = Tracker(0, TrackerConfig(min_boxes=1), fps=30)
    seen = []
    for step in range(60):
        hidden = 20 <= step < 40
        tracks = tracker.update(step, [] if hidden else [box_at(step, 10 + 3 * step)])
        seen += tracks
    assert len({t.id for t in seen if t is not None}) == 1
    assert len(tracker.finish()) == 1


def test_a_walker_hidden_behind_another_keeps_their_track_and_so_does_the_other() -> None:
    """Two people cross; for 8 frames the one behind is not detected at all."""
    tracker = Tracker(0, TrackerConfig(min_boxes=1), fps=10)
    front, back = [], []
    for step in range(40):
        a, b = box_at(step, 20 + 8 * step, y=50), box_at(step, 340 - 8 * step, y=60)
        hidden = 16 <= step < 24
        tracks = tracker.update(step, [a] if hidden else [a, b])
        front.append(tracks[0])
        if not hidden:
            back.append(tracks[1])
    assert len({t.id for t in front}) == 1 and len({t.id for t in back}) == 1
    assert front[0] is not back[0]


def test_a_re_found_track_takes_its_speed_from_the_gap() -> None:
    """A walker slows from 4 to 1 px a frame while unseen: re-run through the gap (OC-SORT's
    re-update), the filter expects the slow pace next, not the fast one it drifted on."""
    tracker = Tracker(0, TrackerConfig(min_boxes=1), fps=10)
    x = 0
    for step in range(10):
        x = 4 * step
        tracker.update(step, [box_at(step, x)])
    x += 7
    track = tracker.update(16, [box_at(16, x)])[0]
    assert track is not None and len(track.observations) == 11
    # Ten frames on: the slow pace puts the walker 10 px further, the fast one 40.
    predicted = track.predicted_box(26)[0]
    assert abs(predicted - (x + 10)) < abs(predicted - (x + 40))


def test_a_new_track_not_seen_again_next_frame_ends_at_once() -> None:
    tracker = Tracker(0, TrackerConfig(min_boxes=1), fps=10)
    tracker.update(0, [box_at(0, 100)])
    tracker.update(1, [])
    tracker.update(2, [])
    assert [len(t.observations) for t in tracker.pop_ended()] == [1]


def test_a_track_is_tentative_until_min_boxes_in_a_row() -> None:
    """With min_boxes 3 (SORT's min_hits): a track seen twice then missed ends at once and is
    never reported; one seen three times rides out the same miss and goes on."""
    tracker = Tracker(0, TrackerConfig(min_boxes=3), fps=10)
    for step in range(2):
        tracker.update(step, [box_at(step, 100 + 2 * step), box_at(step, 500 + 2 * step)])
    tracker.update(2, [box_at(2, 504)])
    tracker.update(3, [])
    tracker.update(4, [box_at(4, 108), box_at(4, 508)])
    tracks = tracker.finish()
    assert [(t.id, len(t.observations)) for t in tracks] == [(2, 4)], "track 1 (2 boxes) ended; track 3 is 1 box"


def test_ocsorts_momentum_is_measured_over_a_tenth_of_a_second() -> None:
    assert [Tracker(0, fps=fps).momentum_steps for fps in (7, 10, 30, 60)] == [1, 1, 3, 6]
    assert Tracker(0).momentum_steps == 3, "unknown rate: 30 fps"


def test_lost_seconds_become_frames_at_the_source_rate() -> None:
    assert Tracker(0, TrackerConfig(lost_seconds=1.0), fps=7).max_lost == 7
    assert Tracker(0, TrackerConfig(lost_seconds=1.0)).max_lost == 30
    with pytest.raises(ConfigError, match="^fps must be above 0"):
        Tracker(0, TrackerConfig(), fps=0)


def test_a_lost_track_is_re_found_by_appearance_where_boxes_no_longer_overlap() -> None:
    """A walker turns back while hidden: the box that reappears does not overlap the
    prediction, but it lies inside the filter's uncertainty and looks the same; a box as
    far off that looks different starts a new track."""
    red, blue = np.eye(4, dtype=np.float32)[0], np.eye(4, dtype=np.float32)[1]
    results = {}
    for colour in ("red", "blue"):
        tracker = Tracker(0, TrackerConfig(min_boxes=1), fps=10)
        first = None
        for step in range(10):
            first = tracker.update(step, [box_at(step, 3 * step)], embeddings=red[None])[0]
        back = box_at(16, 27 - 3 * 6)
        predicted = first.predicted_box(16)
        assert iou(predicted, back.box) < TrackerConfig().iou
        again = tracker.update(16, [back], embeddings=(red if colour == "red" else blue)[None])[0]
        results[colour] = again is first
    assert results == {"red": True, "blue": False}


def test_a_start_score_keeps_middling_boxes_from_starting_tracks() -> None:
    tracker = Tracker(0, TrackerConfig(high_score=0.6, start_score=0.7, min_boxes=1), fps=10)
    first = tracker.update(0, [box_at(0, 100, score=0.65), box_at(0, 300, score=0.9)])
    assert first[0] is None and first[1] is not None
    # Once started, a track continues on confident boxes below the start score.
    again = tracker.update(1, [box_at(1, 302, score=0.65)])
    assert again[0] is first[1]


def test_the_smoothed_embedding_is_a_moving_average_with_the_past_weighted_0_9() -> None:
    """BoT-SORT's update: smooth = 0.9 * smooth + 0.1 * new, re-normalized; the mean
    (``embedding``) stays the plain mean for identity decisions."""
    tracker = Tracker(0, TrackerConfig(min_boxes=1))
    e0, e1 = np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)
    tracker.update(0, [Observation(0, 0.0, (10, 10, 40, 100), 1.0)], embeddings=e0[None])
    track = tracker.update(1, [Observation(1, 0.1, (12, 10, 40, 100), 1.0)], embeddings=e1[None])[0]
    assert track is not None
    np.testing.assert_allclose(track.smoothed_embedding, np.array([0.9, 0.1]) / np.hypot(0.9, 0.1), rtol=1e-6)
    np.testing.assert_allclose(track.embedding, np.array([1, 1]) / np.sqrt(2), rtol=1e-6)
    plain = Tracker(0, TrackerConfig(min_boxes=1, embedding_momentum=None))
    plain.update(0, [Observation(0, 0.0, (10, 10, 40, 100), 1.0)], embeddings=e0[None])
    track = plain.update(1, [Observation(1, 0.1, (12, 10, 40, 100), 1.0)], embeddings=e1[None])[0]
    assert track is not None
    np.testing.assert_allclose(track.smoothed_embedding, track.embedding, rtol=1e-6)
    with pytest.raises(ConfigError, match="momentum"):
        TrackerConfig(embedding_momentum=1.0)


def test_a_zero_embedding_row_counts_as_none() -> None:
    tracker = Tracker(0, TrackerConfig(min_boxes=1))
    track = tracker.update(0, [box_at(0, 10)], embeddings=np.zeros((1, 4), np.float32))[0]
    assert track is not None and track.embedding_sum is None
    again = tracker.update(1, [box_at(1, 12)], embeddings=np.eye(4, dtype=np.float32)[:1])[0]
    assert again is track and track.embedding_sum is not None


def test_of_two_boxes_that_overlap_alike_the_one_ahead_continues_the_track() -> None:
    """OC-SORT's momentum: a walker going right at 5 px a frame; next frame two boxes
    overlap the prediction equally, 20 px behind and 20 px ahead.  The one behind comes
    first (an assignment on overlap alone would take it); the direction term picks the
    one ahead."""
    tracker = Tracker(0, TrackerConfig(min_boxes=1), fps=10)
    walker = None
    for step in range(12):
        walker = tracker.update(step, [Observation(step, None, (5 * step, 50, 100, 100), 1.0)])[0]
    assert walker is not None
    x = walker.predicted_box(12)[0]
    behind = Observation(12, None, (x - 20, 50, 100, 100), 1.0)
    ahead = Observation(12, None, (x + 20, 50, 100, 100), 1.0)
    assert iou(walker.predicted_box(12), behind.box) == pytest.approx(iou(walker.predicted_box(12), ahead.box))
    tracks = tracker.update(12, [behind, ahead])
    assert tracks[1] is walker and tracks[0] is not walker
