"""``reid track``: a detection file tracked alone; a malformed one is one line naming the file and line."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from reid.cli.app import app
from reid.track.mot import read_mot


def test_track_writes_mot_tracks_and_refuses_a_malformed_file(tmp_path: Path) -> None:
    detections, out = tmp_path / "det.txt", tmp_path / "tracks.txt"
    detections.write_text("".join(f"{f},-1,{10 + 4 * f},50,40,100,0.9,-1,-1,-1\n" for f in range(1, 9)))
    runner = CliRunner()
    result = runner.invoke(app, ["track", "--detections", str(detections), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = read_mot(out)
    assert [r.frame for r in rows] == list(range(1, 9)) and {r.id for r in rows} == {1}

    detections.write_text("1,-1,10,50,40,100,0.9\n2,-1,x,50,40,100,0.9\n")
    out.unlink()
    result = runner.invoke(app, ["track", "--detections", str(detections), "--out", str(out)])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "line 2" in lines[0] and "det.txt" in lines[0] and "Traceback" not in result.output
    assert not out.exists()


def test_track_video_without_model_is_one_line_and_link_without_video_joins_by_motion(tmp_path: Path) -> None:
    detections, out = tmp_path / "det.txt", tmp_path / "tracks.txt"
    detections.write_text("1,-1,10,50,40,100,0.9\n")
    result = CliRunner().invoke(
        app, ["track", "--detections", str(detections), "--out", str(out), "--video", str(tmp_path / "v.avi")]
    )
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "--model" in lines[0] and not out.exists()
    result = CliRunner().invoke(app, ["track", "--detections", str(detections), "--out", str(out), "--link"])
    assert result.exit_code == 0, result.output
    assert out.exists()


def test_a_file_that_gives_no_track_says_why(tmp_path: Path) -> None:
    out = tmp_path / "tracks.txt"
    runner = CliRunner()
    for text, note in (
        ("", "holds no detections"),
        # Two boxes 49 frames apart: each track ends after one box, under the three a track needs.
        ("1,-1,10,10,20,40,0.9,-1,-1,-1\n50,-1,10,10,20,40,0.9,-1,-1,-1\n", "no track reached the 3 boxes"),
    ):
        detections = tmp_path / "det.txt"
        detections.write_text(text)
        result = runner.invoke(app, ["track", "--detections", str(detections), "--out", str(out)])
        assert result.exit_code == 0 and note in result.output, result.output
        assert read_mot(out) == []
    # One box a frame at a given rate: a track, and no note.
    detections.write_text("".join(f"{f},-1,{10 + 4 * f},50,40,100,0.9,-1,-1,-1\n" for f in range(1, 9)))
    result = runner.invoke(app, ["track", "--detections", str(detections), "--out", str(out), "--fps", "25"])
    assert "note:" not in result.output and {r.id for r in read_mot(out)} == {1}, result.output


def test_track_says_which_frame_rate_it_assumed_and_where_from(tmp_path: Path) -> None:
    """Given (--fps), a MOTChallenge seqinfo.ini above det/det.txt, or the default with a note."""
    (tmp_path / "det").mkdir()
    detections, out = tmp_path / "det" / "det.txt", tmp_path / "tracks.txt"
    detections.write_text("".join(f"{f},-1,{10 + 4 * f},50,40,100,0.9,-1,-1,-1\n" for f in range(1, 9)))
    runner = CliRunner()

    def rate(*extra: str) -> str:
        result = runner.invoke(app, ["track", "-d", str(detections), "-o", str(out), *extra], terminal_width=200)
        assert result.exit_code == 0, result.output
        return " ".join(result.output.split())

    default = rate()
    assert "frame rate 30 fps (default)" in default and "frame rate is unknown" in default
    (tmp_path / "seqinfo.ini").write_text("[Sequence]\nname=S\nframeRate=14\n")
    assert "14 fps (seqinfo.ini: " in rate() and "unknown" not in rate()
    assert "frame rate 7 fps (given)" in rate("--fps", "7")
