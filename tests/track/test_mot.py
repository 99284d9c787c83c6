"""MOTChallenge files: reading and writing round trip, malformed lines, interpolation, tracking a detection file."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.errors import DataError
from reid.track import TrackerConfig
from reid.track.mot import MotRow, interpolate, read_mot, track_detection_file, write_mot


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
