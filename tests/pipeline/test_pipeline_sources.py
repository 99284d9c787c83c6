"""Sources: images, folders, globs and real video decoding."""

from __future__ import annotations

import functools
import http.server
import socket
import socketserver
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from bad_inputs import good_jpg, pillow_image

from reid.errors import ConfigError, DataError
from reid.pipeline import open_source
from reid.pipeline.synthetic import write_street_video


def test_video_frames_every_and_max(tmp_path: Path) -> None:
    path = tmp_path / "street.avi"
    write_street_video(path, count=12, fps=6, size=(160, 120))
    source = open_source(path, every=3)
    assert source.kind == "video" and source.fps == pytest.approx(6) and source.total_frames == 12
    assert source.expected_frames == 4
    frames = list(source.frames())
    assert [f.index for f in frames] == [0, 3, 6, 9]
    assert [f.time for f in frames] == pytest.approx([0.0, 0.5, 1.0, 1.5])
    assert frames[0].image.shape == (120, 160, 3) and frames[0].image.dtype == np.uint8
    limited = open_source(path, every=2, max_frames=2)
    assert [f.index for f in limited.frames()] == [0, 2] and limited.expected_frames == 2


def test_real_video_decodes(pedestrian_video: Path) -> None:
    source = open_source(pedestrian_video, max_frames=3)
    frames = list(source.frames())
    assert source.kind == "video" and len(frames) == 3
    assert frames[0].image.shape == (576, 768, 3)


def test_images_folders_and_globs(tmp_path: Path) -> None:
    for name in ("b.png", "a.jpg", "sub/c.png"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        cv2.imwrite(str(tmp_path / name), np.full((20, 10, 3), 90, np.uint8))
    (tmp_path / "broken.png").write_bytes(b"not a png")
    (tmp_path / "notes.txt").write_text("ignored")
    folder = open_source(tmp_path)
    frames = list(folder.frames())
    assert [Path(f.source).name for f in frames] == ["a.jpg", "b.png", "c.png"]
    assert [f.index for f in frames] == [0, 1, 3] and all(f.time is None for f in frames)
    # The broken image and the text file are both named: nothing is left out silently.
    assert sorted(Path(p).name for p, _ in folder.unreadable) == ["broken.png", "notes.txt"]
    assert [Path(f.source).name for f in open_source(str(tmp_path / "*.png")).frames()] == ["b.png"]
    single = open_source(tmp_path / "a.jpg")
    assert single.kind == "images" and len(list(single.frames())) == 1


def test_bad_sources(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="holds no images"):
        open_source(tmp_path)
    with pytest.raises(DataError, match="no such file"):
        open_source(tmp_path / "missing.mp4")
    with pytest.raises(DataError, match="no images match"):
        open_source(str(tmp_path / "*.jpg"))
    junk = tmp_path / "clip.mp4"
    junk.write_bytes(b"\x00" * 100)
    with pytest.raises(DataError, match="clip.mp4"):
        open_source(junk)
    with pytest.raises(ConfigError, match="^every must be at least 1, got 0"):
        open_source(tmp_path, every=0)
    with pytest.raises(ConfigError, match="^max_frames must be at least 1, got 0"):
        open_source(tmp_path, max_frames=0)


def test_frames_over_the_pixel_limit_are_refused_from_the_container_before_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "street.avi"
    write_street_video(path, count=3, fps=6, size=(160, 120))
    monkeypatch.setenv("REID_MAX_IMAGE_PIXELS", str(160 * 120 - 1))
    with pytest.raises(DataError, match=r"street.avi: frames of 160 x 120 pixels, over the limit of 19199"):
        next(open_source(path).frames())


def test_cameras_and_streams_are_recognised(tmp_path: Path) -> None:
    assert open_source("0").kind == "camera" and open_source("0").live
    # Digits of other scripts are no camera index (before, int() of one failed mid-run).
    with pytest.raises(DataError, match="²: no such file, folder or camera"):
        open_source("²")
    assert open_source("rtsp://example.invalid/stream").kind == "stream"
    missing_camera = open_source("97")
    with pytest.raises(DataError, match="97: cannot open camera"):
        list(missing_camera.frames())


def test_a_video_without_a_decodable_frame_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.avi"
    writer = cv2.VideoWriter(str(empty), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    writer.release()
    source = open_source(empty)
    assert source.kind == "video"
    with pytest.raises(DataError, match=r"empty\.avi: the video yielded no decodable frame"):
        list(source.frames())


def test_a_gif_or_an_image_under_another_extension_is_an_image(tmp_path: Path) -> None:
    gif = pillow_image(tmp_path / "photo.gif", "GIF")
    renamed = good_jpg(tmp_path / "photo.data")
    for path in (gif, renamed):
        source = open_source(path)
        assert source.kind == "images"
        assert [f.image.shape[2] for f in source.frames()] == [3]
    folder = open_source(tmp_path)
    # In a folder, the extension decides: the .data file is named, not guessed at.
    assert [Path(p).name for p in folder.paths] == ["photo.gif"]
    assert [Path(p).name for p, _ in folder.unreadable] == ["photo.data"]


def variable_rate_mp4(path: Path, frames: int = 20) -> Path:
    """An MP4 whose first half runs at 10 frames a second and second half at 3.3 (as a
    phone records when the light drops): written at 10 fps by OpenCV, then its
    time-to-sample table rewritten to give the second half three times the duration."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 48))
    for i in range(frames):
        writer.write(np.full((48, 64, 3), i * 10, np.uint8))
    writer.release()
    data = bytearray(path.read_bytes())
    parents: list[int] = []

    def find(start: int, end: int) -> int | None:
        pos = start
        while pos < end:
            size, kind = struct.unpack(">I4s", data[pos : pos + 8])
            if kind in (b"moov", b"trak", b"mdia", b"minf", b"stbl"):
                parents.append(pos)
                found = find(pos + 8, pos + size)
                if found is not None:
                    return found
                parents.pop()
            if kind == b"stts":
                return pos
            pos += size
        return None

    stts = find(0, len(data))
    assert stts is not None
    _, _, count, delta = struct.unpack(">IIII", data[stts + 8 : stts + 24])
    half = count // 2
    data[stts : stts + 24] = struct.pack(">I4sIIIIII", 32, b"stts", 0, 2, half, delta, count - half, 3 * delta)
    # The index (moov) follows the frames (mdat), so growing it moves no frame offset.
    for pos in parents:
        data[pos : pos + 4] = struct.pack(">I", struct.unpack(">I", data[pos : pos + 4])[0] + 8)
    path.write_bytes(bytes(data))
    return path


def test_video_times_are_the_containers_not_frame_over_fps(tmp_path: Path) -> None:
    source = open_source(variable_rate_mp4(tmp_path / "phone.mp4"))
    frames = list(source.frames())
    times = [f.time for f in frames]
    assert len(frames) >= 12
    assert times[:10] == pytest.approx([i / 10 for i in range(10)], abs=1e-3)
    assert times[10:12] == pytest.approx([1.0, 1.3], abs=1e-3), "the slow half is 0.3 s a frame"
    assert source.fps is not None and abs(times[-1] - frames[-1].index / source.fps) > 0.5, "frame / fps is far off here"
    write_street_video(tmp_path / "steady.avi", count=6, fps=5)
    assert [f.time for f in open_source(tmp_path / "steady.avi").frames()] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])


@pytest.fixture()
def http_folder(tmp_path: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = socketserver.TCPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_network_stream_lost_mid_run_is_an_error_after_its_frames(tmp_path: Path, http_folder: str) -> None:
    write_street_video(tmp_path / "cam.avi", count=8, fps=10, size=(160, 120))
    source = open_source(f"{http_folder}/cam.avi")
    assert source.live and not source.ends
    received = []
    with pytest.raises(DataError, match=r"cam.avi: the stream was lost after 8 frames"):
        for frame in source.frames():
            received.append(frame.index)
    assert received == list(range(8)), "every frame that came was given first"
    assert len(list(open_source(f"file://{tmp_path / 'cam.avi'}").frames())) == 8, "a file:// stream simply ends"


def test_a_refused_or_unknown_stream_address_says_what_happened() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for url, problem in (
        (f"rtsp://127.0.0.1:{port}/live", f"cannot open stream: connection refused by 127.0.0.1:{port}"),
        ("rtsp://camera.invalid/live", "cannot open stream: the host name camera.invalid does not resolve"),
    ):
        with pytest.raises(DataError) as caught:
            list(open_source(url).frames())
        assert str(caught.value).startswith(f"{url}: {problem}") and "decoder" not in str(caught.value)
