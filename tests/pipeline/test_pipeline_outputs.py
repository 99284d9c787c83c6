"""Query outputs: crop folders named safely after any label, outputs checked before work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from pipeline_helpers import build_encoder, street_with_gallery
from typer.testing import CliRunner

from reid.cli.app import app
from reid.draw import UNKNOWN_FILL, Style, Trails, colour_of, draw_labels, make_label, place_labels
from reid.errors import ConfigError
from reid.pipeline import (
    CropWriter,
    DetectionResult,
    FrameResult,
    QueryOutputs,
    VideoWriter,
    annotate,
    check_outputs,
    safe_name,
)
from reid.pipeline.outputs import CROP_MAP_FILE, MAX_NAME, UNKNOWN_FOLDER

ROOT = Path(__file__).resolve().parents[2]

HOSTILE = [
    ".",
    "..",
    "...",
    "../escape",
    "a/b",
    "/etc",
    "x" * 300,
    "y" * 10_000,
    "-rf",
    ".hidden",
    "José Núñez",
    "名前",
    "unknown",
    CROP_MAP_FILE,
    "bob-0123456789ab",
    "tab\there",
    "",
]


def test_safe_names_are_plain_bounded_and_unique() -> None:
    names = [safe_name(label, frozenset({UNKNOWN_FOLDER, CROP_MAP_FILE})) for label in HOSTILE + ["alice", "a_b"]]
    assert len(set(names)) == len(names), "different labels share a folder"
    for name in names:
        assert name not in (".", "..", "", UNKNOWN_FOLDER, CROP_MAP_FILE)
        assert "/" not in name and "\\" not in name and not name.startswith((".", "-"))
        assert len(name.encode()) <= MAX_NAME + 13
    assert names[-2:] == ["alice", "a_b"], "plain labels keep their own name"
    assert safe_name("x" * 300) != safe_name("x" * 301)


def frame(labels: list[str | None], number: int = 0) -> FrameResult:
    crop = np.full((8, 4, 3), 128, np.uint8)
    detections = [DetectionResult((0, 0, 4, 8), label, 0.1, [], None, crop) for label in labels]
    return FrameResult(source="cam/street.mp4", frame=number, time=None, image=crop, detections=detections)


def test_crops_of_any_label_stay_inside_the_folder_and_are_mapped(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "crops"
    writer = CropWriter(out)
    labels: list[str | None] = [label for label in HOSTILE if label] + [None]
    for number in range(22):
        writer.write(frame(labels, number))
    assert writer.saved == 22 * len(labels)
    written = sorted(out.rglob("*.jpg"))
    assert len(written) == writer.saved
    assert all(path.resolve().parent.parent == out.resolve() for path in written)
    assert sorted(p.name for p in tmp_path.rglob("*.jpg") if out not in p.parents) == []
    mapping = json.loads((out / CROP_MAP_FILE).read_text())["folders"]
    assert sorted(mapping.values(), key=str) == sorted(labels, key=str)
    for folder, label in mapping.items():
        assert len(list((out / folder).glob("*.jpg"))) == 22, label
    assert mapping[UNKNOWN_FOLDER] is None
    assert mapping[safe_name("unknown", frozenset({UNKNOWN_FOLDER, CROP_MAP_FILE}))] == "unknown"


def test_outputs_that_cannot_be_written_are_refused_before_work(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match=r"folder: --jsonl needs a file name; this is a folder"):
        check_outputs(jsonl=folder)
    with pytest.raises(ConfigError, match=r"file.txt: --save-crops needs a folder here; this is a file"):
        check_outputs(crops=a_file)
    with pytest.raises(ConfigError, match=r"file.txt: --jsonl needs a folder here; this is a file"):
        check_outputs(jsonl=a_file / "events.jsonl")
    with pytest.raises(ConfigError, match=r"out.gif: video output must end in"):
        check_outputs(video=tmp_path / "out.gif")
    with pytest.raises(ConfigError, match="this is a file"):
        QueryOutputs(jsonl=tmp_path / "ok.jsonl", crops=a_file)
    assert not (tmp_path / "ok.jsonl").exists()
    check_outputs(jsonl=tmp_path / "new" / "deeper" / "e.jsonl", crops=tmp_path / "crops", video=tmp_path / "v.mp4")
    assert not (tmp_path / "new").exists(), "checking makes nothing"


def test_drawn_boxes_and_the_video_writer_fit_every_frame(tmp_path: Path) -> None:
    canvas = np.zeros((120, 160, 3), np.uint8)
    draw_labels(canvas, [make_label((40, 50, 30, 40), 1, "ann", 0.2)])
    assert tuple(canvas[90, 55]) == colour_of(1, "ann") and tuple(canvas[70, 55]) == (0, 0, 0)
    writer = VideoWriter(tmp_path / "v.avi", fps=5)
    writer.write(canvas)
    writer.write(np.full((60, 60, 3), 255, np.uint8))
    writer.close()
    capture = cv2.VideoCapture(str(tmp_path / "v.avi"))
    shapes = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        shapes.append(frame.shape)
    capture.release()
    assert writer.frames == 2 and shapes == [(120, 160, 3)] * 2
    with pytest.raises(ConfigError, match="must end in"):
        VideoWriter(tmp_path / "v.gif", fps=5)


def test_mot_output_counts_frames_from_one_and_drops_short_tracks(tmp_path: Path) -> None:
    from reid.track.mot import read_mot

    results = []
    for number in range(3):
        result = frame(["alice", None], number)
        result.detections[0].track = 1
        result.detections[1].track = 2 if number == 0 else None
        results.append(result)
    path = tmp_path / "run" / "tracks.txt"
    with QueryOutputs(mot=path, min_boxes=2) as outputs:
        for result in results:
            outputs.write(result)
        assert not path.exists(), "the MOT file is written whole at the end"
    rows = read_mot(path)
    assert [(r.frame, r.id) for r in rows] == [(1, 1), (2, -1), (2, 1), (3, -1), (3, 1)]
    assert rows[0].box == tuple(float(v) for v in results[0].detections[0].box)


def test_mot_output_joins_tracklets_that_continue_one_another_then_fills_the_gap(tmp_path: Path) -> None:
    """Track 1 (frames 1-4) and track 2 (frames 7-9, a step further along) look alike: one
    track, and its gap, frames 5-6, interpolated; track 3 looks different: its own."""
    from reid.pipeline import TrackSummary
    from reid.track.mot import read_mot

    red, blue = np.eye(4, dtype=np.float32)[0], np.eye(4, dtype=np.float32)[1]
    crop = np.full((8, 4, 3), 128, np.uint8)

    def summary(track: int, first: int, last: int, look: np.ndarray) -> TrackSummary:
        box = (10 * last, 20, 40, 100)
        return TrackSummary("street.mp4", track, first, last, None, None, "ann", 0.1, last - first + 1, box, look)

    spans = {1: (0, 3, red), 2: (6, 8, red), 3: (6, 8, blue)}
    results = []
    for number in range(9):
        result = FrameResult("street.mp4", number, None, crop)
        for track, (first, last, _) in spans.items():
            if first <= number <= last:
                x = 10 * number + (300 if track == 3 else 0)
                result.detections.append(DetectionResult((x, 20, 40, 100), "ann", 0.1, [], 0.9, crop, track))
        if number == 5:
            result.ended_tracks = [summary(1, 0, 3, red)]
        results.append(result)
    for joined in (True, False):
        path = tmp_path / f"tracks-{joined}.txt"
        with QueryOutputs(mot=path, max_gap=3 if joined else 1) as outputs:
            for result in results:
                outputs.write(result)
            outputs.write_tracks([summary(2, 6, 8, red), summary(3, 6, 8, blue)])
        rows = read_mot(path)
        if joined:
            assert sorted(r.frame for r in rows if r.id == 1) == list(range(1, 10)), "joined, then filled"
            assert [r.box[0] for r in sorted(rows, key=lambda r: r.frame) if r.id == 1][4:6] == [40.0, 50.0]
            assert sorted(r.frame for r in rows if r.id == 3) == [7, 8, 9] and 2 not in {r.id for r in rows}
        else:
            assert {r.id for r in rows} == {1, 2, 3}, "a gap beyond max_gap is never joined"


def test_mot_counts_decoded_frames_when_a_source_is_read_one_frame_in_n(tmp_path: Path) -> None:
    """With every 2 a track seen in kept frames 0, 1, 2, 4, 5 (one kept frame missed, as far
    as the tracker bridges) is in decoded frames 0, 2, 4, 8, 10: the MOT file fills them all,
    the skipped frames too, as the kept frames' gap is within what the tracker bridged."""
    from reid.track.mot import read_mot

    crop = np.full((8, 4, 3), 128, np.uint8)
    for step, frames in ((2, set(range(1, 12))), (1, {1, 2, 3, 4, 5, 9, 10, 11})):
        path = tmp_path / f"every-{step}.txt"
        with QueryOutputs(mot=path, max_gap=1, frame_step=step) as outputs:
            for decoded in (0, 2, 4, 8, 10):
                result = FrameResult("street.mp4", decoded, None, crop)
                result.detections.append(DetectionResult((5 * decoded, 20, 40, 100), "ann", 0.1, [], 0.9, crop, 1))
                outputs.write(result)
        # Unaware of the step, a 1-frame bridge leaves the decoded gap 4..8 open.
        assert {r.frame for r in read_mot(path) if r.id == 1} == frames, step


def test_crops_are_not_written_through_links_planted_in_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "crops"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.mkdir()
    (out / "ann").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="ann: a link or a file is here"):
        CropWriter(out).write(frame(["ann"]))
    assert list(elsewhere.iterdir()) == []
    victim = tmp_path / "victim.jpg"
    victim.write_bytes(b"the user's photo")
    (out / "bob").mkdir()
    (out / "bob" / "street_f000000_0.jpg").symlink_to(victim)
    writer = CropWriter(out)
    writer.write(frame(["bob"]))
    assert victim.read_bytes() == b"the user's photo"
    crop = out / "bob" / "street_f000000_0.jpg"
    assert not crop.is_symlink() and cv2.imread(str(crop)) is not None


def test_event_and_track_files_are_not_written_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    for name in ("events.jsonl", "tracks.jsonl"):
        (tmp_path / name).symlink_to(victim)
    with QueryOutputs(jsonl=tmp_path / "events.jsonl", tracks=tmp_path / "tracks.jsonl") as outputs:
        outputs.write(frame(["ann", None]))
    assert victim.read_text() == "keep"
    events = (tmp_path / "events.jsonl").read_text().splitlines()
    assert len(events) == 2 and not (tmp_path / "events.jsonl").is_symlink()


def test_video_and_mot_files_are_not_written_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    for name in ("run.mp4", "run.avi", "tracks.txt"):
        (tmp_path / name).symlink_to(victim)
    # A link planted at the hidden name frames go to first is not followed either.
    (tmp_path / VideoWriter(tmp_path / "run.avi", fps=5)._partial.name).symlink_to(victim)
    for name in ("run.mp4", "run.avi"):
        writer = VideoWriter(tmp_path / name, fps=5)
        writer.write(np.zeros((48, 64, 3), np.uint8))
        writer.close()
        path = tmp_path / name
        assert not path.is_symlink() and cv2.VideoCapture(str(path)).read()[0]
    result = frame(["ann"])
    result.detections[0].track = 1
    with QueryOutputs(mot=tmp_path / "tracks.txt") as outputs:
        outputs.write(result)
    assert victim.read_text() == "keep" and not (tmp_path / "tracks.txt").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.avi", "run.mp4", "tracks.txt", "victim.txt"]


FULL_DISK = """
import resource, signal, sys
sys.path.insert(0, sys.argv[2])
from test_pipeline_outputs import frame
from reid.errors import DataError
from reid.pipeline import QueryOutputs
# Writes past the limit fail with EFBIG, as on a full disk, instead of killing the process.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (5000, 5000))
try:
    with QueryOutputs(jsonl=sys.argv[1]) as outputs:
        for number in range(10_000):
            outputs.write(frame(["ann", None, "bob"], number))
except DataError as exc:
    print(exc)
"""


def test_a_full_disk_leaves_whole_lines_and_says_so_in_one_line(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(events), str(Path(__file__).parent)],
        capture_output=True, text=True, env=env, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = events.read_text().splitlines(keepends=True)
    assert 0 < len(lines) and all(line.endswith("\n") and json.loads(line) for line in lines)
    assert done.stdout == f"{events}: cannot write (File too large); it holds the first {len(lines)} lines, each whole\n"


def test_the_hidden_file_of_a_killed_video_write_is_removed_by_the_next(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    stale = tmp_path / f".annot.tmp-{dead.stdout.strip()}.mp4"
    stale.write_bytes(b"half a video")
    ours = tmp_path / f".annot.tmp-{os.getpid()}.avi"
    ours.write_bytes(b"a live process's")
    writer = VideoWriter(tmp_path / "annot.mp4", fps=5)
    writer.write(np.zeros((48, 64, 3), np.uint8))
    writer.close()
    assert not stale.exists() and ours.exists() and (tmp_path / "annot.mp4").is_file()


@pytest.mark.parametrize("scene", ["street", "vtest"])
def test_saved_video_labels_lie_inside_each_frame_and_apart(scene: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """``reid query --save-video`` on a few frames: each frame's labels, laid out again from
    the JSON lines, lie inside the frame and apart, and the video shows each label's fill
    there.  The frames are written as PNGs ($REID_DRAW_PICTURES, else the test's folder)."""
    video = request.getfixturevalue("pedestrian_video") if scene == "vtest" else None
    model = tmp_path / "model"
    street, gallery = street_with_gallery(tmp_path, build_encoder(model), "street.avi", count=10, fps=8)
    source = video or street
    events, saved = tmp_path / "events.jsonl", tmp_path / "annotated.avi"
    args = ["query", "--model", str(model), "--gallery", str(gallery), str(source), "--every", "1", "--max-frames", "6"]
    result = CliRunner().invoke(app, [*args, "--jsonl", str(events), "--save-video", str(saved)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert lines, "somebody is found"
    capture = cv2.VideoCapture(str(saved))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    height, width = frames[0].shape[:2]
    style = Style.for_frame(height)
    folder = Path(os.environ.get("REID_DRAW_PICTURES") or tmp_path) / f"query_{scene}"
    folder.mkdir(parents=True, exist_ok=True)
    checked = 0
    for n, frame in enumerate(frames):
        cv2.imwrite(str(folder / f"frame_{n}.png"), frame)
        labels = [make_label(e["box"], e["track"], e["identity"], e["distance"]) for e in lines if e["frame"] == n]
        placed = place_labels(labels, (height, width), style)
        rects = [p.rect for p in placed if p is not None]
        assert all(x >= 0 and y >= 0 and x + w <= width and y + h <= height for x, y, w, h in rects)
        assert not any(
            a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]
            for i, a in enumerate(rects)
            for b in rects[i + 1 :]
        )
        for label, where in zip(labels, placed):
            if where is None:
                continue
            x, y, w, h = where.rect
            # The label's left margin (no letters there), through the video's compression.
            margin = frame[y + 2 : y + h - 2, x + 1 : x + max(2, style.pad)].reshape(-1, 3).astype(int)
            fill = label.colour if label.named else UNKNOWN_FILL
            assert np.abs(np.median(margin, axis=0) - fill).max() < 48, (n, where, fill)
            checked += 1
    assert checked >= len(frames)


def test_annotate_draws_trails_behind_tracked_boxes_only_when_asked() -> None:
    image = np.zeros((240, 320, 3), np.uint8)
    crop = np.full((8, 4, 3), 128, np.uint8)
    trails = Trails(5)
    for number in range(4):
        result = FrameResult("street.mp4", number, None, image)
        result.detections.append(DetectionResult((20 + 30 * number, 120, 20, 60), "ann", 0.1, [], 0.9, crop, 4))
        plain, trailed = annotate(result), annotate(result, trails)
    # The last box's centre is (120, 150); the trail runs from the first's (30, 150) to it.
    assert trailed[150, 60:100].any() and not plain[150, 60:100].any()
    assert np.abs(trailed[150, 75].astype(int) - colour_of(4, "ann")).max() < 64
