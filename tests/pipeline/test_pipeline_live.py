"""The threaded frame loop: same answers as the sequential one for files, frames dropped
and counted for a live source that outruns the detector, a clean stop on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from pipeline_helpers import build_encoder, street_with_gallery, walker_crops

from reid.detect import Detection, build_detector
from reid.errors import DataError
from reid.gallery import Gallery
from reid.models import Encoder
from reid.pipeline import FramePipeline, QueryConfig, QueryRun, enrol, open_source, plan_enrolment
from reid.pipeline.synthetic import write_street_video

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def street(tmp_path: Path, encoder: Encoder) -> tuple[Path, Path]:
    """A synthetic street video and a gallery holding crops of its two walkers."""
    return street_with_gallery(tmp_path, encoder, "street.avi", count=12, fps=8)


def answers(run: QueryRun) -> list[tuple]:
    """Everything a run said, frame by frame, in a comparable form."""
    said = []
    for result in run:
        for d in result.detections:
            top = [(m.identity, round(m.distance, 5)) for m in d.top_k]
            said.append((result.frame, d.box, d.identity, round(d.distance, 5), d.track, top))
        said += [("ended", result.frame, s.track, s.identity) for s in result.ended_tracks]
    return said + [("finished", s.track, s.frames, s.identity) for s in run.finish_tracks()]


def test_threaded_run_answers_a_file_exactly_as_the_sequential_one(
    encoder: Encoder, street: tuple[Path, Path]
) -> None:
    video, folder = street
    with Gallery.open(folder) as gallery:
        runs = {
            threaded: QueryRun(gallery, encoder, open_source(video), QueryConfig(threshold=1.0, threaded=threaded))
            for threaded in (False, True)
        }
        said = {threaded: answers(run) for threaded, run in runs.items()}
    assert said[True] == said[False]
    assert len([s for s in said[True] if isinstance(s[0], int)]) >= 12, "walkers were found in the frames"
    assert runs[True].stats.frames == runs[False].stats.frames == 12
    assert runs[True].stats.dropped == 0


class SlowDetector:
    """The real HOG people detector, held back as a detector on a weak machine would be."""

    kind = "person"

    def __init__(self, pause: float) -> None:
        self.inner, self.pause = build_detector(None, "person"), pause
        self.confident_score = self.inner.confident_score

    def detect(self, image: np.ndarray) -> list[Detection]:
        time.sleep(self.pause)
        return self.inner.detect(image)


def test_a_live_source_drops_and_counts_what_the_detector_cannot_keep_up_with(
    encoder: Encoder, street: tuple[Path, Path]
) -> None:
    video, folder = street
    detector = SlowDetector(0.2)
    with Gallery.open(folder) as gallery:
        # A file:// URL is read as a stream: a live source whose frames do not wait.
        live = QueryRun(gallery, encoder, open_source(f"file://{video.resolve()}"), QueryConfig(), detector=detector)
        live_frames = [r.frame for r in live]
        file = QueryRun(gallery, encoder, open_source(video), QueryConfig(), detector=detector)
        file_frames = [r.frame for r in file]
    assert live.stats.dropped > 0
    assert live.stats.frames + live.stats.dropped == 12, "every decoded frame is answered or counted"
    assert live_frames == sorted(live_frames) and len(live_frames) == live.stats.frames
    assert live.stats.to_dict()["dropped"] == live.stats.dropped
    assert file.stats.dropped == 0 and file_frames == list(range(12)), "a file never drops a frame"


def test_a_decoding_failure_reaches_the_caller(tmp_path: Path) -> None:
    empty = tmp_path / "empty.avi"
    cv2.VideoWriter(str(empty), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48)).release()
    pipeline = FramePipeline(open_source(empty), None)
    with pytest.raises(DataError, match=r"empty\.avi: the video yielded no decodable frame"):
        list(pipeline)


def test_leaving_early_stops_the_threads(street: tuple[Path, Path]) -> None:
    video, _ = street
    pipeline = FramePipeline(open_source(video), build_detector(None, "person"), depth=1)
    for item in pipeline:
        assert item.frame.index == 0 and pipeline.running
        break
    pipeline.close()
    assert not pipeline.running


def test_ctrl_c_stops_the_query_and_keeps_what_was_written(tmp_path: Path) -> None:
    model = tmp_path / "model"
    encoder = build_encoder(model)
    walker_crops(tmp_path / "people", frames=2, seed=11)
    folder = tmp_path / "g"
    with Gallery.open_or_create(folder, encoder.card) as gallery:
        enrol(gallery, encoder, plan_enrolment([tmp_path / "people"]))
    video = tmp_path / "long.avi"
    write_street_video(video, count=400, fps=10)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [
        sys.executable, "-m", "reid", "query", str(video), "-m", str(model), "-g", str(folder),
        "--threshold", "1.0", "--jsonl", str(out / "ev.jsonl"), "--tracks", str(out / "tracks.jsonl"),
        "--save-video", str(out / "ann.avi"), "--json", str(out / "summary.json"),
    ]  # fmt: skip
    child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        events = out / "ev.jsonl"
        while time.monotonic() < deadline and child.poll() is None:
            if events.is_file() and events.stat().st_size > 0:
                # Held still at once, so that however busy the machine (and however long
                # this process waits for its turn) the query cannot run on to its end
                # before the interrupt reaches it; the interrupt then lands on resuming.
                child.send_signal(signal.SIGSTOP)
                break
            time.sleep(0.01)
        assert child.poll() is None, "the query ended before it could be interrupted: " + child.stderr.read()
        child.send_signal(signal.SIGINT)
        child.send_signal(signal.SIGCONT)
        stdout, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    detections = [json.loads(line) for line in events.read_text().splitlines()]
    assert detections and all(len(d["box"]) == 4 for d in detections)
    summary = json.loads((out / "summary.json").read_text())
    assert 0 < summary["frames"] < 400 and len(detections) <= summary["detections"]
    tracks = [json.loads(line) for line in (out / "tracks.jsonl").read_text().splitlines()]
    assert all(t["end_frame"] < summary["frames"] for t in tracks)
    capture = cv2.VideoCapture(str(out / "ann.avi"))
    played = 0
    while capture.read()[0]:
        played += 1
    capture.release()
    # The signal may land between two outputs of the last frame.
    assert summary["frames"] - 1 <= played <= summary["frames"], "the annotated video plays the answered frames"
