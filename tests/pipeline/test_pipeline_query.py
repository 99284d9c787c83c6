"""Query runs end to end: real video decoding, HOG detection, a real encoder and gallery."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from pipeline_helpers import build_encoder, street_with_gallery, walker_crops

from reid.detect import build_detector
from reid.errors import ConfigError, GalleryError
from reid.gallery import Gallery
from reid.models import Encoder
from reid.pipeline import QueryConfig, QueryOutputs, QueryRun, enrol, open_source, plan_enrolment
from reid.pipeline.synthetic import write_street_video


@pytest.fixture
def street(tmp_path: Path, encoder: Encoder) -> tuple[Path, Path]:
    """A synthetic street video and a gallery holding crops of its two walkers."""
    return street_with_gallery(tmp_path, encoder, "street.mp4", count=8, fps=8)


def test_video_query_detects_labels_and_writes_outputs(
    tmp_path: Path, encoder: Encoder, street: tuple[Path, Path]
) -> None:
    video, folder = street
    out = tmp_path / "out"
    with Gallery.open(folder) as gallery:
        run = QueryRun(gallery, encoder, open_source(video, every=2), QueryConfig(top_k=2, threshold=2.0))
        with QueryOutputs(out / "ev.jsonl", out / "ann.mp4", out / "crops", fps=4) as outputs:
            results = []
            for result in run:
                outputs.write(result)
                results.append(result)
    assert [r.frame for r in results] == [0, 2, 4, 6]
    assert run.stats.frames == 4 and run.stats.detections == sum(len(r.detections) for r in results) >= 6
    # With a threshold of 2 (the largest distance there is) every detection gets a name.
    assert run.stats.unknown == 0 and set(run.stats.per_identity) <= {"red", "blue"}
    assert set(run.stats.stage_seconds) == {"decode", "detect", "embed", "track", "search"}
    events = [json.loads(line) for line in (out / "ev.jsonl").read_text().splitlines()]
    assert len(events) == run.stats.detections
    first = events[0]
    assert {"source", "frame", "box", "identity", "distance", "top_k"} <= set(first)
    assert first["source"] == str(video) and len(first["box"]) == 4 and len(first["top_k"]) == 2
    # One identity per frame: a detection is named one of its top k (the nearest unless a
    # nearer detection of its frame took that one), at that identity's distance.
    named = {t["identity"]: t["distance"] for t in first["top_k"]}
    assert first["identity"] in named and first["distance"] == named[first["identity"]]
    capture = cv2.VideoCapture(str(out / "ann.mp4"))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 4
    ok, frame = capture.read()
    capture.release()
    assert ok and frame.shape == (360, 480, 3)
    saved = list((out / "crops").rglob("*.jpg"))
    assert len(saved) == run.stats.detections and {p.parent.name for p in saved} <= {"red", "blue"}


def test_threshold_separates_known_from_unknown(encoder: Encoder, street: tuple[Path, Path]) -> None:
    video, folder = street
    with Gallery.open(folder) as gallery:
        run = QueryRun(gallery, encoder, open_source(video, max_frames=2), QueryConfig(threshold=1e-6))
        results = list(run)
    assert run.stats.detections > 0 and run.stats.identified == 0
    assert all(d.identity is None and d.label == "unknown" and d.top_k for r in results for d in r.detections)
    assert all(event["identity"] is None for r in results for event in r.events())


def test_images_are_taken_as_crops(tmp_path: Path, encoder: Encoder, street: tuple[Path, Path]) -> None:
    _, folder = street
    crops = walker_crops(tmp_path / "probe", frames=1, seed=11)
    with Gallery.open(folder) as gallery:
        run = QueryRun(gallery, encoder, open_source(tmp_path / "probe"), QueryConfig(top_k=5))
        results = list(run)
    assert run.detector is None and len(results) == 2
    for result in results:
        (detection,) = result.detections
        height, width = result.image.shape[:2]
        assert detection.box == (0, 0, width, height)
        # These exact crops were enrolled (same seed and frame): found at distance ~0.
        assert detection.identity == Path(result.source).parent.name and detection.distance < 1e-3
        assert len(detection.top_k) == 2
    assert str(crops["red"][0]) in {r.source for r in results}


def test_stopping_midway_keeps_complete_outputs(tmp_path: Path, encoder: Encoder, street: tuple[Path, Path]) -> None:
    video, folder = street
    out = tmp_path / "out"
    with Gallery.open(folder) as gallery:
        run = QueryRun(gallery, encoder, open_source(video), QueryConfig(threshold=1.0, batch_size=1))
        with pytest.raises(KeyboardInterrupt), QueryOutputs(out / "ev.jsonl", out / "ann.avi") as outputs:
            for result in run:
                outputs.write(result)
                if result.frame == 2:
                    raise KeyboardInterrupt
    frames = {json.loads(line)["frame"] for line in (out / "ev.jsonl").read_text().splitlines()}
    assert frames <= {0, 1, 2} and 2 in frames
    capture = cv2.VideoCapture(str(out / "ann.avi"))
    count = 0
    while capture.read()[0]:
        count += 1
    capture.release()
    assert count == 3


def test_real_pedestrian_video(tmp_path: Path, encoder: Encoder, pedestrian_video: Path) -> None:
    walker_crops(tmp_path / "people", frames=1)
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        enrol(gallery, encoder, plan_enrolment([tmp_path / "people"]))
        run = QueryRun(gallery, encoder, open_source(pedestrian_video, every=5, max_frames=3))
        results = list(run)
    assert [r.frame for r in results] == [0, 5, 10]
    assert run.stats.detections >= 3
    for result in results:
        for detection in result.detections:
            x, y, w, h = detection.box
            assert x >= 0 and y >= 0 and x + w <= 768 and y + h <= 576


def test_face_model_detects_faces_in_frames(tmp_path: Path, orl_faces: Path) -> None:
    faces = build_encoder(tmp_path / "face-model", name="faces", kind="face")
    with Gallery.open_or_create(tmp_path / "g", faces.card) as gallery:
        enrol(gallery, faces, plan_enrolment([str(orl_faces / "s1" / "*.pgm")]), detector=build_detector("haar", "face"))
        source = open_source(orl_faces / "s1" / "1.pgm")
        run = QueryRun(gallery, faces, source, QueryConfig(detect="face"))
        results = list(run)
    assert run.detector is not None and run.detector.kind == "face"
    (result,) = results
    assert result.detections and result.detections[0].box[2] < 92
    assert result.detections[0].identity == "s1" and result.detections[0].distance < 1e-3


def test_query_needs_a_threshold_and_the_gallery_model(tmp_path: Path, encoder: Encoder) -> None:
    uncalibrated = build_encoder(tmp_path / "raw", name="raw", threshold=None)
    video = tmp_path / "v.avi"
    write_street_video(video, count=2)
    with Gallery.open_or_create(tmp_path / "raw-g", uncalibrated.card) as gallery:
        with pytest.raises(ConfigError, match="no calibrated threshold"):
            QueryRun(gallery, uncalibrated, open_source(video))
        assert QueryRun(gallery, uncalibrated, open_source(video), QueryConfig(threshold=0.7)).threshold == 0.7
        with pytest.raises(GalleryError, match="'raw'.*'t'"):
            QueryRun(gallery, encoder, open_source(video))
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        assert QueryRun(gallery, encoder, open_source(video)).threshold == encoder.threshold == 0.3
        encoder.card.threshold = 0.5
        try:
            assert QueryRun(gallery, encoder, open_source(video)).threshold == 0.5, "a recalibrated card wins"
        finally:
            encoder.card.threshold = 0.3
    for bad in ({"top_k": 0}, {"detect": "car"}, {"score": "worst"}, {"threshold": 3.0}, {"batch_size": 0}):
        with pytest.raises(ConfigError):
            QueryConfig(**bad)


def test_empty_gallery_answers_unknown(tmp_path: Path, encoder: Encoder) -> None:
    video = tmp_path / "v.avi"
    write_street_video(video, count=2)
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        results = list(QueryRun(gallery, encoder, open_source(video), QueryConfig(detect="none")))
    assert len(results) == 2
    for result in results:
        (detection,) = result.detections
        assert detection.identity is None and detection.top_k == [] and not np.isfinite(detection.distance)
        assert result.events()[0]["distance"] is None


def test_stream_url_is_decoded_as_a_live_source(encoder: Encoder, street: tuple[Path, Path]) -> None:
    video, folder = street
    # OpenCV's FFmpeg backend reads file:// URLs as it reads rtsp:// or http:// streams.
    source = open_source(f"file://{video.resolve()}", max_frames=3)
    assert source.kind == "stream" and source.live
    with Gallery.open(folder) as gallery:
        results = list(QueryRun(gallery, encoder, source, QueryConfig(detect="none")))
    assert [r.frame for r in results] == [0, 1, 2]
    times = [r.time for r in results]
    # A stream's time is the wall-clock time since it was opened.
    assert all(t is not None for t in times) and times == sorted(times)


class ThreadsSeen(Encoder):
    """A real encoder that notes PyTorch's thread count each time it embeds."""

    def __init__(self, inner: Encoder) -> None:
        self.inner, self.card, self.threads = inner, inner.card, []

    def embed(self, images: list[np.ndarray]) -> np.ndarray:
        self.threads.append(torch.get_num_threads())
        return self.inner.embed(images)


def test_embedding_runs_on_the_configured_threads_and_restores_them(
    encoder: Encoder, street: tuple[Path, Path]
) -> None:
    video, folder = street
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = ThreadsSeen(encoder)
    try:
        with Gallery.open(folder) as gallery:
            run = QueryRun(gallery, seen, open_source(video, max_frames=3), QueryConfig(embed_threads=1, batch_size=1))
            list(run)
        assert seen.threads and set(seen.threads) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ConfigError, match="threads"):
        QueryConfig(embed_threads=0)
    with pytest.raises(ConfigError, match="^detect_scale: input should be"):
        QueryConfig(detect_scale=1.5)


def test_a_frame_names_each_enrolled_identity_once(tmp_path: Path, encoder: Encoder) -> None:
    """Both walkers of the street look like red to a gallery of red alone (threshold 2, the
    largest distance there is): in a frame with both, only the nearer track is named red
    and the other is unknown; with the rule off both are named, each alone."""
    video = tmp_path / "street.mp4"
    write_street_video(video, count=8, fps=8)
    walker_crops(tmp_path / "people", frames=2, seed=11)
    shutil.rmtree(tmp_path / "people" / "blue")
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        enrol(gallery, encoder, plan_enrolment([tmp_path / "people"]))
    runs = {}
    for rule in (True, False):
        with Gallery.open(tmp_path / "g") as gallery:
            config = QueryConfig(threshold=2.0, one_per_frame=rule)
            run = QueryRun(gallery, encoder, open_source(video), config)
            runs[rule] = (list(run), run.finish_tracks())
    together = [r for r in runs[True][0] if len(r.detections) == 2]
    assert together, "the walkers share frames"
    for result in together:
        nearer, farther = sorted(result.detections, key=lambda d: d.top_k[0].distance)
        assert nearer.top_k[0].distance < farther.top_k[0].distance
        assert (nearer.identity, farther.identity) == ("red", None)
        assert farther.distance == farther.top_k[0].distance
    # A track that lost red to the walker beside it is never red after, whoever is nearer.
    barred_from: dict[int, int] = {}
    for result in together:
        for d in result.detections:
            if d.identity is None and d.track is not None:
                barred_from.setdefault(d.track, result.frame)
    later = [
        d for r in runs[True][0] for d in r.detections if d.track in barred_from and r.frame > barred_from[d.track]
    ]
    assert later, "a track that lost red is seen again"
    assert {d.identity for d in later} == {None}
    alone = [r for r in runs[False][0] if len(r.detections) == 2]
    assert [d.identity for r in alone for d in r.detections] == ["red"] * 2 * len(alone)
    # A track's summary carries the decision of its last frame, made under the same rule.
    last = together[-1]
    for summary in runs[True][1]:
        seen = {d.track: d.identity for d in last.detections}
        if summary.end_frame == last.frame and summary.track in seen:
            assert summary.identity == seen[summary.track]
    assert {s.identity for s in runs[False][1]} == {"red"}


def test_untracked_detections_are_named_each_alone(tmp_path: Path, encoder: Encoder) -> None:
    video = tmp_path / "street.mp4"
    write_street_video(video, count=4, fps=8)
    walker_crops(tmp_path / "people", frames=2, seed=11)
    shutil.rmtree(tmp_path / "people" / "blue")
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        enrol(gallery, encoder, plan_enrolment([tmp_path / "people"]))
        results = list(QueryRun(gallery, encoder, open_source(video), QueryConfig(threshold=2.0, track=False)))
    assert any(len(r.detections) == 2 for r in results)
    assert {d.identity for r in results for d in r.detections} == {"red"}
