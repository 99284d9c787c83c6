"""Labels on pictures: inside the frame, never over one another, sized to the frame, a
colour per track, named and unknown told apart; the crowded frames are written as PNGs
(into $REID_DRAW_PICTURES when set, else the test's own folder) for a person to look at."""

from __future__ import annotations

import os
from itertools import combinations
from pathlib import Path

import cv2
import numpy as np
import pytest

from reid.draw import (
    MAX_NAME_CHARS,
    PALETTE,
    UNKNOWN_FILL,
    Label,
    Style,
    Trails,
    caption,
    colour_of,
    draw_labels,
    label_layout,
    label_texts,
    make_label,
    place_labels,
)

SIZES = [(120, 160), (576, 768), (1080, 1920)]  # (height, width)


def crowd(height: int, width: int, seed: int = 0) -> list[Label]:
    """30 people overlapping in the middle, and one at each edge's middle and each corner,
    some named, some unknown, all tracked with distances."""
    rng = np.random.default_rng(seed)
    boxes = []
    for _ in range(30):
        w, h = int(width * rng.uniform(0.05, 0.12)), int(height * rng.uniform(0.2, 0.4))
        boxes.append((int(rng.uniform(0.3, 0.6) * width), int(rng.uniform(0.3, 0.5) * height), w, h))
    w, h = width // 10, height // 4
    boxes += [(x, y, w, h) for x in (0, (width - w) // 2, width - w) for y in (0, (height - h) // 2, height - h)]
    return [
        make_label(box, 100 + n, None if n % 3 else f"person{n}", float(rng.uniform(0, 2))) for n, box in enumerate(boxes)
    ]


def overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def pictures(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("REID_DRAW_PICTURES") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize(("height", "width"), SIZES)
def test_crowded_labels_stay_inside_the_frame_and_never_overlap(height: int, width: int, tmp_path: Path) -> None:
    labels = crowd(height, width)
    canvas = np.zeros((height, width, 3), np.uint8)
    placed = draw_labels(canvas, labels)
    cv2.imwrite(str(pictures(tmp_path) / f"crowd_{width}x{height}.png"), canvas)
    rects = [p.rect for p in placed if p is not None]
    assert all(x >= 0 and y >= 0 and x + w <= width and y + h <= height for x, y, w, h in rects)
    assert not [(a, b) for a, b in combinations(rects, 2) if overlap(a, b)]
    # Every label kept is one of its own texts; on a frame of normal size most are kept,
    # and at full length.
    assert all(p is None or p.text in label.texts for p, label in zip(placed, labels))
    if height >= 576:
        assert sum(p is not None for p in placed) >= 0.8 * len(labels)
        assert sum(p is not None and p.text == label.texts[0] for p, label in zip(placed, labels)) >= 0.6 * len(labels)


def test_labels_on_the_tiny_frame_are_shortened_before_left_out() -> None:
    labels = crowd(120, 160)
    placed = place_labels(labels, (120, 160), Style.for_frame(120))
    kept = [p for p in placed if p is not None]
    assert len(kept) >= 9, "each corner and edge keeps a label at least"
    assert any(p.text != label.texts[0] for p, label in zip(placed, labels) if p is not None), "some are shortened"


def test_a_label_goes_above_its_box_when_there_is_room_else_inside_or_below() -> None:
    style = Style.for_frame(576)
    [above] = place_labels([make_label((300, 200, 60, 150), 1, "ann", 0.5)], (576, 768), style)
    assert above is not None and above.rect[1] + above.rect[3] == 200 and above.rect[0] == 300
    [top] = place_labels([make_label((300, 0, 60, 150), 1, "ann", 0.5)], (576, 768), style)
    assert top is not None and top.rect[1] == 0
    # A box filling the frame's top-right corner: the label is moved left to stay inside.
    [corner] = place_labels([make_label((740, 0, 28, 60), 2, None, 1.0)], (576, 768), style)
    assert corner is not None and corner.rect[0] + corner.rect[2] == 768


def test_a_label_wider_than_the_frame_is_shortened_or_left_out() -> None:
    style = Style.for_frame(40)
    [short] = place_labels([make_label((0, 0, 20, 30), 7, "someone", 0.5)], (40, 40), style)
    assert short is not None and short.text == "#7"
    [gone] = place_labels([make_label((0, 0, 4, 4), None, "x" * 40, None)], (8, 8), style)
    assert gone is None


def test_letters_grow_with_the_frame() -> None:
    styles = [Style.for_frame(h) for h, _ in SIZES]
    heights = [s.label_size("#12 unknown 0.83")[1] for s in styles]
    assert heights == sorted(heights) and heights[0] < heights[-1]
    # A label stays a small share of a big frame and legible on a tiny one.
    assert heights[-1] < 1080 * 0.05 and styles[0].text_px >= 7
    assert styles[-1].label_size("#12 unknown 0.83")[0] < 1920 * 0.2


def test_colours_follow_tracks_and_tell_named_from_unknown() -> None:
    assert colour_of(3, "ann") == colour_of(3, None) == PALETTE[3]
    assert len({colour_of(t, None) for t in range(len(PALETTE))}) == len(PALETTE)
    assert colour_of(None, "ann") == colour_of(None, "ann") != colour_of(None, None)
    style = Style.for_frame(576)
    named, unknown = np.zeros((576, 768, 3), np.uint8), np.zeros((576, 768, 3), np.uint8)
    [p] = draw_labels(named, [make_label((300, 200, 60, 150), 4, "ann", 0.5)], style)
    [q] = draw_labels(unknown, [make_label((300, 200, 60, 150), 4, None, 0.5)], style)
    assert p is not None and q is not None
    # The middle of a label's left margin: the fill, the track's colour when named.
    x, y, _, h = p.rect
    assert tuple(named[y + h // 2, x + 1]) == PALETTE[4]
    x, y, _, h = q.rect
    assert tuple(unknown[y + h // 2, x + 1]) == UNKNOWN_FILL


def test_label_texts_are_short_with_fixed_decimals() -> None:
    assert label_texts(12, "ann", 0.8349) == ("#12 ann 0.83", "#12 ann", "#12")
    assert label_texts(None, None, float("nan")) == ("unknown",)
    assert label_texts(3, None, None) == ("#3 unknown", "#3")
    long = label_texts(1, "x" * 100, 1.0)[0]
    assert len(long) == len("#1 ") + MAX_NAME_CHARS + len(" 1.00")


def test_non_ascii_names_are_measured_as_drawn() -> None:
    style = Style.for_frame(576)
    assert style.label_size("#1 Zoë") == style.label_size("#1 Zo?")


def test_the_page_gets_the_same_placements() -> None:
    labels = crowd(576, 768)
    layout = label_layout(labels, (576, 768))
    placed = place_labels(labels, (576, 768), Style.for_frame(576))
    assert [None if item is None else (item["text"], tuple(item["rect"])) for item in layout] == [
        None if p is None else (p.text, p.rect) for p in placed
    ]
    item = next(item for item in layout if item is not None)
    assert str(item["colour"]).startswith("#") and len(str(item["colour"])) == 7


def test_trails_keep_the_last_centres_and_forget_gone_tracks(tmp_path: Path) -> None:
    trails = Trails(3)
    for n in range(5):
        trails.update([(1, (10 * n, 0, 10, 10)), *([(2, (0, 10 * n, 10, 10))] if n == 0 else [])])
    assert trails.points(1) == [(25, 5), (35, 5), (45, 5)]
    assert trails.points(2) == [], "unseen for 3 frames"
    canvas = np.zeros((60, 80, 3), np.uint8)
    trails.draw(canvas)
    # Drawn antialiased: the line's middle is near the track's colour; track 2 left nothing.
    assert np.abs(canvas[5, 30].astype(int) - colour_of(1, None)).max() < 64
    assert canvas[15:].max() == 0
    with pytest.raises(ValueError, match="at least 1"):
        Trails(0)


def test_captions_fit_their_width() -> None:
    strip = caption("a caption far too long for the cell", 64, Style.for_frame(128))
    assert strip.shape[1] == 64 and strip[:, -2:].min() == 255, "the text is cut before the edge"
