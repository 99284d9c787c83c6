"""MOTChallenge files: reading and writing round trip, malformed lines, interpolation, tracklet
joining, tracking a detection file."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from reid.errors import ConfigError, DataError
from reid.track import Track, TrackerConfig
from reid.track.mot import (
    MOT_DECIMALS, STRONGSORT_TAU, FrameRate, MotRow, detections_fps, file_config, gaussian_smooth, gsi_length_scale, interpolate,
    link_tracklets, read_mot, track_detection_file, track_looks, write_mot,
)  # fmt: skip


def test_rows_round_trip_sorted_by_frame_then_id(tmp_path: Path) -> None:
    rows = [
        MotRow(2, 1, (10.5, 20.0, 30.25, 60.0), 0.9),
        MotRow(1, 2, (100.0, 20.0, 30.0, 60.0), 1.0),
        MotRow(1, 1, (12.0, 20.0, 30.0, 60.0), 0.75),
    ]
    path = tmp_path / "t.txt"
    assert write_mot(path, rows) == 3
    assert path.read_text().splitlines()[0] == "1,1,12.000,20.000,30.000,60.000,0.750,-1,-1,-1"
    assert read_mot(path) == sorted(rows, key=lambda r: (r.frame, r.id))


def test_every_written_number_has_the_same_decimals(tmp_path: Path) -> None:
    # Whole numbers, a value that rounds to a whole number (249.0004 once gave "249."),
    # long fractions and a value that rounds to zero from below.
    rows = [
        MotRow(1, 1, (499.6414, 249.0004, 40.0, 100.0), 1.0),
        MotRow(2, 1, (1 / 3, -0.0001, 2 / 3, 99.99951), 0.123456),
        MotRow(3, -1, (7.0, 8.5, 9.25, 10.125), -1.0),
    ]
    path = tmp_path / "t.txt"
    write_mot(path, rows)
    lines = path.read_text().splitlines()
    assert lines[0] == "1,1,499.641,249.000,40.000,100.000,1.000,-1,-1,-1"
    assert lines[1] == "2,1,0.333,0.000,0.667,100.000,0.123,-1,-1,-1"
    for line in lines:
        fields = line.split(",")
        assert len(fields) == 10
        assert all(re.fullmatch(r"-?\d+", f) for f in fields[:2] + fields[7:]), line
        assert all(re.fullmatch(rf"-?\d+\.\d{{{MOT_DECIMALS}}}", f) for f in fields[2:7]), line
    back = read_mot(path)
    for written, read in zip(rows, back, strict=True):
        assert read.box == pytest.approx(written.box, abs=0.5 * 10**-MOT_DECIMALS)


def test_ground_truth_lines_with_world_coordinates_are_read(tmp_path: Path) -> None:
    path = tmp_path / "gt.txt"
    path.write_text("1,9,499,158,31.03,75.17,1,-4.1554,-7.3591,0\n\n2,9,500,158,31,75,0,-4.1,-7.3,0\n")
    rows = read_mot(path)
    assert rows == [MotRow(1, 9, (499, 158, 31.03, 75.17), 1.0), MotRow(2, 9, (500, 158, 31, 75), 0.0)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1,1,10,10,5\n", "line 2: 5 fields, a MOT line needs at least 7"),
        ("1,1,ten,10,5,5,1\n", "line 2: x 'ten' is not a number"),
        ("1,1,²,10,5,5,1\n", "line 2: x '²' is not a number"),
        ("1,1," + "9" * 500 + ",10,5,5,1\n", "line 2: x '9999"),
        ("0,1,10,10,5,5,1\n", "line 2: frame '0' must be a whole number from 1"),
        ("1.5,1,10,10,5,5,1\n", "line 2: frame '1.5'"),
        ("1,2.5,10,10,5,5,1\n", "line 2: id '2.5' must be a whole number"),
        ("1,1,10,10,0,5,1\n", "line 2: box 0x5 has no area"),
        ("1,1,10,10,5,5,nan\n", "line 2: score 'nan' is not a finite number"),
        ("1," * 600 + "\n", "line 2: longer than 1000 characters"),
    ],
)
def test_a_malformed_line_names_the_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "det.txt"
    path.write_text("1,-1,10,10,5,5,0.9\n" + line)
    with pytest.raises(DataError, match=message) as error:
        read_mot(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_missing_and_binary_files_are_data_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read MOT file"):
        read_mot(tmp_path / "none.txt")
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe\x00\x01" * 10)
    with pytest.raises(DataError, match="not UTF-8 text"):
        read_mot(binary)
    with pytest.raises(DataError, match="not a regular file"):
        read_mot(tmp_path)


def test_interpolation_fills_short_gaps_linearly_and_leaves_long_ones() -> None:
    rows = [
        MotRow(1, 1, (0.0, 0.0, 10.0, 20.0), 0.9),
        MotRow(4, 1, (30.0, 6.0, 10.0, 20.0), 0.6),
        MotRow(10, 1, (90.0, 6.0, 10.0, 20.0), 0.9),
        MotRow(2, -1, (0.0, 0.0, 5.0, 5.0), 0.5),
    ]
    filled = sorted(interpolate(rows, max_gap=3), key=lambda r: (r.id, r.frame))
    track = [r for r in filled if r.id == 1]
    assert [r.frame for r in track] == [1, 2, 3, 4, 10], "the gap of 5 frames is over the limit of 3"
    assert track[1].box == pytest.approx((10.0, 2.0, 10.0, 20.0))
    assert track[2].box == pytest.approx((20.0, 4.0, 10.0, 20.0))
    assert track[1].score == 0.6
    assert [r for r in filled if r.id == -1] == [rows[3]]


def test_a_detection_file_is_tracked_alone(tmp_path: Path) -> None:
    """Two people walking apart, one missed in frame 3, and a one-box false alarm."""
    lines = []
    for frame in range(1, 7):
        if frame != 3:
            lines.append(f"{frame},-1,{10 + 5 * frame},50,40,100,0.9,-1,-1,-1")
        lines.append(f"{frame},-1,{400 - 5 * frame},60,40,100,0.8,-1,-1,-1")
    lines.append("4,-1,700,0,20,20,0.9,-1,-1,-1")
    detections, out = tmp_path / "det.txt", tmp_path / "out" / "tracks.txt"
    detections.write_text("\n".join(lines) + "\n")
    out.parent.mkdir()
    result = track_detection_file(detections, out, TrackerConfig(min_boxes=2))
    rows = read_mot(out)
    assert result.tracks == 2 and result.detections == 12
    assert {r.id for r in rows} == {1, 2}
    assert all(r.box[0] < 200 for r in rows if r.id == 1) and all(r.box[0] > 200 for r in rows if r.id == 2)


def test_a_bad_detection_file_writes_nothing(tmp_path: Path) -> None:
    detections, out = tmp_path / "det.txt", tmp_path / "tracks.txt"
    detections.write_text("1,-1,10,10,5,5,0.9\n2,-1,10,10,5\n")
    with pytest.raises(DataError, match="line 2"):
        track_detection_file(detections, out)
    assert not out.exists()


def _tracklet(track_id: int, frames: range, x0: float, look: np.ndarray) -> tuple[list[MotRow], Track]:
    track = Track(0, track_id)
    track.add_embedding(look)
    return [MotRow(f, track_id, (x0 + 2.0 * (f - frames.start), 50.0, 40.0, 100.0), 0.9) for f in frames], track


def test_tracklets_that_follow_one_another_and_look_alike_are_joined() -> None:
    """1 ends at frame 10, 2 starts at 15 nearby and looks the same: one.  3 looks the same
    but overlaps 1 and 2 in time, 4 looks different, 5 starts too late, 6 too far away."""
    red, blue = np.eye(3, dtype=np.float32)[0], np.eye(3, dtype=np.float32)[1]
    parts = [
        _tracklet(1, range(1, 11), 0.0, red),
        _tracklet(2, range(15, 25), 30.0, red),
        _tracklet(3, range(8, 18), 25.0, red),
        _tracklet(4, range(13, 20), 25.0, blue),
        _tracklet(5, range(40, 45), 60.0, red),
        _tracklet(6, range(12, 16), 400.0, red),
    ]
    rows = [r for part, _ in parts for r in part]
    linked = link_tracklets(rows, track_looks(t for _, t in parts), max_gap=7)
    assert [r.frame for r in linked] == [r.frame for r in rows], "row order is kept"
    by_old = {old.id: new.id for old, new in zip(rows, linked, strict=True)}
    assert by_old[2] == 1, "the continuation takes the first tracklet's id"
    assert [by_old[i] for i in (1, 3, 4, 5, 6)] == [1, 3, 4, 5, 6]


def test_a_chain_of_tracklets_takes_the_id_of_its_first() -> None:
    red = np.eye(3, dtype=np.float32)[0]
    parts = [
        _tracklet(7, range(1, 5), 0.0, red),
        _tracklet(8, range(7, 10), 12.0, red),
        _tracklet(9, range(12, 15), 24.0, red),
    ]
    linked = link_tracklets([r for part, _ in parts for r in part], track_looks(t for _, t in parts), max_gap=5)
    assert {r.id for r in linked} == {7}


def test_tracklets_without_embeddings_are_joined_on_motion_alone() -> None:
    rows = [MotRow(f, 1, (2.0 * f, 0.0, 40.0, 100.0), 0.9) for f in range(1, 6)]
    rows += [MotRow(f, 2, (2.0 * f, 0.0, 40.0, 100.0), 0.9) for f in range(8, 12)]
    linked = link_tracklets(rows, track_looks([Track(0, 1), Track(0, 2)]), max_gap=5)
    assert {r.id for r in linked} == {1}
    assert link_tracklets(rows, {}, max_gap=2) == rows, "a gap of 3 frames is over a window of 2"


def _walk(track_id: int, frames: range, x0: float, speed: float, y: float = 50.0) -> list[MotRow]:
    """A person walking along x at ``speed`` pixels a frame, at x0 in the range's first frame."""
    return [MotRow(f, track_id, (x0 + speed * (f - frames.start), y, 40.0, 100.0), 0.9) for f in frames]


def test_a_person_hidden_for_20_frames_keeps_their_track_id(tmp_path: Path) -> None:
    """Walking right at 3 px a frame, hidden in frames 31-50, back 40 px behind where the
    constant velocity puts them (they slowed behind the occluder): the tracker alone, whose
    prediction no longer overlaps the box, starts a second track; joining by motion makes it
    one.  The hidden frames stay empty: where the person came back is not where their
    motion before the gap leads (IoU 0 with that box), so a straight line between the two
    ends would draw boxes where nobody walked.  Another person stands far off throughout."""
    walker = _walk(-1, range(1, 31), 10.0, 3.0) + _walk(-1, range(51, 81), 10.0 + 3.0 * 50 - 40.0, 3.0)
    bystander = _walk(-1, range(1, 81), 600.0, 0.0, y=300.0)
    detections = tmp_path / "det.txt"
    detections.write_text("".join(r.line() + "\n" for r in walker + bystander))
    apart, joined = tmp_path / "apart.txt", tmp_path / "joined.txt"
    track_detection_file(detections, apart, link=False)
    track_detection_file(detections, joined)
    walking = [r for r in read_mot(apart) if r.box[1] < 200]
    assert len({r.id for r in walking}) == 2, "without joining, the person comes back as a new track"
    walking = [r for r in read_mot(joined) if r.box[1] < 200]
    assert len({r.id for r in walking}) == 1
    assert sorted(r.frame for r in walking) == [*range(1, 31), *range(51, 81)], "the inconsistent gap is left"
    standing = {r.id for r in read_mot(joined) if r.box[1] > 200}
    assert len(standing) == 1 and standing.isdisjoint({r.id for r in walking})


def test_a_gap_is_filled_only_where_the_motion_before_it_leads_to_the_box_after_it() -> None:
    """Both tracks walk right at 4 px a frame (boxes 40 wide) and are unseen in frames 6-9.
    Track 1 comes back at frame 10 where its velocity puts it (x 4 + 4 * 9 = 40): filled.
    Track 2 comes back 30 px behind (x 10: IoU 10/70 = 0.14 with the carried-on box, under
    0.3), as a camera turning or a swap of people would place it: left empty.  A gap right
    after a track's first box has no velocity to check and is filled."""
    first = _walk(1, range(1, 6), 4.0, 4.0) + _walk(1, range(10, 12), 40.0, 4.0)
    second = _walk(2, range(1, 6), 4.0, 4.0, y=300.0) + _walk(2, range(10, 12), 10.0, 4.0, y=300.0)
    third = [MotRow(1, 3, (0.0, 600.0, 40.0, 100.0), 0.9), MotRow(4, 3, (90.0, 600.0, 40.0, 100.0), 0.9)]
    filled = interpolate(first + second + third, max_gap=5, consistency=0.3)
    frames = {i: sorted(r.frame for r in filled if r.id == i) for i in (1, 2, 3)}
    assert frames[1] == list(range(1, 12))
    assert frames[2] == [1, 2, 3, 4, 5, 10, 11]
    assert frames[3] == [1, 2, 3, 4]
    assert [r.box[0] for r in sorted(filled, key=lambda r: r.frame) if r.id == 1 and 5 < r.frame < 10] == (
        pytest.approx([24.0, 28.0, 32.0, 36.0])
    )
    assert interpolate(second, max_gap=5) != second, "without the check, every gap under the limit is filled"


def test_the_frame_rate_comes_from_the_flag_then_seqinfo_then_the_video_then_the_default(tmp_path: Path) -> None:
    """MOTChallenge's layout: SEQ/seqinfo.ini above SEQ/det/det.txt."""
    (tmp_path / "det").mkdir()
    detections = tmp_path / "det" / "det.txt"
    detections.write_text("1,-1,0,0,10,20,0.9\n")
    assert detections_fps(detections) == FrameRate(30.0, "default")
    assert detections_fps(detections, video_fps=10.0) == FrameRate(10.0, "video")
    info = tmp_path / "seqinfo.ini"
    info.write_text("[Sequence]\nname=S\nframeRate=7\nseqLength=1\n")
    assert detections_fps(detections, video_fps=10.0) == FrameRate(7.0, "seqinfo.ini", info)
    assert detections_fps(detections, 14.0) == FrameRate(14.0, "given")
    assert detections_fps(detections).describe() == f"7 fps (seqinfo.ini: {info})"
    out = tmp_path / "tracks.txt"
    assert track_detection_file(detections, out).rate == FrameRate(7.0, "seqinfo.ini", info)
    info.write_text("[Sequence]\nframeRate=fast\n")
    with pytest.raises(DataError, match="frameRate 'fast' is not a number"):
        detections_fps(detections)
    info.write_text("not an ini file")
    with pytest.raises(DataError, match=r"seqinfo.ini: no \[Sequence\] frameRate"):
        detections_fps(detections)
    with pytest.raises(ConfigError, match="^fps must be above 0"):
        detections_fps(detections, 0.0)


def test_a_file_of_probabilities_is_tracked_with_bytetracks_thresholds() -> None:
    probabilities = [MotRow(1, -1, (0.0, 0.0, 10.0, 20.0), s) for s in (0.1, 0.95)]
    margins = [MotRow(1, -1, (0.0, 0.0, 10.0, 20.0), s) for s in (-1.5, 3.0)]
    chosen = file_config(TrackerConfig(), probabilities)
    assert (chosen.high_score, chosen.start_score) == (0.6, 0.7)
    assert file_config(TrackerConfig(start_score=0.9), probabilities).start_score == 0.9
    assert file_config(TrackerConfig(high_score=0.3), probabilities).high_score == 0.3
    assert file_config(TrackerConfig(), margins).high_score is None, "margins are no probabilities"


def test_weak_boxes_of_a_whole_detector_output_start_no_track(tmp_path: Path) -> None:
    """A person at 0.9 in every frame, and clutter at 0.3 that stays put for 40 frames: the
    whole output of a detector kept from 0.1.  Only the person is tracked."""
    person = [MotRow(f, -1, (10.0 + 3 * f, 50.0, 40.0, 100.0), 0.9) for f in range(1, 41)]
    clutter = [MotRow(f, -1, (500.0, 300.0, 30.0, 60.0), 0.3) for f in range(1, 41)]
    detections, out = tmp_path / "det.txt", tmp_path / "out.txt"
    write_mot(detections, person + clutter)
    result = track_detection_file(detections, out, fps=10.0)
    assert result.config is not None and result.config.high_score == 0.6
    assert result.tracks == 1 and {r.box[0] < 400 for r in read_mot(out)} == {True}


def test_the_joined_gap_is_interpolated_linearly() -> None:
    """Frame 10 at x 18, frame 15 at x 30 (hand computation: 12 px over 5 frames, 2.4 a frame)."""
    rows = _walk(1, range(1, 11), 0.0, 2.0) + _walk(2, range(15, 25), 30.0, 2.0)
    filled = sorted(interpolate(link_tracklets(rows, {}, max_gap=7), max_gap=7), key=lambda r: r.frame)
    assert {r.id for r in filled} == {1}
    gap = [r for r in filled if 10 < r.frame < 15]
    assert [r.frame for r in gap] == [11, 12, 13, 14]
    assert [r.box[0] for r in gap] == pytest.approx([20.4, 22.8, 25.2, 27.6])
    assert all(r.box[1:] == (50.0, 40.0, 100.0) for r in gap)


def test_two_people_crossing_unseen_are_joined_by_where_they_were_going() -> None:
    """One walks right and one left at 5 px a frame on the same line; both are unseen in
    frames 11-19 as they cross.  Each comes back where the other was last seen, so joining
    by nearest last box would swap them; the Kalman predictions do not."""
    rightward, leftward = _walk(1, range(1, 11), 10.0, 5.0), _walk(2, range(1, 11), 150.0, -5.0)
    right_again, left_again = _walk(3, range(20, 30), 105.0, 5.0), _walk(4, range(20, 30), 55.0, -5.0)
    assert right_again[0].box[0] == leftward[-1].box[0] and left_again[0].box[0] == rightward[-1].box[0]
    rows = rightward + leftward + right_again + left_again
    renamed = {old.id: new.id for old, new in zip(rows, link_tracklets(rows, {}, max_gap=30), strict=True)}
    assert renamed == {1: 1, 2: 2, 3: 1, 4: 2}


def test_a_tracklet_in_two_gates_joins_only_the_nearer_prediction() -> None:
    """Tracklets 1 and 2 walk right side by side, 20 px apart in y, and end at frame 10;
    tracklet 3 starts at frame 14 where 2's prediction puts it, also inside 1's gate.  Two
    joins cannot both happen: 3 continues 2, and 1 is continued by nothing."""
    first, second = _walk(1, range(1, 11), 10.0, 3.0, y=50.0), _walk(2, range(1, 11), 10.0, 3.0, y=70.0)
    third = _walk(3, range(14, 20), 10.0 + 3.0 * 13, 3.0, y=70.0)
    rows = first + second + third
    assert link_tracklets(first + third, {}, max_gap=7) != first + third, "3 lies inside 1's gate too"
    renamed = {old.id: new.id for old, new in zip(rows, link_tracklets(rows, {}, max_gap=7), strict=True)}
    assert renamed == {1: 1, 2: 2, 3: 2}


def test_a_tracklet_that_looks_different_is_not_joined_however_well_it_moves() -> None:
    red, blue = np.eye(3, dtype=np.float32)[0], np.eye(3, dtype=np.float32)[1]
    parts = [_tracklet(1, range(1, 11), 0.0, red), _tracklet(2, range(12, 20), 22.0, blue)]
    rows = [r for part, _ in parts for r in part]
    assert link_tracklets(rows, track_looks(t for _, t in parts), max_gap=7) == rows
    assert {r.id for r in link_tracklets(rows, {}, max_gap=7)} == {1}, "on motion alone they would be joined"


def test_a_person_who_turned_while_unseen_is_joined_on_appearance_only() -> None:
    """Walking right at 5 px a frame to x 55 at frame 10, back at frame 15 at x 0 walking
    left: 78 px behind the rightward prediction, outside its gate, and 55 px from the last
    box.  With the same look, AFLink's 75 px window joins them; on motion alone, not."""
    red = np.eye(3, dtype=np.float32)[0]
    rows = _walk(1, range(1, 11), 10.0, 5.0) + _walk(2, range(15, 25), 0.0, -5.0)
    assert {r.id for r in link_tracklets(rows, {}, max_gap=7)} == {1, 2}
    assert {r.id for r in link_tracklets(rows, {1: red, 2: red}, max_gap=7)} == {1}


def test_gsi_length_scale_is_strongsorts_at_its_frame_rate() -> None:
    """Hand computation: tau 10, n boxes at 30 fps: 10 * ln(1000 / n) frames, no less than
    0.1; at 7 fps the n boxes are n * 30 / 7 frames of 30 fps, and the length scale
    comes back in frames of 7 fps."""
    tau = STRONGSORT_TAU
    assert gsi_length_scale(100, tau, longest=None) == pytest.approx(10 * np.log(10.0))
    assert gsi_length_scale(100, tau, fps=30.0, longest=None) == pytest.approx(23.02585)
    expected = 10 * np.log(1000 / (100 * 30 / 7)) * 7 / 30
    assert gsi_length_scale(100, tau, fps=7.0, longest=None) == pytest.approx(expected)
    assert gsi_length_scale(100, tau, fps=7.0, longest=None) == pytest.approx(1.97703, abs=1e-5)
    assert gsi_length_scale(5000, tau, longest=None) == pytest.approx(0.1), "a long track: 1 / tau"
    assert gsi_length_scale(1, tau, longest=None) == pytest.approx(69.07755), "one box: 10 * ln(1000)"
    assert gsi_length_scale(1000, longest=None) == pytest.approx(30 * np.log(27.0)), "the default tau: 30 frames"
    assert gsi_length_scale(1000) == pytest.approx(30.0), "and at most one second: 30 frames at 30 fps"
    assert gsi_length_scale(1000, fps=7.0) == pytest.approx(7.0), "7 frames at 7 fps"
    with pytest.raises(ConfigError, match="tau must be above 0"):
        gsi_length_scale(10, tau=0.0)
    with pytest.raises(ConfigError, match="^fps must be above 0"):
        gsi_length_scale(10, fps=-1.0)


def test_gaussian_smoothing_takes_out_frame_to_frame_jitter_and_keeps_the_path() -> None:
    """60 boxes at 30 fps along x = 100 + 2f, each 2 px off to alternate sides."""
    line = [100.0 + 2.0 * f for f in range(1, 61)]
    jittered = [
        MotRow(f, 1, (x + (2.0 if f % 2 else -2.0), 50.0, 40.0, 100.0), 0.5 + f / 100)
        for f, x in zip(range(1, 61), line, strict=True)
    ]
    others = [MotRow(3, -1, (0.0, 0.0, 9.0, 9.0), 0.4)]
    smoothed = gaussian_smooth(jittered + others, STRONGSORT_TAU, fps=30.0, longest=None)
    assert smoothed[-1] == others[0], "rows of no track come back as they are"
    track = smoothed[:-1]
    assert [(r.frame, r.id, r.score) for r in track] == [(r.frame, r.id, r.score) for r in jittered]
    before = np.sqrt(np.mean(np.square([r.box[0] - x for r, x in zip(jittered, line)])))
    after = np.sqrt(np.mean(np.square([r.box[0] - x for r, x in zip(track, line)])))
    assert before == pytest.approx(2.0) and after < 0.5 * before
    assert all(r.box[1:] == pytest.approx((50.0, 40.0, 100.0), abs=1e-3) for r in track)
    straight = [MotRow(f, 1, (x, 50.0, 40.0, 100.0), 0.9) for f, x in zip(range(1, 61), line)]
    kept = gaussian_smooth(straight, STRONGSORT_TAU, fps=30.0, longest=None)
    assert [r.box[0] for r in kept] == pytest.approx(line, abs=0.05)


def test_gaussian_smoothing_is_the_regression_mean_of_the_whole_kernel() -> None:
    """The banded solution against K (K + 1e-10 I)^-1 y with the full kernel: 40 jittered
    boxes at 30 fps with a 3-frame gap (length scale 10 * ln(1000 / 40) = 32.2 frames)."""
    rng = np.random.default_rng(3)
    frames = np.array([f for f in range(1, 44) if not 20 <= f <= 22], dtype=np.float64)
    boxes = np.stack([100 + 2 * frames, 50 + 0 * frames, 40 + 0 * frames, 100 + 0 * frames], axis=1)
    boxes += rng.normal(0.0, 1.5, boxes.shape)
    rows = [MotRow(int(f), 4, tuple(b), 0.9) for f, b in zip(frames, boxes.tolist(), strict=True)]
    length = 10 * np.log(1000 / 40)
    kernel = np.exp(-0.5 * np.square((frames[:, None] - frames[None, :]) / length))
    expected = kernel @ np.linalg.solve(kernel + 1e-10 * np.eye(len(frames)), boxes)
    smoothed = np.array([r.box for r in gaussian_smooth(rows, STRONGSORT_TAU, fps=30.0, longest=None)])
    assert np.abs(smoothed - expected).max() < 1e-3
    assert np.abs(smoothed - boxes).max() > 0.1, "the boxes did move"


def test_a_long_track_at_a_high_frame_rate_is_smoothed_in_memory_of_its_length() -> None:
    """20,000 boxes at 60 fps (5.6 minutes): a full kernel would be 3.2 GB of floats; the
    band of its length scale (0.2 frame: 1 / tau at 30 fps, in frames of 60) is a few
    diagonals.  Neighbours correlate at exp(-12.5), so the boxes move by under 1e-3 px."""
    rows = [MotRow(f, 1, (100.0 + (2.0 if f % 2 else -2.0), 50.0, 40.0, 100.0), 0.9) for f in range(1, 20001)]
    assert gsi_length_scale(len(rows), STRONGSORT_TAU, fps=60.0, longest=None) == pytest.approx(0.2)
    smoothed = gaussian_smooth(rows, STRONGSORT_TAU, fps=60.0, longest=None)
    assert [r.frame for r in smoothed] == [r.frame for r in rows]
    assert max(abs(a.box[0] - b.box[0]) for a, b in zip(smoothed, rows, strict=True)) < 1e-3


def test_gaussian_smoothing_leaves_a_long_track_and_a_single_box_as_they_are() -> None:
    """A track of 2,000 boxes at 30 fps has the length scale 1 / tau = 0.1 frame: neighbours
    are uncorrelated and the regression gives each box back; so does a one-box track."""
    long = [MotRow(f, 1, (float(f % 7), 0.0, 40.0, 100.0), 0.9) for f in range(1, 2001)]
    assert [r.box for r in gaussian_smooth(long, STRONGSORT_TAU, longest=None)] == [r.box for r in long]
    single = [MotRow(5, 2, (10.0, 20.0, 30.0, 60.0), 0.9)]
    assert gaussian_smooth(single, STRONGSORT_TAU, longest=None)[0].box == pytest.approx(single[0].box)
