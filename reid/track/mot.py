"""MOTChallenge text files: tracker output, ground truth and public detections.

One box per line, ``frame,id,x,y,w,h,score,...`` (Milan et al., "MOT16: A Benchmark for
Multi-Object Tracking", 2016): ``frame`` counts from 1, ``id`` is the track (-1 in a
detection file), ``x, y`` is the box's top-left corner and ``w, h`` its size in pixels of
the full frame, ``score`` is the detector's confidence (in ground truth: 1 to score the box,
0 to ignore it).  Columns after the seventh (class, visibility, world coordinates) are
read past.  Written files carry ``-1,-1,-1`` there, as the benchmark's own tracker output
does.

Reading is bounded: a file over :data:`MAX_MOT_BYTES` or a line over
:data:`MAX_LINE_CHARS` is refused before it is parsed, and every malformed line raises a
:class:`reid.errors.DataError` naming the file and the line number.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from scipy.optimize import linear_sum_assignment

from reid.detect import Box
from reid.errors import ConfigError, DataError
from reid.paths import write_bytes_atomic
from reid.track.tracker import Observation, Track, Tracker, TrackerConfig

# A 30 fps hour with 100 boxes a frame is about 700 MB of text; this is room for hours of
# a busy scene while never reading an arbitrary file whole into memory.
MAX_MOT_BYTES = 1024 * 1024 * 1024
# A line of ten numbers is under 100 characters; anything far longer is not a MOT file.
MAX_LINE_CHARS = 1000
FIELDS = ("frame", "id", "x", "y", "w", "h", "score")
# Joining tracklets offline (:func:`link_tracklets`): StrongSORT's AFLink window (Du et
# al. 2023, ``thrS``: 75 pixels between one's last box and the next one's first) and
# DeepSORT's largest cosine distance between the same person's embeddings (0.2).
LINK_PIXELS = 75.0
LINK_COSINE = 0.2


@dataclass(frozen=True)
class MotRow:
    """One box: ``frame`` (1-based), track ``id`` (-1: none), ``box`` (x, y, width, height
    in pixels, floats) and ``score``."""

    frame: int
    id: int
    box: tuple[float, float, float, float]
    score: float

    def line(self) -> str:
        """The row as one MOTChallenge line (no newline)."""
        values = ",".join(_number(v) for v in self.box)
        return f"{self.frame},{self.id},{values},{_number(self.score)},-1,-1,-1"


def _number(value: float) -> str:
    """Integers without a decimal point, others to three decimals (a thousandth of a pixel)."""
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}".rstrip("0")


def read_mot(path: Path) -> list[MotRow]:
    """The rows of the MOTChallenge file ``path``, in file order.

    Blank lines are skipped.  Raises DataError naming the file (and the line) when the file
    is missing, too large, not text, or a line has fewer than seven fields, a field that
    is not a finite number, a frame below 1, a non-integer frame or id, or a box without
    area.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as error:
        raise DataError(f"{path}: cannot read MOT file ({error.strerror or error})") from None
    if not path.is_file():
        raise DataError(f"{path}: not a MOT file (not a regular file)")
    if size > MAX_MOT_BYTES:
        raise DataError(f"{path}: MOT file of {size} bytes is over the {MAX_MOT_BYTES}-byte limit")
    rows: list[MotRow] = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(iter(lambda: handle.readline(MAX_LINE_CHARS + 1), ""), start=1):
                if len(line) > MAX_LINE_CHARS:
                    raise DataError(f"{path} line {number}: longer than {MAX_LINE_CHARS} characters")
                if line.strip():
                    rows.append(_parse(path, number, line))
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a MOT text file (not UTF-8 text)") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read MOT file ({error.strerror or error})") from None
    return rows


def _parse(path: Path, number: int, line: str) -> MotRow:
    fields = [f.strip() for f in line.split(",")]
    if len(fields) < len(FIELDS):
        raise DataError(
            f"{path} line {number}: {len(fields)} fields, a MOT line needs at least {len(FIELDS)} "
            f"({','.join(FIELDS)})"
        )
    values = []
    for name, text in zip(FIELDS, fields, strict=False):
        try:
            value = float(text)
        except ValueError:
            raise DataError(f"{path} line {number}: {name} {text[:40]!r} is not a number") from None
        if not math.isfinite(value):
            raise DataError(f"{path} line {number}: {name} {text[:40]!r} is not a finite number")
        values.append(value)
    frame, track, x, y, w, h, score = values
    if not frame.is_integer() or frame < 1:
        raise DataError(f"{path} line {number}: frame {fields[0][:40]!r} must be a whole number from 1")
    if not track.is_integer():
        raise DataError(f"{path} line {number}: id {fields[1][:40]!r} must be a whole number")
    if w <= 0 or h <= 0:
        raise DataError(f"{path} line {number}: box {fields[4][:20]}x{fields[5][:20]} has no area")
    return MotRow(int(frame), int(track), (x, y, w, h), score)


def write_mot(path: Path, rows: Iterable[MotRow]) -> int:
    """Write ``rows`` to ``path`` sorted by frame then id, atomically; returns the count."""
    ordered = sorted(rows, key=lambda r: (r.frame, r.id))
    payload = "".join(r.line() + "\n" for r in ordered)
    write_bytes_atomic(Path(path), payload.encode("utf-8"))
    return len(ordered)


def by_frame(rows: Iterable[MotRow]) -> dict[int, list[MotRow]]:
    """Rows grouped by frame number, each group in file order."""
    frames: dict[int, list[MotRow]] = defaultdict(list)
    for row in rows:
        frames[row.frame].append(row)
    return dict(frames)


def interpolate(rows: Iterable[MotRow], max_gap: int) -> list[MotRow]:
    """``rows`` with the boxes missing from short gaps of each track filled in.

    Where track ``id`` (not -1) is seen in frames ``a`` and ``b`` with ``1 < b - a <=
    max_gap + 1`` and in none between, each frame between gets a box interpolated linearly
    from the two (ByteTrack's post-processing, Zhang et al. 2022, §4.1), with the lower of
    their two scores.  Rows of id -1 come back as they are.
    """
    rows = list(rows)
    tracks: dict[int, list[MotRow]] = defaultdict(list)
    for row in rows:
        if row.id != -1:
            tracks[row.id].append(row)
    filled = list(rows)
    for seen in tracks.values():
        seen.sort(key=lambda r: r.frame)
        for before, after in zip(seen, seen[1:], strict=False):
            gap = after.frame - before.frame
            if not 1 < gap <= max_gap + 1:
                continue
            score = min(before.score, after.score)
            for step in range(1, gap):
                t = step / gap
                box = tuple(a + t * (b - a) for a, b in zip(before.box, after.box, strict=True))
                filled.append(MotRow(before.frame + step, before.id, box, score))  # type: ignore[arg-type]
    return filled


def track_rows(
    rows: Iterable[MotRow],
    tracker: Tracker,
    embeddings: np.ndarray | None = None,
    ended: list[Track] | None = None,
) -> list[MotRow]:
    """Link a detection file's rows into tracks with ``tracker``, frame by frame.

    Frame numbers are the tracker's steps, so a frame without detections still counts as
    one.  ``embeddings``: (len(rows), D) float32, row i's unit embedding (zeros: none), in
    the order of ``rows``.  Returns one row per detection a track took, with the
    detection's own box and score and the track's id, for tracks with at least
    ``tracker.config.min_boxes`` boxes; the ids of ``rows`` are ignored.  Boxes are rounded
    to pixels for linking only.  ``ended``, when given, receives the reported tracks.
    Raises ConfigError when ``embeddings`` has another length.
    """
    rows = list(rows)
    if embeddings is not None and len(embeddings) != len(rows):
        raise ConfigError(f"{len(embeddings)} embeddings for {len(rows)} detections")
    frames: dict[int, list[int]] = defaultdict(list)
    for position, row in enumerate(rows):
        frames[row.frame].append(position)
    linked: list[tuple[MotRow, Track]] = []
    for frame in range(1, max(frames, default=0) + 1):
        here = [rows[p] for p in frames.get(frame, [])]
        observations = [Observation(frame, None, pixel_box(r.box), r.score) for r in here]
        features = None if embeddings is None else embeddings[frames.get(frame, [])]
        for row, track in zip(here, tracker.update(frame, observations, embeddings=features), strict=True):
            if track is not None:
                linked.append((row, track))
    finished = tracker.finish()
    if ended is not None:
        ended.extend(finished)
    least = tracker.config.min_boxes
    kept = {id(t) for _, t in linked if len(t.observations) >= least}
    return [MotRow(r.frame, t.id, r.box, r.score) for r, t in linked if id(t) in kept]


def track_looks(tracks: Iterable[Track]) -> dict[int, np.ndarray]:
    """Each track's (D,) float32 unit mean embedding by track id, for :func:`link_tracklets`;
    tracks without embeddings are left out."""
    return {t.id: t.embedding for t in tracks if t.embedding_sum is not None}


def link_tracklets(
    rows: Iterable[MotRow], looks: Mapping[int, np.ndarray], max_gap: int, cosine: float = LINK_COSINE
) -> list[MotRow]:
    """``rows`` with the ids of tracklets that continue one another made one.

    Tracklet B continues tracklet A when B starts after A ends, at most ``max_gap`` frames
    later, B's first box centre is at most :data:`LINK_PIXELS` from A's last, and the
    cosine distance between their mean embeddings (``looks``: (D,) unit vectors by track
    id, :func:`track_looks`; a track without one is never joined) is at most ``cosine``: StrongSORT's AFLink window (Du et
    al. 2023: a gap of at most 30 frames, which :func:`track_detection_file` takes as the
    tracker's lost time, 1 s at 30 fps; 75 pixels) with DeepSORT's appearance threshold
    (Wojke et al. 2017: 0.2).  Each tracklet continues at most one and is continued by at
    most one, chosen by one optimal assignment on the cosine distance; chains of joined
    tracklets take the id of their first.  Row order is kept.
    """
    rows = list(rows)
    spans: dict[int, tuple[MotRow, MotRow]] = {}
    for row in rows:
        first, last = spans.get(row.id, (row, row))
        spans[row.id] = (row if row.frame < first.frame else first, row if row.frame > last.frame else last)
    ids = sorted(i for i in looks if i in spans)
    if len(ids) < 2:
        return rows
    means = np.stack([looks[i] for i in ids])
    distance = 1.0 - means @ means.T
    blocked = 10.0
    cost = np.full((len(ids), len(ids)), blocked)
    for a, before in enumerate(ids):
        end = spans[before][1]
        for b, after in enumerate(ids):
            start = spans[after][0]
            gap = start.frame - end.frame
            if 0 < gap <= max_gap and distance[a, b] <= cosine and _centre_distance(end.box, start.box) <= LINK_PIXELS:
                cost[a, b] = distance[a, b]
    chosen, taken = linear_sum_assignment(cost)
    successor = {ids[a]: ids[b] for a, b in zip(chosen, taken, strict=True) if cost[a, b] < blocked}
    heads = set(successor) - set(successor.values())
    renamed: dict[int, int] = {}
    for head in heads:
        follower = successor.get(head)
        while follower is not None:
            renamed[follower] = head
            follower = successor.get(follower)
    return [MotRow(r.frame, renamed.get(r.id, r.id), r.box, r.score) for r in rows]


def _centre_distance(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    return math.hypot(a[0] + a[2] / 2 - b[0] - b[2] / 2, a[1] + a[3] / 2 - b[1] - b[3] / 2)


def pixel_box(box: tuple[float, float, float, float]) -> Box:
    """A MOT row's float box rounded to whole pixels, at least 1 x 1."""
    x, y, w, h = box
    return (round(x), round(y), max(1, round(w)), max(1, round(h)))


class Appearance(Protocol):
    """What embeds a detection file's boxes (:class:`reid.track.appearance.VideoAppearance`)."""

    embedded: int

    def embed(self, rows: list[MotRow]) -> np.ndarray:
        """(len(rows), D) float32 unit rows, zeros for a box without an embedding."""
        ...


@dataclass(frozen=True)
class TrackedFile:
    """What :func:`track_detection_file` did: detections read, frames, boxes written,
    tracks made, and detections embedded (0 without appearance)."""

    detections: int
    frames: int
    boxes: int
    tracks: int
    embedded: int = 0


def track_detection_file(
    detections: Path,
    out: Path,
    config: TrackerConfig | None = None,
    fps: float | None = None,
    appearance: Appearance | None = None,
    link: bool | None = None,
) -> TrackedFile:
    """Track the MOT detection file ``detections`` and write the tracks to ``out`` in MOT
    format, with the gaps each track bridged filled by :func:`interpolate`.

    ``fps``: the detections' frame rate (None: :data:`reid.track.tracker.REFERENCE_FPS`),
    which turns the tracker's ``lost_seconds`` into frames.  ``appearance`` (None: boxes
    alone) embeds each detection for the tracker's appearance terms.  ``link`` joins
    tracklets that continue one another (:func:`link_tracklets`, within the tracker's
    lost time) before gaps are filled; None: when there is appearance.  Raises DataError
    for a malformed file or video (nothing is written).
    """
    rows = read_mot(detections)
    embeddings = None if appearance is None else appearance.embed(rows)
    tracker = Tracker(0, config, fps)
    ended: list[Track] = []
    tracked = track_rows(rows, tracker, embeddings, ended)
    if link or (link is None and appearance is not None):
        tracked = link_tracklets(tracked, track_looks(ended), tracker.max_lost)
    tracked = interpolate(tracked, tracker.max_lost)
    count = write_mot(out, tracked)
    return TrackedFile(
        len(rows),
        max((r.frame for r in rows), default=0),
        count,
        len({r.id for r in tracked}),
        0 if appearance is None else appearance.embedded,
    )
