"""apps/camera_search end to end: generated two-camera videos, a gallery run, the real
pedestrian video, the tracker on its own, and the app's imports."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import cv2
import pytest
from app_helpers import ROOT, private_imports
from typer.testing import CliRunner

from apps.camera_search.cli import app
from apps.camera_search.demo import DemoScene, write_demo_videos
from reid.data import read_image
from reid.errors import ConfigError
from reid.gallery import Gallery, ItemMeta
from reid.models import load_encoder

EVENT_KEYS = {
    "camera", "source", "track", "start", "end", "first_frame", "last_frame", "boxes",
    "identity", "distance", "nearest", "role", "thumbnail",
}
# Small frames and few of them: HOG detection dominates the run time.
FRAMES = 24
SIZE = (320, 240)


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def read_events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]


def video_frames(path: Path) -> int:
    capture = cv2.VideoCapture(str(path))
    assert capture.isOpened(), path
    count = 0
    while capture.read()[0]:
        count += 1
    capture.release()
    return count


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> DemoScene:
    return write_demo_videos(tmp_path_factory.mktemp("videos"), frames=FRAMES, walkers=2, size=SIZE)


@pytest.fixture(scope="module")
def reference_run(scene: DemoScene, person_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app run as users run it: ``python -m apps.camera_search`` in a fresh process."""
    out = tmp_path_factory.mktemp("reference-run")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [
        sys.executable, "-m", "apps.camera_search", "--model", str(person_model), "--out", str(out),
        "--threshold", "0.5", "--win-stride", "4", "--min-boxes", "1",
        *(str(v) for v in scene.videos),
    ]
    env.pop("COLUMNS", None)  # piped at rich's default 80 columns
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout
    # Piped, a message is one line however long, as reid's are: never cut at 80 columns.
    wrote = [line for line in done.stdout.splitlines() if line.startswith("wrote ")]
    assert wrote and str(out / "events.jsonl") in wrote[0] and str(out / "report.html") in wrote[0], done.stdout
    return out


def test_events_one_object_per_track(reference_run: Path) -> None:
    events = read_events(reference_run)
    summary = json.loads((reference_run / "summary.json").read_text())
    assert len(events) == summary["tracks"] == sum(c["tracks"] for c in summary["cameras"])
    assert {e["camera"] for e in events} == {0, 1}, "both cameras should yield tracks"
    for event in events:
        assert set(event) == EVENT_KEYS
        assert event["start"] <= event["end"]
        assert event["first_frame"] <= event["last_frame"]
        assert 1 <= event["boxes"] <= event["last_frame"] - event["first_frame"] + 1
        assert (reference_run / event["thumbnail"]).is_file()
        if event["role"] == "reference":
            assert event["camera"] == 0 and event["identity"] == f"cam0-{event['track']:03d}"
            assert event["distance"] is None
        else:
            assert event["camera"] == 1 and event["nearest"] is not None
            # A track is named within the threshold only; the nearest identity may have
            # gone to a nearer track seen in the same frame (one identity per frame).
            if event["identity"] is not None:
                assert event["distance"] <= summary["threshold"]
            if event["distance"] > summary["threshold"]:
                assert event["identity"] is None
    keys = [(e["camera"], e["track"]) for e in events]
    assert len(set(keys)) == len(keys)


def test_sqlite_rows_equal_jsonl_lines(reference_run: Path) -> None:
    events = read_events(reference_run)
    with sqlite3.connect(reference_run / "events.sqlite") as db:
        db.row_factory = sqlite3.Row
        rows = [dict(r) for r in db.execute("SELECT * FROM events ORDER BY camera, track")]
        boxes = db.execute("SELECT camera, track, COUNT(*) FROM boxes GROUP BY camera, track").fetchall()
    assert rows == events
    assert {(c, t): n for c, t, n in boxes} == {(e["camera"], e["track"]): e["boxes"] for e in events}


def test_report_has_one_row_per_identity(reference_run: Path) -> None:
    events = read_events(reference_run)
    page = (reference_run / "report.html").read_text()
    identities = {e["identity"] for e in events if e["identity"] is not None}
    assert page.count('<tr class="identity"') == len(identities) > 0
    for identity in identities:
        assert f'data-identity="{identity}"' in page
    assert page.count('<tr class="unknown"') == sum(e["identity"] is None for e in events)
    for event in events:
        assert f'src="{event["thumbnail"]}"' in page


def test_annotated_videos_decode_with_every_frame(reference_run: Path, scene: DemoScene) -> None:
    for camera, source in enumerate(scene.videos):
        written = reference_run / f"cam{camera}.avi"
        assert video_frames(written) == video_frames(source) == FRAMES
        capture = cv2.VideoCapture(str(written))
        ok, frame = capture.read()
        capture.release()
        assert ok and frame.shape[:2] == (SIZE[1], SIZE[0])


def test_reference_gallery_holds_the_reference_tracks(reference_run: Path, person_model: Path) -> None:
    events = read_events(reference_run)
    with Gallery.open(reference_run / "gallery") as gallery:
        enrolled = {s.identity for s in gallery.identities()}
        gallery.check_model(load_encoder(person_model).card)
    assert enrolled == {e["identity"] for e in events if e["role"] == "reference"}


def test_gallery_mode_matches_every_camera(
    scene: DemoScene, person_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder = load_encoder(person_model)
    people = sorted(p for p in (scene.videos[0].parent / "people" / "bounding_box_train").glob("*.jpg"))
    # A bare gallery name is read as reid reads it: galleries/NAME under the working folder.
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "galleries" / "known"
    with Gallery.create(folder, encoder.card) as gallery:
        gallery.add(
            encoder.embed([read_image(p) for p in people]),
            [ItemMeta(f"person{p.name[:4]}", source=str(p)) for p in people],
        )
    out = tmp_path / "out"
    code, output = invoke(
        "--model", str(person_model), "--out", str(out), "--gallery", "known", "--threshold", "2.0",
        "--win-stride", "4", "--every", "2", "--max-frames", "8", *(str(v) for v in scene.videos),
    )
    assert code == 0, output
    events = read_events(out)
    assert events and all(e["role"] == "query" for e in events)
    # Threshold 2 names every track alone; tracks that share a frame share no name.
    assert {e["identity"] for e in events} - {None} <= {f"person{p.name[:4]}" for p in people}
    assert any(e["identity"] is not None for e in events)
    assert not (out / "gallery").exists()
    assert video_frames(out / "cam0.avi") == 8


def test_same_video_twice_names_every_track_after_itself(
    pedestrian_video: Path, person_model: Path, tmp_path: Path
) -> None:
    """The real pedestrian video as two cameras: identical tracks have identical embeddings."""
    out = tmp_path / "out"
    code, output = invoke(
        "--model", str(person_model), "--out", str(out), "--threshold", "0.05", "--max-frames", "6",
        "--detect-scale", "0.75", str(pedestrian_video), str(pedestrian_video),
    )
    assert code == 0, output
    events = read_events(out)
    reference = {e["track"]: e for e in events if e["camera"] == 0}
    searched = [e for e in events if e["camera"] == 1]
    assert reference and len(searched) == len(reference)
    for event in searched:
        twin = reference[event["track"]]
        assert event["identity"] == twin["identity"]
        assert event["distance"] == pytest.approx(0.0, abs=1e-3)
        assert (event["start"], event["end"], event["boxes"]) == (twin["start"], twin["end"], twin["boxes"])
    assert video_frames(out / "cam1.avi") == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cameras"][0]["frames"] == 6 and summary["cameras"][0]["frames_per_second"] > 0


def test_demo_runs_end_to_end(person_model: Path, tmp_path: Path) -> None:
    code, output = invoke("--demo", "--demo-frames", "6", "--model", str(person_model), "--out", str(tmp_path))
    assert code == 0, output
    assert "demo truth" in output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert "held-out synthetic people" in summary["threshold_source"]
    assert (tmp_path / "report.html").is_file() and (tmp_path / "demo" / "cam1.avi").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gallery", "g", "--reference-camera", "1", "{v0}", "{v1}"], "error: give --gallery (match every camera "
         "against it) or --reference-camera, not both"),
        (["{v0}", "missing-camera-1.avi"], "error: missing-camera-1.avi: no such file, folder or camera"),
        (["missing.avi"], "error: missing.avi: no such file, folder or camera"),
        (["{v0}"], "error: give at least two videos (a reference camera and one to search), or --gallery G to search one"),
        (["--reference-camera", "2", "{v0}", "{v1}"], "error: --reference-camera 2: cameras are numbered 0..1"),
    ],
    ids=["gallery-and-reference", "one-missing", "only-one-missing", "only-one", "no-such-camera"],
)
def test_bad_input_is_one_line_error(
    args: list[str], message: str, scene: DemoScene, person_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # No person detector's model is here: its note must not come before (or instead of) the error.
    videos = {"v0": str(scene.videos[0]), "v1": str(scene.videos[1])}
    code, output = invoke("--model", str(person_model), "--out", str(tmp_path / "out"), "--threshold", "0.5",
                          *(a.format(**videos) for a in args))
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and lines[0].startswith(message), output
    assert not (tmp_path / "out").exists()


def test_a_missing_model_is_answered_before_the_detector_note(scene: DemoScene, tmp_path: Path) -> None:
    code, output = invoke("--model", str(tmp_path / "nothing"), "--out", str(tmp_path / "out"),
                          *(str(v) for v in scene.videos))
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error:") and "nothing" in lines[0], output


def test_model_without_threshold_needs_one(scene: DemoScene, person_model: Path, tmp_path: Path) -> None:
    code, output = invoke(
        "--model", str(person_model), "--out", str(tmp_path), "--max-frames", "1", *(str(v) for v in scene.videos)
    )
    assert code == 1
    assert "no calibrated threshold" in output


def test_app_imports_only_public_reid_names() -> None:
    assert private_imports(ROOT / "apps" / "camera_search") == []


def test_import_check_catches_private_names(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(
        "from reid.models.encoder import preprocess\n"
        "from reid.gallery import _Labels\n"
        "from reid.data import read_image\n"
        "import reid.pipeline.query\n"
        "from reid import ConfigError\n"
    )
    problems = private_imports(tmp_path)
    assert len(problems) == 3
    assert any("reid.models.encoder" in p for p in problems)
    assert any("_Labels" in p for p in problems)
    assert any("import reid.pipeline.query" in p for p in problems)


def test_a_camera_runs_on_the_tracked_detection_stream(scene: DemoScene, person_model: Path, tmp_path: Path) -> None:
    """process_camera links, embeds in batches and attaches through reid.pipeline's stream:
    every reported detection is a box of a track, and every track has an embedding."""
    from apps.camera_search.search import SearchConfig, process_camera
    from reid.detect import PersonDetectorConfig
    from reid.pipeline import open_source
    from reid.track import TrackerConfig

    config = SearchConfig(
        videos=[str(scene.videos[0])], out=tmp_path, gallery=str(tmp_path / "unused"), batch_size=3,
        detector=PersonDetectorConfig(win_stride=4), tracker=TrackerConfig(min_boxes=1),
    )  # fmt: skip
    run = process_camera(load_encoder(person_model), 0, open_source(scene.videos[0]), config)
    assert run.frames == FRAMES and run.tracks
    assert run.detections == sum(len(t.observations) for t in run.tracks)
    assert all(t.embedding_sum is not None for t in run.tracks)
    assert len({t.id for t in run.tracks}) == len(run.tracks), "tracks ended early and at the end are each listed once"
    assert [t.first.frame for t in run.tracks] == sorted(t.first.frame for t in run.tracks)


def test_a_camera_embeds_one_in_n_of_each_tracks_crops_with_embed_every(
    scene: DemoScene, person_model: Path, tmp_path: Path
) -> None:
    """The app takes the stream's --embed-every: tracks linked on boxes alone, one in N of
    each track's crops embedded, every track still named by an embedding; one stage timer."""
    from apps.camera_search.search import SearchConfig, process_camera
    from reid.detect import PersonDetectorConfig
    from reid.pipeline import STAGES, open_source
    from reid.track import TrackerConfig

    encoder = load_encoder(person_model)
    runs = {}
    for every in (1, 2):
        config = SearchConfig(
            videos=[str(scene.videos[0])], out=tmp_path, gallery=str(tmp_path / "unused"), embed_every=every,
            detector=PersonDetectorConfig(win_stride=4), tracker=TrackerConfig(min_boxes=1),
        )  # fmt: skip
        runs[every] = process_camera(encoder, 0, open_source(scene.videos[0]), config)
    every_crop, sampled = runs[1], runs[2]
    assert every_crop.embedded >= every_crop.detections > 0, "every crop, weak strays included, before linking"
    assert sampled.embedded == sum((len(t.observations) + 1) // 2 for t in sampled.tracks) < sampled.detections
    for run in (every_crop, sampled):
        assert all(t.embedding_sum is not None and t.thumbnail is not None for t in run.tracks)
        assert tuple(run.stage_seconds) == STAGES and run.stage_seconds["embed"] > 0
        assert run.to_dict()["embedded"] == run.embedded
    with pytest.raises(ConfigError, match="embed_every: input should be greater than or equal to 1"):
        SearchConfig(videos=[str(scene.videos[0])], out=tmp_path, gallery=str(tmp_path / "unused"), embed_every=0)


def test_tracks_seen_together_are_never_named_the_same_identity(
    scene: DemoScene, person_model: Path, tmp_path: Path
) -> None:
    """A gallery of one person and the widest threshold: every track alone is that person;
    of tracks that share a frame only the nearest is, the others unknown; with the rule off
    every track is named, each alone."""
    from apps.camera_search.search import SearchConfig, match_tracks, process_camera, seen_together
    from reid import Threshold
    from reid.detect import PersonDetectorConfig
    from reid.pipeline import open_source
    from reid.track import TrackerConfig

    encoder = load_encoder(person_model)
    photo = sorted((scene.videos[0].parent / "people" / "bounding_box_train").glob("*.jpg"))[0]
    config = SearchConfig(
        videos=[str(scene.videos[0])], out=tmp_path, gallery=str(tmp_path / "known"),
        detector=PersonDetectorConfig(win_stride=4), tracker=TrackerConfig(min_boxes=1),
    )  # fmt: skip
    run = process_camera(encoder, 0, open_source(scene.videos[0]), config)
    together = [group for group in seen_together(run.tracks) if len(group) > 1]
    assert together, "the walkers share frames"
    rule = Threshold(2.0, "given")
    with Gallery.create(tmp_path / "known", encoder.card) as gallery:
        gallery.add(encoder.embed([read_image(photo)]), [ItemMeta("ann", source=str(photo))])
        once = match_tracks(gallery, run, rule, top_k=1)
        alone = match_tracks(gallery, run, rule, top_k=1, one_per_frame=False)
    assert [e.identity for e in alone] == ["ann"] * len(run.tracks)
    for group in together:
        named = [p for p in group if once[p].identity == "ann"]
        assert len(named) <= 1
        if named:
            assert once[named[0]].distance == min(once[p].distance for p in group)
    assert any(e.identity is None for e in once) and any(e.identity == "ann" for e in once)
    assert [e.distance for e in once] == [e.distance for e in alone], "the nearest identity's distance either way"


def test_the_config_takes_reids_defaults_and_ranges(tmp_path: Path) -> None:
    """top_k is a query's, batch_size and embed_every the stream's, every and max_frames a
    source's: the same defaults, and the same bounds read from the same field types."""
    from apps.camera_search.search import SearchConfig
    from reid.cli.defaults import RANGES, declared_range, default_of
    from reid.errors import ConfigValueError
    from reid.pipeline import QueryConfig, StreamConfig, open_source

    assert (SearchConfig.top_k, SearchConfig.batch_size, SearchConfig.embed_every) == (
        QueryConfig.top_k, StreamConfig.batch_size, StreamConfig.embed_every
    )
    assert (SearchConfig.every, SearchConfig.max_frames) == (default_of(open_source, "every"), default_of(open_source, "max_frames"))
    for key, library in (("top_k", QueryConfig), ("batch_size", StreamConfig), ("embed_every", StreamConfig)):
        assert declared_range(SearchConfig, key) == declared_range(library, key) is not None
    for key in ("every", "max_frames"):
        assert declared_range(SearchConfig, key) == RANGES[key]
    for key, value in (("top_k", 0), ("top_k", 10_001), ("batch_size", 4097), ("every", 0), ("max_frames", 0),
                       ("reference_camera", -1), ("embed_every", 0)):  # fmt: skip
        with pytest.raises(ConfigValueError) as caught:
            SearchConfig(videos=["a.avi", "b.avi"], out=tmp_path, **{key: value})
        assert caught.value.key == key and str(caught.value).startswith(f"{key}: ")
    with pytest.raises(ConfigValueError) as caught:
        SearchConfig(videos=["a.avi", "b.avi"], out=tmp_path, reference_camera=2)
    assert caught.value.key == "reference_camera" and "numbered 0..1" in str(caught.value)


def test_a_misspelt_detector_is_refused_before_anything_is_written(
    scene: DemoScene, person_model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    code, output = invoke(
        "--model", str(person_model), "--out", str(out), "--detector", "bogus", *(str(v) for v in scene.videos)
    )
    assert code != 0 and output.strip().startswith("error: --detector 'bogus': not a detector; choose one of")
    assert len(output.strip().splitlines()) == 1 and not out.exists()
