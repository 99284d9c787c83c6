"""Boxes and labels on pictures: one layout for the annotated video, the plots and the web page.

Letters are sized to the frame (:class:`Style`), so a label stays a small tag on a
1920x1080 frame and legible on a 160x120 one.  Each label is short (:func:`label_texts`:
``#<track> <identity or unknown> <distance>``), is placed by :func:`place_labels` entirely
inside the frame, above its box when there is room and else inside or below it, and never
over another label: a label that fits nowhere is shortened (distance, then identity
dropped) and, when even its track number fits nowhere, left out.  Colours follow the track
(:func:`colour_of`, a fixed palette indexed by track number), and a named subject's label
is filled with its colour while an unknown one's is dark with letters in its colour.
:class:`Trails` keeps and draws the last centres of each track.

Everything here works in pixels of the picture, colours in BGR (OpenCV's order); the web
page gets the same placements as data (:func:`label_layout`) and draws them itself.
"""

from __future__ import annotations

import functools
import zlib
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

Rect = tuple[int, int, int, int]  # x, y, width, height in pixels
BGR = tuple[int, int, int]

FONT = cv2.FONT_HERSHEY_SIMPLEX
# Height of a capital letter as a share of the frame's height, and the smallest that
# stays legible (pixels): 7 px on 160x120, 10 on 576 lines, 19 on 1080.
TEXT_SHARE = 0.018
MIN_TEXT_PX = 7
# Cap height of FONT at scale 1 (cv2.getTextSize("H", FONT, 1, 1) is 22 pixels high).
FONT_PX = 22
# Identities longer than this are cut, and end in CUT_MARK, before any other shortening.
MAX_NAME_CHARS = 16
CUT_MARK = ".."
# Colours of tracks (BGR), far apart in hue and light enough for black letters on them.
PALETTE: tuple[BGR, ...] = (
    (75, 180, 255),
    (255, 190, 60),
    (90, 220, 90),
    (200, 120, 255),
    (60, 230, 230),
    (255, 120, 160),
    (160, 255, 200),
    (120, 160, 255),
    (255, 230, 120),
    (180, 200, 80),
    (230, 160, 230),
    (100, 200, 255),
)
# An unknown subject's label: dark, its letters in its track's colour.
UNKNOWN_FILL: BGR = (30, 30, 30)
# A subject with no track and no identity.
UNTRACKED_UNKNOWN: BGR = (170, 170, 170)


@dataclass(frozen=True)
class Style:
    """Sizes for one frame height: ``scale`` and ``thickness`` of the letters (OpenCV's),
    ``text_px`` their cap height, ``pad`` the margin around them in a label, ``line`` the
    width of box lines, all in pixels."""

    scale: float
    thickness: int
    text_px: int
    pad: int
    line: int

    @classmethod
    def for_frame(cls, height: int) -> Style:
        """The style for a frame ``height`` pixels high (any width)."""
        text_px = max(MIN_TEXT_PX, round(height * TEXT_SHARE))
        return cls(
            scale=text_px / FONT_PX,
            thickness=1 if text_px < 18 else 2,
            text_px=text_px,
            pad=max(1, round(text_px * 0.3)),
            line=max(1, round(height / 360)),
        )

    @functools.cached_property
    def letters(self) -> tuple[int, int]:
        """(cap height, depth below the baseline) of the letters in pixels; one for every
        text, so that labels of one frame are of one height."""
        (_, height), base = cv2.getTextSize("H", FONT, self.scale, self.thickness)
        return height, base

    def origin(self, rect: Rect) -> tuple[int, int]:
        """Where the text of a label at ``rect`` starts: (x, y of its baseline) in pixels."""
        return rect[0] + self.pad, rect[1] + self.pad + self.letters[0]

    def label_size(self, text: str) -> tuple[int, int]:
        """(width, height) in pixels of the filled label holding ``text``."""
        (width, _), _ = cv2.getTextSize(drawable(text), FONT, self.scale, self.thickness)
        height, base = self.letters
        return width + 2 * self.pad, height + base + 2 * self.pad


@dataclass(frozen=True)
class Label:
    """What to draw for one subject: its ``box``, label ``texts`` from the fullest to the
    shortest (:func:`label_texts`), ``colour`` (BGR) and whether it is ``named``."""

    box: Rect
    texts: tuple[str, ...]
    colour: BGR
    named: bool


@dataclass(frozen=True)
class Placed:
    """Where a label went: the ``text`` kept and its filled ``rect`` in the frame."""

    text: str
    rect: Rect


def drawable(text: str) -> str:
    """``text`` as OpenCV's Hershey font can draw it: each character outside printable
    ASCII becomes ``?`` (OpenCV draws one ``?`` per UTF-8 byte, which would break widths)."""
    return "".join(ch if " " <= ch <= "~" else "?" for ch in text)


def label_texts(track: int | None, identity: str | None, distance: float | None) -> tuple[str, ...]:
    """Label texts from the fullest to the shortest: ``#12 alice 0.83``, ``#12 alice``,
    ``#12`` for a track; ``alice 0.83``, ``alice`` without one.  Identities longer than
    :data:`MAX_NAME_CHARS` are cut; ``distance`` (Euclidean, 0..2) has two decimals and is
    left out when None or not finite."""
    name = "unknown" if identity is None else identity
    if len(name) > MAX_NAME_CHARS:
        name = name[: MAX_NAME_CHARS - len(CUT_MARK)] + CUT_MARK
    head = [] if track is None else [f"#{track}"]
    texts = []
    if distance is not None and np.isfinite(distance):
        texts.append(" ".join([*head, name, f"{distance:.2f}"]))
    texts.append(" ".join([*head, name]))
    if head:
        texts.append(head[0])
    return tuple(texts)


def colour_of(track: int | None, identity: str | None) -> BGR:
    """BGR colour of a subject: its track's palette entry; without a track, its identity's
    (a CRC of the name, the same in every run); grey for an unknown subject without a track."""
    if track is not None:
        return PALETTE[track % len(PALETTE)]
    if identity is not None:
        return PALETTE[zlib.crc32(identity.encode("utf-8", "surrogatepass")) % len(PALETTE)]
    return UNTRACKED_UNKNOWN


def make_label(box: Sequence[int], track: int | None, identity: str | None, distance: float | None) -> Label:
    """The :class:`Label` of a subject at ``box`` (x, y, width, height)."""
    x, y, w, h = (int(v) for v in box)
    return Label((x, y, w, h), label_texts(track, identity, distance), colour_of(track, identity), identity is not None)


def _candidates(box: Rect, size: tuple[int, int], frame: tuple[int, int]) -> np.ndarray:
    """Top-left corners (K, 2) int64 for a label of ``size`` (w, h) by ``box`` in a ``frame``
    (h, w), best first, each moved inside the frame: rows above the box, inside its top,
    below it, inside its bottom, then stacked further above and below; in each row the
    label left-aligned with the box, right-aligned, centred, then beside it."""
    x, y, w, h = box
    lw, lh = size
    height, width = frame
    rows = [y - lh, y, y + h, y + h - lh, y - 2 * lh, y - 3 * lh, y + h + lh, y + h + 2 * lh, y + lh, y + 2 * lh]
    columns = [min(max(c, 0), width - lw) for c in (x, x + w - lw, x + (w - lw) // 2, x - lw, x + w)]
    return np.array([(c, min(max(r, 0), height - lh)) for r in rows for c in columns], np.int64)


def place_labels(labels: Sequence[Label], frame: tuple[int, int], style: Style) -> list[Placed | None]:
    """Where each label goes in a frame of ``frame`` (height, width) pixels, in the order
    of ``labels``; None for one left out.

    Greedy: named subjects first, then larger boxes first, each takes the first free
    position of :func:`_candidates` for its fullest text, then for each shorter text.  A
    placed label lies wholly inside the frame and overlaps no other placed label.
    """
    height, width = frame
    order = sorted(range(len(labels)), key=lambda i: (not labels[i].named, -labels[i].box[2] * labels[i].box[3], i))
    taken = np.zeros((0, 4), np.int64)  # x0, y0, x1, y1 of the labels placed so far
    placed: list[Placed | None] = [None] * len(labels)
    for i in order:
        for text in labels[i].texts:
            lw, lh = style.label_size(text)
            if lw > width or lh > height:
                continue
            corners = _candidates(labels[i].box, (lw, lh), frame)
            x0, y0 = corners[:, :1], corners[:, 1:]
            hits = (x0 < taken[:, 2]) & (taken[:, 0] < x0 + lw) & (y0 < taken[:, 3]) & (taken[:, 1] < y0 + lh)
            free = np.flatnonzero(~hits.any(axis=1))
            if free.size:
                cx, cy = (int(v) for v in corners[free[0]])
                taken = np.vstack([taken, [(cx, cy, cx + lw, cy + lh)]])
                placed[i] = Placed(text, (cx, cy, lw, lh))
                break
    return placed


def text_colour(fill: BGR) -> BGR:
    """Black or white, whichever reads better on ``fill`` (BGR)."""
    b, g, r = fill
    return (0, 0, 0) if 0.114 * b + 0.587 * g + 0.299 * r > 140 else (255, 255, 255)


def draw_label(canvas: np.ndarray, placed: Placed, colour: BGR, named: bool, style: Style) -> None:
    """One label on the BGR ``canvas``, in place: filled with ``colour`` when ``named``,
    else dark with a border and letters in ``colour``."""
    x, y, w, h = placed.rect
    fill = colour if named else UNKNOWN_FILL
    cv2.rectangle(canvas, (x, y), (x + w - 1, y + h - 1), fill, cv2.FILLED)
    if not named:
        cv2.rectangle(canvas, (x, y), (x + w - 1, y + h - 1), colour, 1)
    letters = text_colour(fill) if named else colour
    text, origin = drawable(placed.text), style.origin(placed.rect)
    cv2.putText(canvas, text, origin, FONT, style.scale, letters, style.thickness, cv2.LINE_AA)


def draw_labels(canvas: np.ndarray, labels: Sequence[Label], style: Style | None = None) -> list[Placed | None]:
    """Every label's box, then its placed text (:func:`place_labels`), on the BGR ``canvas``
    (H, W, 3) uint8, in place; boxes first so that no box line crosses a label.  ``style``
    defaults to the canvas height's.  Returns the placements, in the order of ``labels``."""
    style = style or Style.for_frame(canvas.shape[0])
    for label in labels:
        x, y, w, h = label.box
        cv2.rectangle(canvas, (x, y), (x + w, y + h), label.colour, style.line)
    placed = place_labels(labels, canvas.shape[:2], style)
    for label, where in zip(labels, placed):
        if where is not None:
            draw_label(canvas, where, label.colour, label.named, style)
    return placed


def hex_colour(colour: BGR) -> str:
    """``#rrggbb`` of a BGR colour, for the web page."""
    b, g, r = colour
    return f"#{r:02x}{g:02x}{b:02x}"


def label_layout(labels: Sequence[Label], frame: tuple[int, int]) -> list[dict[str, object] | None]:
    """The placements of :func:`place_labels` as JSON-ready dicts for a page that draws
    them itself: ``text``, ``rect`` [x, y, width, height], ``origin`` [x, y] where the
    text's baseline starts, ``font_px`` (cap height), ``line`` (width of box lines),
    ``colour`` (the subject's), ``fill`` and ``text_colour`` (``#rrggbb``); None for a
    label left out.  ``frame`` is (height, width) in pixels."""
    style = Style.for_frame(frame[0])
    out: list[dict[str, object] | None] = []
    for label, where in zip(labels, place_labels(labels, frame, style)):
        if where is None:
            out.append(None)
            continue
        fill = label.colour if label.named else UNKNOWN_FILL
        out.append({
            "text": where.text,
            "rect": list(where.rect),
            "origin": list(style.origin(where.rect)),
            "font_px": style.text_px,
            "line": style.line,
            "colour": hex_colour(label.colour),
            "fill": hex_colour(fill),
            "text_colour": hex_colour(text_colour(fill) if label.named else label.colour),
        })  # fmt: skip
    return out


def caption(text: str, width: int, style: Style, colour: BGR = (0, 0, 0), background: BGR = (255, 255, 255)) -> np.ndarray:
    """A strip ``width`` pixels wide holding ``text`` in ``style``, cut to fit the width:
    (h, width, 3) uint8, in the channel order of the colours given."""
    _, height = style.label_size(text)
    strip = np.full((height, width, 3), background, np.uint8)
    shown = drawable(text)
    while shown and style.label_size(shown)[0] > width:
        shown = shown[:-1]
    text_h, _ = style.letters
    cv2.putText(strip, shown, (style.pad, style.pad + text_h), FONT, style.scale, colour, style.thickness, cv2.LINE_AA)
    return strip


class Trails:
    """The last ``length`` centres of each track, drawn as a line behind its box.

    Call :meth:`update` once a frame with that frame's tracked boxes; a track unseen for
    ``length`` frames is forgotten.
    """

    def __init__(self, length: int) -> None:
        if length < 1:
            raise ValueError("trail length must be at least 1")
        self.length = length
        self._points: dict[int, deque[tuple[int, int]]] = {}
        self._seen: dict[int, int] = {}
        self._frame = 0

    def update(self, tracked: Iterable[tuple[int, Sequence[int]]]) -> None:
        """Add the centre of each (track, box) of this frame."""
        self._frame += 1
        for track, (x, y, w, h) in tracked:
            self._points.setdefault(track, deque(maxlen=self.length)).append((int(x + w // 2), int(y + h // 2)))
            self._seen[track] = self._frame
        for track in [t for t, seen in self._seen.items() if self._frame - seen >= self.length]:
            del self._points[track], self._seen[track]

    def points(self, track: int) -> list[tuple[int, int]]:
        """The kept centres of ``track``, oldest first (pixels)."""
        return list(self._points.get(track, ()))

    def draw(self, canvas: np.ndarray, style: Style | None = None) -> None:
        """Each track's centres joined by a line in its colour, on the BGR ``canvas``, in place."""
        style = style or Style.for_frame(canvas.shape[0])
        for track, points in self._points.items():
            if len(points) > 1:
                line = np.array(points, np.int32).reshape(-1, 1, 2)
                cv2.polylines(canvas, [line], False, colour_of(track, None), style.line, cv2.LINE_AA)
