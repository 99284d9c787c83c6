"""MOTChallenge files: reading and writing round trip, malformed lines, interpolation, tracklet
joining, tracking a detection file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reid.errors import DataError
from reid.track import Track, TrackerConfig
from reid.track.mot import (
    MotRow, interpolate, link_tracklets, read_mot, track_detection_file, track_looks, write_mot,
)  # fmt: skip


def test_rows_round_trip_sorted_by_frame_then_id(tmp_path: Path) -> None:
    rows = [
        MotRow(2, 1, (10.5, 20.0, 30.25, 60.0), 0.9),
        MotRow(1, 2, (100.0, 20.0, 30.0, 60.0), 1.0),
        MotRow(1, 1, (12.0, 20.0, 30.0, 60.0), 0.75),
    ]
    path = tmp_path / "t.txt"
    assert write_mot(path, rows) == 3
    assert path.read_text().splitlines()[0] == "1,1,12,20,30,60,0.75,-1,-1,-1"
    assert read_mot(path) == sorted(rows, key=lambda r: (r.frame, r.id))


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


def test_tracks_without_embeddings_are_never_joined() -> None:
    rows = [MotRow(f, 1, (0.0, 0.0, 40.0, 100.0), 0.9) for f in range(1, 4)]
    rows += [MotRow(f, 2, (2.0, 0.0, 40.0, 100.0), 0.9) for f in range(5, 8)]
    assert link_tracklets(rows, track_looks([Track(0, 1), Track(0, 2)]), max_gap=5) == rows
