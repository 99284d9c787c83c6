"""The tracked-detection stream: its link and choose steps (``--embed-every``) on built
frames, the tracker it builds for a detector, and the whole stream on a video."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pipeline_helpers import WalkerAndStray, street_with_gallery

from reid.detect import Detection
from reid.errors import ConfigError
from reid.models import Encoder, embed_images, l2_normalize
from reid.pipeline import FrameCrops, open_source
from reid.pipeline.sources import Frame
from reid.pipeline.stream import (
    DetectionStream,
    StreamConfig,
    choose_to_embed,
    link_frame,
    sightings_of,
    tracker_for,
)
from reid.track import Tracker, TrackerConfig


def built_frame(index: int, people: list[tuple[int, float]]) -> FrameCrops:
    """A frame with one 40x100 box (and an 8x4 crop) per (x, score) pair."""
    image = np.zeros((200, 600, 3), np.uint8)
    frame = Frame("street.avi", index, index / 10, image)
    boxes = [(x, 50, 40, 100) for x, _ in people]
    crops = [np.full((8, 4, 3), n, np.uint8) for n in range(len(people))]
    return FrameCrops(frame, crops, boxes, [score for _, score in people])


def test_every_third_box_of_each_track_is_chosen_and_weak_strays_are_not_sightings() -> None:
    tracker = Tracker(0, TrackerConfig(high_score=0.5, min_boxes=1), fps=10)
    frames = []
    for index in range(7):
        people = [(10 + 4 * index, 0.9)]
        if index >= 2:
            people.append((300 - 4 * index, 0.9))  # a second person enters in frame 2
        if index == 4:
            people.append((550, 0.2))  # a weak box no track takes
        sightings, _ = link_frame(tracker, index, sightings_of(built_frame(index, people)))
        frames.append(sightings)
    assert [len(s) for s in frames] == [1, 1, 2, 2, 2, 2, 2], "the weak stray is no sighting"
    chosen = choose_to_embed(frames, every=3)
    by_track: dict[int, list[int]] = {}
    for s in chosen:
        assert s.track is not None
        by_track.setdefault(s.track.id, []).append(s.frame.index)
    assert by_track == {1: [0, 3, 6], 2: [2, 5]}
    assert all(s.nth % 3 == 0 for s in chosen)
    assert [s.name for s in frames[4]] == ["street.avi frame 4 crop 0", "street.avi frame 4 crop 1"]


def test_a_track_whose_embedding_failed_has_its_next_box_chosen() -> None:
    tracker = Tracker(0, TrackerConfig(min_boxes=1), fps=10)
    first = [link_frame(tracker, i, sightings_of(built_frame(i, [(10 + 4 * i, 0.9)])))[0] for i in range(2)]
    assert [s.frame.index for s in choose_to_embed(first, every=4)] == [0]
    # The crop chosen in frame 0 failed to embed: the track still has no embedding, so the
    # first of its next boxes is chosen although it is not one in four.
    later = [link_frame(tracker, i, sightings_of(built_frame(i, [(10 + 4 * i, 0.9)])))[0] for i in range(2, 4)]
    assert [s.frame.index for s in choose_to_embed(later, every=4)] == [2]
    track = later[0][0].track
    assert track is not None
    track.add_embedding(np.array([1.0, 0.0], np.float32))
    assert choose_to_embed(later, every=4) == []
    assert choose_to_embed(later, every=1) == [later[0][0], later[1][0]]
    with pytest.raises(ConfigError, match="street.avi frame 0 crop 0: only linked sightings"):
        choose_to_embed([sightings_of(built_frame(0, [(10, 0.9)]))], every=1)


class Scored:
    kind = "person"

    def __init__(self, confident_score: float | None) -> None:
        self.confident_score = confident_score

    def detect(self, image: np.ndarray) -> list[Detection]:
        return []


def test_the_tracker_takes_the_detectors_confident_score_unless_told() -> None:
    assert tracker_for(Scored(None), TrackerConfig()).config.high_score is None
    # A detector whose every box is sure (min_score 0): the tracker counts every box confident.
    assert tracker_for(Scored(0.0), TrackerConfig()).config.high_score is None
    tracker = tracker_for(Scored(0.6), TrackerConfig(), camera=3)
    assert tracker.config.high_score == 0.6 and tracker.camera == 3
    told = tracker_for(Scored(0.6), TrackerConfig(high_score=0.8, lost_seconds=2.0), fps=5)
    assert told.config.high_score == 0.8 and told.max_lost == 10


def test_stream_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="^embed_every: input should be greater than or equal to 1"):
        StreamConfig(embed_every=0)
    with pytest.raises(ConfigError, match="^batch_size: input should be greater than or equal to 1"):
        StreamConfig(batch_size=0)
    with pytest.raises(ConfigError, match="^no_face: input should be 'whole', 'skip' or 'error'"):
        StreamConfig(no_face="maybe")


@pytest.mark.parametrize("threaded", [True, False])
def test_embedded_first_the_tracker_links_by_appearance_and_every_crop_is_embedded(
    tmp_path: Path, encoder: Encoder, threaded: bool
) -> None:
    video, _ = street_with_gallery(tmp_path, encoder, "street.mp4", count=7, fps=10)
    stream = DetectionStream(
        open_source(video), WalkerAndStray(), encoder,
        StreamConfig(batch_size=4, tracker=TrackerConfig(min_boxes=1), embed_every=1),
        threaded=threaded,
    )  # fmt: skip
    frames = list(stream)
    assert stream.tracker is not None and stream.tracker.config.high_score == 0.5
    assert [len(f.sightings) for f in frames] == [1] * 7, "the stray weak box makes no sighting"
    assert stream.embedded == 14, "both boxes of every frame are embedded before linking"
    (track,) = {id(s.track): s.track for f in frames for s in f.sightings}.values()
    assert track is not None and len(track.observations) == 7
    own = np.stack([s.embedding for f in frames for s in f.sightings])
    # Each sighting is searched with its track's mean up to its frame.
    for n, sighting in enumerate(s for f in frames for s in f.sightings):
        expected = l2_normalize(own[: n + 1].mean(axis=0, keepdims=True))[0]
        assert sighting.query is not None and np.allclose(sighting.query, expected, atol=1e-5)
    assert set(stream.timing) == {"decode", "detect", "embed", "track", "search"} and stream.timing["embed"] > 0
    assert [t.id for t in stream.finish()] == [1]


def test_sampled_the_stream_links_first_and_embeds_one_in_n_of_a_tracks_crops(
    tmp_path: Path, encoder: Encoder
) -> None:
    video, _ = street_with_gallery(tmp_path, encoder, "street.mp4", count=7, fps=10)
    config = StreamConfig(batch_size=3, embed_every=3, tracker=TrackerConfig(min_boxes=1))
    stream = DetectionStream(open_source(video), WalkerAndStray(), encoder, config)
    frames = list(stream)
    sightings = [s for f in frames for s in f.sightings]
    assert [s.nth for s in sightings] == list(range(7))
    embedded = [s for s in sightings if s.embedding is not None]
    assert [s.nth for s in embedded] == [0, 3, 6] and stream.embedded == 3
    again = embed_images(encoder, [s.crop for s in embedded], ["0", "3", "6"]).features
    assert np.allclose(np.stack([s.embedding for s in embedded]), again, atol=1e-5)
    # Frames 0-2 are answered by crop 0, 3-5 by the mean of crops 0 and 3, frame 6 by all three.
    for s in sightings:
        upto = again[: s.nth // 3 + 1]
        assert s.query is not None and np.allclose(s.query, l2_normalize(upto.mean(axis=0, keepdims=True))[0], atol=1e-5)


def test_untracked_only_confident_boxes_come_each_searched_alone(tmp_path: Path, encoder: Encoder) -> None:
    video, _ = street_with_gallery(tmp_path, encoder, "street.mp4", count=7, fps=10)
    # embed_every samples tracks (2 by default); with none, every crop is embedded.
    stream = DetectionStream(open_source(video), WalkerAndStray(), encoder, StreamConfig(track=False, embed_every=2))
    frames = list(stream)
    assert stream.tracker is None and stream.finish() == []
    assert stream.embedded == 4, "untracked, each confident crop is embedded"
    assert [len(f.sightings) for f in frames] == [1] * 4 + [0] * 3, "no tracker: weak boxes are not cut"
    for s in (s for f in frames for s in f.sightings):
        assert s.track is None and s.query is s.embedding and s.score == pytest.approx(0.9)
