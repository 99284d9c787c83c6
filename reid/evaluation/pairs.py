"""Labelled pair files: LFW's pairs.txt and a plain CSV ``path_a,path_b,label``.

LFW format: a header line ``SETS N`` (or just ``N`` for one set), then for each set N
matched lines ``name i j`` and N mismatched lines ``name1 i name2 j``; image i of a person
is ``ROOT/name/name_%04d.jpg``.  Set k is fold k of the 10-fold protocol.

CSV format: one pair per line, ``path_a,path_b,label`` with paths relative to the root and
label 1/0 (also true/false, same/different, yes/no); an optional header line.

Malformed lines raise DataError naming the file and the line number.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reid.errors import DataError
from reid.text import whole_number

TRUE_LABELS = {"1", "true", "same", "yes", "match", "genuine"}
FALSE_LABELS = {"0", "false", "different", "diff", "no", "mismatch", "impostor"}


@dataclass(frozen=True)
class Pair:
    a: Path
    b: Path
    same: bool
    line: int
    fold: int | None = None


@dataclass
class PairSet:
    """The pairs of one file; ``fold_ids`` is set when the file defines its folds."""

    source: Path
    root: Path
    format: str
    pairs: list[Pair]

    @property
    def fold_ids(self) -> np.ndarray | None:
        if any(p.fold is None for p in self.pairs):
            return None
        return np.array([p.fold for p in self.pairs], dtype=np.int64)

    @property
    def num_genuine(self) -> int:
        return sum(p.same for p in self.pairs)

    def image_paths(self) -> list[Path]:
        """Every distinct image of the set, sorted, so that each is embedded once."""
        return sorted({p.a for p in self.pairs} | {p.b for p in self.pairs})

    def describe(self) -> str:
        return (
            f"{self.source.name} ({self.format}, {len(self.pairs)} pairs: "
            f"{self.num_genuine} genuine, {len(self.pairs) - self.num_genuine} impostor)"
        )


def read_pairs(path: str | Path, root: str | Path) -> PairSet:
    """Read a pair file in LFW or CSV format (CSV when the first line holds a comma);
    image names resolve under ``root``.

    Raises:
        DataError: the file is missing, unreadable or malformed; one line naming the file
            (and the line).
    """
    path, root = Path(path), Path(root)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: pair file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read pair file ({exc})") from exc
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), None)
    if first is None:
        raise DataError(f"{path}: pair file is empty")
    if path.suffix.lower() == ".csv" or "," in first:
        pairs = _parse_csv(path, root, lines)
        kind = "csv"
    else:
        pairs = _parse_lfw(path, root, lines)
        kind = "lfw"
    if not pairs:
        raise DataError(f"{path}: no pairs found")
    return PairSet(path, root, kind, pairs)


def _parse_label(path: Path, number: int, text: str) -> bool:
    value = text.strip().lower()
    if value in TRUE_LABELS:
        return True
    if value in FALSE_LABELS:
        return False
    raise DataError(f"{path}:{number}: label {text.strip()!r} is not 1/0 (or true/false, same/different)")


def _parse_csv(path: Path, root: Path, lines: list[str]) -> list[Pair]:
    pairs: list[Pair] = []
    seen_content = False
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or all(not cell.strip() for cell in row):
            continue
        first_content = not seen_content
        seen_content = True
        if len(row) != 3:
            raise DataError(f"{path}:{number}: expected 3 fields 'path_a,path_b,label', found {len(row)}")
        a, b, label = (cell.strip() for cell in row)
        if first_content and label.lower() not in TRUE_LABELS | FALSE_LABELS:
            continue  # a header line
        if not a or not b:
            raise DataError(f"{path}:{number}: empty image path")
        pairs.append(Pair(root / a, root / b, _parse_label(path, number, label), number))
    return pairs


def _index(path: Path, number: int, token: str) -> int:
    value = whole_number(token, 1)
    if value is None:
        raise DataError(f"{path}:{number}: image number {token[:40]!r} is not a positive integer")
    return value


def lfw_image(root: Path, name: str, number: int) -> Path:
    return root / name / f"{name}_{number:04d}.jpg"


def _parse_lfw(path: Path, root: Path, lines: list[str]) -> list[Pair]:
    numbered = [(n, line.split()) for n, line in enumerate(lines, start=1) if line.strip()]
    header_line, header = numbered[0]
    if not 1 <= len(header) <= 2 or any(whole_number(t, 0) is None for t in header):
        raise DataError(
            f"{path}:{header_line}: expected the LFW header 'SETS PAIRS_PER_SET' (or a CSV 'path_a,path_b,label')"
        )
    sets, per_set = (1, int(header[0])) if len(header) == 1 else (int(header[0]), int(header[1]))
    if per_set < 1 or sets < 1:
        raise DataError(f"{path}:{header_line}: header announces no pairs")
    pairs: list[Pair] = []
    for index, (number, tokens) in enumerate(numbered[1:]):
        fold = index // (2 * per_set)
        if len(tokens) == 3:
            name = tokens[0]
            a, b = _index(path, number, tokens[1]), _index(path, number, tokens[2])
            pairs.append(Pair(lfw_image(root, name, a), lfw_image(root, name, b), True, number, fold))
        elif len(tokens) == 4:
            a, b = _index(path, number, tokens[1]), _index(path, number, tokens[3])
            pairs.append(Pair(lfw_image(root, tokens[0], a), lfw_image(root, tokens[2], b), False, number, fold))
        else:
            raise DataError(
                f"{path}:{number}: expected 'name i j' (matched) or 'name1 i name2 j' (mismatched), "
                f"found {len(tokens)} fields"
            )
    expected = sets * 2 * per_set
    if len(pairs) != expected:
        raise DataError(
            f"{path}:{header_line}: header announces {expected} pairs ({sets} x 2 x {per_set}), found {len(pairs)}"
        )
    return pairs
