"""A camera's own impostor pairs (tracks seen in one frame) in a gallery's calibration."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from reid.cli.app import app
from reid.errors import ConfigError
from reid.gallery import Gallery, ItemMeta
from reid.gallery.calibration import (
    GalleryCalibration,
    SceneCalibration,
    SceneTrack,
    SceneTracks,
    scene_impostor_distances,
    threshold_admitting,
)
from reid.models import ModelCard, build_network, load_card, save_model
from reid.pipeline.scene import parse_frames
from tests.gallery.gallery_helpers import DIM, clustered, make_card, metas

runner = CliRunner()


def on_circle(angle: float) -> np.ndarray:
    vector = np.zeros(DIM, np.float32)
    vector[0], vector[1] = math.cos(angle), math.sin(angle)
    return vector


def staggered(count: int, step: float, start_every: int = 10, length: int = 26) -> list[SceneTrack]:
    """Track k at angle k*step, seen in frames 10k .. 10k+25: tracks 1 and 2 apart share
    frames, 3 apart do not, so the impostor distances are known: count-1 of 2 sin(step/2)
    and count-2 of 2 sin(step)."""
    return [
        SceneTrack(np.arange(k * start_every, k * start_every + length), on_circle(k * step)) for k in range(count)
    ]


def test_tracks_seen_in_one_frame_give_a_known_distribution() -> None:
    step = 0.05
    distances = scene_impostor_distances(staggered(40, step))
    expected = sorted([2 * math.sin(step / 2)] * 39 + [2 * math.sin(step)] * 38)
    assert distances.size == 77
    np.testing.assert_allclose(np.sort(distances), expected, atol=1e-6)


def test_tracks_that_never_share_a_frame_are_no_pair_even_when_their_spans_overlap() -> None:
    # One person lost and found again: two tracks whose spans interleave but never share a
    # frame may be the same person, so they are no impostor pair; a third seen with both is.
    lost = SceneTrack(np.array([0, 1, 2, 10, 11]), on_circle(0.0))
    found = SceneTrack(np.array([4, 5, 6, 7]), on_circle(0.01))
    other = SceneTrack(np.array([5, 11]), on_circle(1.0))
    distances = scene_impostor_distances([lost, found, other])
    np.testing.assert_allclose(np.sort(distances), sorted([2 * math.sin(0.5), 2 * math.sin(0.495)]), atol=1e-6)
    assert scene_impostor_distances([lost, found]).size == 0
    assert scene_impostor_distances([]).size == 0


def test_random_tracks_match_a_pair_by_pair_count() -> None:
    rng = np.random.default_rng(5)
    tracks = []
    for _ in range(60):
        start = int(rng.integers(0, 300))
        frames = np.unique(rng.integers(start, start + 40, size=int(rng.integers(2, 30))))
        vector = rng.normal(size=DIM)
        tracks.append(SceneTrack(frames, (vector / np.linalg.norm(vector)).astype(np.float32)))
    expected = [
        float(np.linalg.norm(a.embedding.astype(np.float64) - b.embedding))
        for i, a in enumerate(tracks)
        for b in tracks[i + 1 :]
        if set(a.frames.tolist()) & set(b.frames.tolist())
    ]
    assert len(expected) > 50
    np.testing.assert_allclose(scene_impostor_distances(tracks), expected, atol=1e-9)


def test_the_scenes_threshold_admits_at_most_its_share_and_none_when_pairs_are_few() -> None:
    distances = np.linspace(0.5, 1.5, 101)
    threshold, admitted = threshold_admitting(distances, 0.05)
    assert admitted == 5 and distances[4] < threshold < distances[5]
    # 101 pairs cannot resolve 1e-3: the threshold lies just below the nearest pair.
    threshold, admitted = threshold_admitting(distances, 1e-3)
    assert admitted == 0 and threshold < 0.5 and threshold == pytest.approx(0.5)
    with pytest.raises(ConfigError, match="holds no impostor pair"):
        threshold_admitting(np.zeros(0), 1e-3)


def test_a_scene_makes_the_gallery_decide_at_the_tighter_threshold_and_is_stored(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(50, 4, seed=1)
    near = SceneTracks("cam.avi", "0:299", tuple(staggered(40, 0.05)))
    far_apart = SceneTracks("cam.avi", "all", tuple(staggered(40, 1.5)))
    folder = tmp_path / "g"
    with Gallery.create(folder, make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        alone = gallery.calibrate(2e-2, store=False)
        tight = gallery.calibrate(2e-2, scene=near)
        # 77 pairs at 2e-2: one admitted at most, within the nearest gap 2 sin(0.025) (39 pairs,
        # equal but for float32 rounding).
        assert tight.scene is not None and tight.scene.admitted <= 1
        assert tight.scene == SceneCalibration("cam.avi", "0:299", 40, 77, tight.scene.threshold, tight.scene.admitted)
        assert tight.scene.threshold < 2 * math.sin(0.025) + 1e-5 < alone.threshold
        assert tight.threshold == tight.scene.threshold and tight.identities_threshold == alone.threshold
        assert "scene cam.avi frames 0:299: 77 pairs of 40 tracks seen in one frame" in tight.describe()
        loose = gallery.calibrate(2e-2, store=False, scene=far_apart)
        assert loose.threshold == alone.threshold and loose.scene is not None
    with Gallery.open(folder) as gallery:
        assert gallery.calibration == tight and gallery.current_calibration() == tight
        gallery.check(queries=20)
        # A later write recomputes the identities' part; the scene's pairs still hold.
        more, more_labels, _ = clustered(10, 4, seed=9)
        gallery.add(more, metas([f"new{label}" for label in more_labels], prefix="more"))
        fresh = gallery.current_calibration()
        assert fresh is not None and not fresh.stored and fresh.scene == tight.scene
        assert fresh.threshold == tight.scene.threshold and fresh.identities == 60


def test_stored_scene_values_are_checked_on_reading() -> None:
    own = GalleryCalibration(1e-3, 0.8, 10, 40, 40, 40, 10, 720, 45, 0, "t", stored=True)
    scene = SceneCalibration("cam.avi", "0:50", 12, 30, 0.4, 0)
    good = own.with_scene(scene)
    assert good.threshold == 0.4 and GalleryCalibration.from_json(good.to_json()) == good
    data = json.loads(good.to_json())
    for key, value in (("threshold", 0.8), ("scene", {**data["scene"], "pairs": 0}), ("scene", [1])):
        with pytest.raises(ValueError):
            GalleryCalibration.from_json(json.dumps({**data, key: value}))
    # A calibration stored before scenes existed reads as the identities' alone.
    data.pop("scene"), data.pop("identities_threshold")
    assert GalleryCalibration.from_json(json.dumps({**data, "threshold": 0.8})) == own


@pytest.mark.parametrize(
    ("text", "expected"), [(None, (0, None)), ("0:299", (0, 299)), ("10:", (10, None)), (":5", (0, 5))]
)
def test_frames_are_a_half_open_range(text: str | None, expected: tuple[int, int | None]) -> None:
    assert parse_frames(text) == expected


@pytest.mark.parametrize("text", ["5", "5:5", "7:3", "-1:4", "a:b"])
def test_bad_frames_are_refused_in_one_line(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^frames .*: give A:B"):
        parse_frames(text)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models") / "person"
    # No threshold on the card (training calibrates none): a scene needs none.
    card = ModelCard(name="person", architecture="resnet18", embedding_dim=64, input_size=(64, 32))
    save_model(build_network(card), card, folder)
    return folder


def gallery_of(folder: Path, model: Path) -> Path:
    vectors, labels, _ = clustered(20, 3, dim=64, seed=3)
    with Gallery.create(folder, load_card(model)) as gallery:
        gallery.add(vectors, [ItemMeta(label, source=f"photos/{n}.jpg") for n, label in enumerate(labels)])
    return folder


def invoke(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


def test_scene_options_are_checked_before_anything_runs(tmp_path: Path, model: Path) -> None:
    gallery = gallery_of(tmp_path / "g", model)
    for args, message in (
        (("--frames", "0:10"), "describe a --scene video"),
        (("--scene", "clip.avi"), "--scene needs --model"),
        (("--scene", "clip.avi", "--model", model, "--frames", "9:3"), "--frames '9:3': give A:B"),
        (("--scene", tmp_path / "missing.avi", "--model", model), "missing.avi: no such file"),
    ):
        code, out = invoke("gallery", "calibrate", gallery, "--far", "0.05", *args)
        assert code == 1 and message in out and "Traceback" not in out, out
    assert Gallery.open(gallery).calibration is None


@pytest.mark.slow
def test_scene_calibration_runs_the_query_stream_over_a_real_video(
    tmp_path: Path, model: Path, pedestrian_video: Path
) -> None:
    gallery = gallery_of(tmp_path / "g", model)
    code, out = invoke(
        "gallery", "calibrate", gallery, "--far", "0.05", "--scene", pedestrian_video, "--frames", "0:30",
        "--model", model, "--detector", "hog", "--json",
    )  # fmt: skip
    assert code == 0, out
    stored = Gallery.open(gallery).calibration
    assert stored is not None and stored.scene is not None
    assert stored.scene.frames == "0:30" and stored.scene.tracks >= 2 and stored.scene.pairs >= 1
    assert stored.threshold == min(stored.identities_threshold, stored.scene.threshold)
    assert json.loads(out[out.index("{") :])["scene"]["pairs"] == stored.scene.pairs


def test_tracks_boxed_over_one_person_in_every_shared_frame_are_no_pair() -> None:
    # A track going on over a person a new track has taken: the same box in each frame both
    # have, so perhaps one person; two people crossing overlap in some shared frames only.
    frames = np.arange(10, 16)
    box = np.tile([100.0, 50.0, 40.0, 100.0], (len(frames), 1))
    going_on = SceneTrack(frames, on_circle(0.0), box)
    taken_over = SceneTrack(frames, on_circle(0.2), box + [2, 1, 0, 0])
    crossing = box.copy()
    crossing[:3, 0] += 80  # apart in three of the six frames
    passer_by = SceneTrack(frames, on_circle(1.0), crossing)
    distances = scene_impostor_distances([going_on, taken_over, passer_by])
    np.testing.assert_allclose(np.sort(distances), [2 * math.sin(0.4), 2 * math.sin(0.5)], atol=1e-6)
    # Without boxes nothing tells the one person from two: every pair counts.
    unboxed = [SceneTrack(t.frames, t.embedding) for t in (going_on, taken_over, passer_by)]
    assert scene_impostor_distances(unboxed).size == 3
    assert scene_impostor_distances([going_on, taken_over, passer_by], same_box_iou=1.01).size == 3
