"""Appearance for a detection file: boxes cut from the right decoded frame of a built
video, embedded in batches, a box outside the frame left without an embedding, and a
detection file longer than its video refused."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from reid.detect import DEFAULT_MARGIN, crop
from reid.errors import DataError
from reid.models import load_encoder, stand_in_model
from reid.track import TrackerConfig
from reid.track.appearance import VideoAppearance
from reid.track.mot import MotRow, read_mot, track_detection_file

FRAMES = 12


def build_video(path: Path) -> None:
    """A red walker moving 10 px right a frame on grey, a green one standing still."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (240, 120))
    for k in range(FRAMES):
        frame = np.full((120, 240, 3), 128, np.uint8)
        frame[30:70, 10 * k : 10 * k + 20] = (0, 0, 255)  # BGR red
        frame[30:70, 200:220] = (0, 255, 0)
        writer.write(frame)
    writer.release()


def detection_rows() -> list[MotRow]:
    rows = []
    for k in range(FRAMES):
        rows.append(MotRow(k + 1, -1, (10.0 * k, 30.0, 20.0, 40.0), 0.9))
        rows.append(MotRow(k + 1, -1, (200.0, 30.0, 20.0, 40.0), 0.8))
    rows.append(MotRow(3, -1, (500.0, 300.0, 20.0, 40.0), 0.7))
    return rows


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("appearance")
    build_video(folder / "walk.avi")
    model = stand_in_model(folder / "model", "person", architecture="resnet18", embedding_dim=16, input_size=(64, 32))
    return folder / "walk.avi", model


def test_each_box_is_cut_from_decoded_frame_f_minus_1_and_embedded(scene: tuple[Path, Path]) -> None:
    video, model = scene
    encoder = load_encoder(model, device="cpu")
    rows = detection_rows()
    appearance = VideoAppearance(video, encoder, batch=5)
    features = appearance.embed(rows)
    assert features.shape == (len(rows), 16) and features.dtype == np.float32
    assert (appearance.embedded, appearance.empty) == (len(rows) - 1, 1)
    assert not features[-1].any(), "a box outside the frame has no embedding"
    np.testing.assert_allclose(np.linalg.norm(features[:-1], axis=1), 1.0, rtol=1e-5)
    capture = cv2.VideoCapture(str(video))
    decoded = []
    while True:
        ok, bgr = capture.read()
        if not ok:
            break
        decoded.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    capture.release()
    expected = encoder.embed(
        [crop(decoded[r.frame - 1], tuple(int(v) for v in r.box), DEFAULT_MARGIN["person"]) for r in rows[:-1]]
    )
    np.testing.assert_allclose(features[:-1], expected, atol=1e-5)
    margin = DEFAULT_MARGIN["person"]
    shifted = encoder.embed([crop(decoded[r.frame], tuple(int(v) for v in r.box), margin) for r in rows[:4:2]])
    assert np.linalg.norm(shifted - features[:4:2], axis=1).min() > 1e-3, "frame f is not decoded frame f"


def test_detections_past_the_end_of_the_video_are_refused(scene: tuple[Path, Path]) -> None:
    video, model = scene
    rows = [MotRow(FRAMES + 1, -1, (0.0, 0.0, 20.0, 40.0), 0.9)]
    with pytest.raises(DataError, match=f"reach frame {FRAMES + 1}, the video has {FRAMES} frames"):
        VideoAppearance(video, load_encoder(model, device="cpu")).embed(rows)


def test_a_detection_file_is_tracked_with_appearance(scene: tuple[Path, Path], tmp_path: Path) -> None:
    video, model = scene
    detections, out = tmp_path / "det.txt", tmp_path / "tracks.txt"
    detections.write_text("".join(r.line() + "\n" for r in detection_rows()))
    appearance = VideoAppearance(video, load_encoder(model, device="cpu"))
    result = track_detection_file(detections, out, TrackerConfig(min_boxes=2), fps=10, appearance=appearance)
    assert result.embedded == len(detection_rows()) - 1 and result.tracks == 2
    tracks = {}
    for row in read_mot(out):
        tracks.setdefault(row.id, set()).add(row.box[0] >= 200)
    assert sorted(tracks.values(), key=sorted) == [{False}, {True}], "the walker and the one standing stay apart"
