"""MOTChallenge text files: reading and writing their rows, with nothing of the tracker.

One box per line, ``frame,id,x,y,w,h,score,...`` (Milan et al., "MOT16: A Benchmark for
Multi-Object Tracking", 2016): ``frame`` counts from 1, ``id`` is the track (-1 in a
detection file), ``x, y`` is the box's top-left corner and ``w, h`` its size in pixels of
the full frame, ``score`` is the detector's confidence (in ground truth: 1 to score the box,
0 to ignore it).  Columns after the seventh (class, visibility, world coordinates) are
read past.  Written files carry ``-1,-1,-1`` there, as the benchmark's own tracker output
does, and write every box and score with :data:`MOT_DECIMALS` decimals (:meth:`MotRow.line`,
the one formatting of a MOT row), so that a column reads the same on every line.

Reading is bounded: a file over :data:`MAX_MOT_BYTES` or a line over
:data:`MAX_LINE_CHARS` is refused before it is parsed, and every malformed line raises a
:class:`reid.errors.DataError` naming the file and the line number.

A light module (no tracker, detector or encoder): scoring a file of tracks
(:mod:`reid.evaluation.mot`, ``reid track --mot FILE --gt gt.txt``) reads it through this
alone; :mod:`reid.track.mot` tracks and re-exports these names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reid.errors import DataError
from reid.paths import write_bytes_atomic
from reid.text import real_number

# A 30 fps hour with 100 boxes a frame is about 700 MB of text; this is room for hours of
# a busy scene while never reading an arbitrary file whole into memory.
MAX_MOT_BYTES = 1024 * 1024 * 1024
# A line of ten numbers is under 100 characters; anything far longer is not a MOT file.
MAX_LINE_CHARS = 1000
FIELDS = ("frame", "id", "x", "y", "w", "h", "score")
# Decimals of every box coordinate and score written: a thousandth of a pixel, far below
# what moves an overlap, and the same on every line (frame and id are whole numbers).
MOT_DECIMALS = 3

@dataclass(frozen=True)
class MotRow:
    """One box: ``frame`` (1-based), track ``id`` (-1: none), ``box`` (x, y, width, height
    in pixels, floats) and ``score``."""

    frame: int
    id: int
    box: tuple[float, float, float, float]
    score: float

    def line(self) -> str:
        """The row as one MOTChallenge line (no newline): frame and id as whole numbers, box
        and score with :data:`MOT_DECIMALS` decimals, then ``-1,-1,-1``."""
        # Rounded first and 0.0 added, so that a value rounding to zero is never "-0.000".
        values = ",".join(f"{round(float(v), MOT_DECIMALS) + 0.0:.{MOT_DECIMALS}f}" for v in (*self.box, self.score))
        return f"{self.frame},{self.id},{values},-1,-1,-1"


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
        value = real_number(text)
        if value is None:
            kind = "a finite number" if text.lower().lstrip("+-") in ("nan", "inf", "infinity") else "a number"
            raise DataError(f"{path} line {number}: {name} {text[:40]!r} is not {kind}")
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
