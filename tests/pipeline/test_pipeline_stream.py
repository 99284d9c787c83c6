"""The tracked-detection stream's link and choose steps (``--embed-every``) on built frames."""

from __future__ import annotations

import numpy as np

from reid.pipeline import FrameCrops
from reid.pipeline.sources import Frame
from reid.pipeline.stream import choose_to_embed, link_frame
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
    frames, at = [], 0
    for index in range(7):
        people = [(10 + 4 * index, 0.9)]
        if index >= 2:
            people.append((300 - 4 * index, 0.9))  # a second person enters in frame 2
        if index == 4:
            people.append((550, 0.2))  # a weak box no track takes
        item = built_frame(index, people)
        sightings, _ = link_frame(tracker, index, item, at)
        frames.append(sightings)
        at += len(item.crops)
    assert [len(s) for s in frames] == [1, 1, 2, 2, 2, 2, 2], "the weak stray is no sighting"
    chosen = choose_to_embed(frames, every=3)
    by_track = {}
    for s in chosen:
        by_track.setdefault(s.track.id, []).append(s.frame.index)
    assert by_track == {1: [0, 3, 6], 2: [2, 5]}
    assert all(s.nth % 3 == 0 for s in chosen)
    assert [s.position for s in frames[4]] == [6, 7], "positions count the crops of every frame linked together"


def test_a_track_whose_embedding_failed_has_its_next_box_chosen() -> None:
    tracker = Tracker(0, TrackerConfig(min_boxes=1), fps=10)
    first = [link_frame(tracker, i, built_frame(i, [(10 + 4 * i, 0.9)]))[0] for i in range(2)]
    assert [s.frame.index for s in choose_to_embed(first, every=4)] == [0]
    # The crop chosen in frame 0 failed to embed: the track still has no embedding, so the
    # first of its next boxes is chosen although it is not one in four.
    later = [link_frame(tracker, i, built_frame(i, [(10 + 4 * i, 0.9)]))[0] for i in range(2, 4)]
    assert [s.frame.index for s in choose_to_embed(later, every=4)] == [2]
    later[0][0].track.add_embedding(np.array([1.0, 0.0], np.float32))
    assert choose_to_embed(later, every=4) == []
    assert choose_to_embed(later, every=1) == [later[0][0], later[1][0]]
