"""``reid track``: a detection file tracked alone; a malformed one is one line naming the file and
line; tracks scored against ground truth (``--gt``), a tracker's file scored as it is (``--mot``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reid.cli.app import app
from reid.track.mot import MotRow, read_mot, write_mot


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


def test_track_takes_every_tracker_option_and_refuses_an_appearance_gate_without_embeddings(tmp_path: Path) -> None:
    detections, out = tmp_path / "det.txt", tmp_path / "tracks.txt"
    # Two people side by side for eight frames, the second for only two.
    rows = [f"{f},-1,{10 + 4 * f},50,40,100,0.9,-1,-1,-1\n" for f in range(1, 9)]
    rows += [f"{f},-1,{200 + 4 * f},50,40,100,0.9,-1,-1,-1\n" for f in range(1, 3)]
    detections.write_text("".join(rows))
    runner = CliRunner()
    result = runner.invoke(app, ["track", "-d", str(detections), "-o", str(out), "--min-boxes", "2", "--iou", "0.5"])
    assert result.exit_code == 0, result.output
    assert len({r.id for r in read_mot(out)}) == 2, "a track of two boxes is kept at --min-boxes 2"
    out.unlink()
    result = runner.invoke(app, ["track", "-d", str(detections), "-o", str(out), "--appearance", "0.5"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "--video and --model" in lines[0], result.output
    assert not out.exists()


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


def figure(output: str, name: str) -> float:
    """The value printed beside the metric ``name`` (a percentage or a count)."""
    found = re.search(rf"(?m)^\W*{re.escape(name)}\W+?(-?\d+(?:\.\d+)?)%?\s*\W*$", output)
    assert found is not None, f"no {name} line in:\n{output}"
    return float(found.group(1))


def walker(frames: range, track: int, flag: float) -> list[MotRow]:
    return [MotRow(f, track, (10.0 + 4 * f, 50.0, 40.0, 100.0), flag) for f in frames]


def test_track_scores_its_tracks_against_ground_truth(tmp_path: Path) -> None:
    detections, out, gt = tmp_path / "det.txt", tmp_path / "tracks.txt", tmp_path / "gt.txt"
    write_mot(detections, walker(range(1, 9), -1, 0.9))
    # A second person the tracker never sees, ignored by the truth's flag 0.
    write_mot(gt, walker(range(1, 9), 1, 1.0) + [MotRow(f, 2, (400.0, 50.0, 40.0, 100.0), 0.0) for f in range(1, 9)])
    result = CliRunner().invoke(app, ["track", "-d", str(detections), "-o", str(out), "--fps", "25", "--gt", str(gt)])
    assert result.exit_code == 0, result.output
    for name in ("HOTA", "MOTA", "IDF1", "Prcn", "Rcll"):
        assert figure(result.output, name) == 100.0, name
    # Every percentage with two decimals.
    assert re.search(r"\bMOTA\W+100\.00%", result.output), result.output
    counts = [figure(result.output, name) for name in ("IDSW", "GT_IDs", "GT_Dets")]
    assert counts == [0, 1, 8], result.output


def test_track_scores_a_file_of_tracks_as_it_is(tmp_path: Path) -> None:
    tracks, gt = tmp_path / "query.txt", tmp_path / "gt.txt"
    write_mot(gt, walker(range(1, 11), 1, 1.0))
    # The tracker's file of a run stopped after 5 frames: its id changes at frame 4.
    write_mot(tracks, walker(range(1, 4), 7, 0.8) + walker(range(4, 6), 9, 0.8))
    runner = CliRunner()
    whole = runner.invoke(app, ["track", "--mot", str(tracks), "--gt", str(gt)])
    assert whole.exit_code == 0, whole.output
    assert figure(whole.output, "Rcll") == 50.0 and figure(whole.output, "IDSW") == 1
    assert "the tracks end at frame 5, the ground truth at 10" in " ".join(whole.output.split())
    first = runner.invoke(app, ["track", "--mot", str(tracks), "--gt", str(gt), "--max-frames", "5"])
    assert first.exit_code == 0, first.output
    assert figure(first.output, "Rcll") == 100.0 and figure(first.output, "MOTA") == 80.0
    assert figure(first.output, "IDF1") == 60.0 and figure(first.output, "GT_Dets") == 5
    assert "note:" not in first.output
    assert tracks.read_text() == "".join(r.line() + "\n" for r in read_mot(tracks)), "scoring leaves the file as it is"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--mot", "{tracks}"], "give its ground truth with --gt"),
        (["--mot", "{tracks}", "--gt", "{gt}", "--detections", "{tracks}"], "--detections is for tracking"),
        (["--mot", "{tracks}", "--gt", "{gt}", "--track-high-score", "0.5"], "a tracker option is for tracking"),
        (["--gt", "{gt}"], "tracking needs --detections FILE and --out FILE"),
        (["-d", "{tracks}", "-o", "{out}", "--max-frames", "5"], "--max-frames limits the scoring frames"),
        (["--mot", "{tracks}", "--gt", "{gt}", "--max-frames", "0"], "--max-frames"),
        (["--mot", "{tracks}", "--gt", "{missing}"], "missing.txt"),
        (["-d", "{tracks}", "-o", "{out}", "--gt", "{missing}"], "missing.txt: --gt: no such file"),
    ],
)
def test_scoring_refusals_are_one_line(tmp_path: Path, arguments: list[str], message: str) -> None:
    paths = {"tracks": tmp_path / "t.txt", "gt": tmp_path / "gt.txt", "out": tmp_path / "o.txt",
             "missing": tmp_path / "missing.txt"}  # fmt: skip
    write_mot(paths["tracks"], walker(range(1, 4), 1, 1.0))
    write_mot(paths["gt"], walker(range(1, 4), 1, 1.0))
    result = CliRunner().invoke(app, ["track", *(a.format(**paths) for a in arguments)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and message in lines[0], result.output
    assert not paths["out"].exists()
