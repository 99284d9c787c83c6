"""Pair files: LFW's pairs.txt and CSV, with malformed lines rejected by line number."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.errors import DataError
from reid.evaluation import read_pairs

LFW = """2\t2
Abel_Pacheco\t1\t4
Akhmed_Zakayev\t1\t3
Abdel_Madi_Shabneh\t1\tDean_Barker\t1
Abdel_Madi_Shabneh\t1\tGiancarlo_Fisichella\t1
Ana_Isabel_Sanchez\t1\t2
Bob\t2\t3
Abdul_Majeed_Shobokshi\t1\tCharles_Cope\t1
Vince_Gill\t1\tZoe\t12
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_lfw_pairs(tmp_path):
    pair_set = read_pairs(write(tmp_path, "pairs.txt", LFW), tmp_path / "lfw")
    assert pair_set.format == "lfw"
    assert len(pair_set.pairs) == 8
    first, third, last = pair_set.pairs[0], pair_set.pairs[2], pair_set.pairs[-1]
    assert first.a == tmp_path / "lfw" / "Abel_Pacheco" / "Abel_Pacheco_0001.jpg"
    assert first.b == tmp_path / "lfw" / "Abel_Pacheco" / "Abel_Pacheco_0004.jpg"
    assert first.same and not third.same
    assert third.b == tmp_path / "lfw" / "Dean_Barker" / "Dean_Barker_0001.jpg"
    assert last.b.name == "Zoe_0012.jpg" and last.line == 9
    assert pair_set.fold_ids.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert pair_set.num_genuine == 4


def test_lfw_single_number_header(tmp_path):
    pair_set = read_pairs(write(tmp_path, "pairsDevTest.txt", "1\nA 1 2\nA 1 B 1\n"), tmp_path)
    assert [p.same for p in pair_set.pairs] == [True, False]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 1\nA 1 2\nA 1\n", r"pairs.txt:3: expected 'name i j'.*found 2 fields"),
        ("1 1\nA 1 2\nA 1 B\n", r"pairs.txt:3: image number 'B'"),
        ("1 1\nA 1 2\nA 1 B 1 extra\n", r"pairs.txt:3: .*found 5 fields"),
        ("1 1\nA x 2\nA 1 B 1\n", r"pairs.txt:2: image number 'x'"),
        ("1 1\nA 0 2\nA 1 B 1\n", r"pairs.txt:2: image number '0'"),
        ("ten 300\nA 1 2\n", r"pairs.txt:1: expected the LFW header"),
        ("1 2\nA 1 2\nA 1 B 1\n", r"pairs.txt:1: header announces 4 pairs .* found 2"),
    ],
)
def test_lfw_malformed(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        read_pairs(write(tmp_path, "pairs.txt", text), tmp_path)


def test_csv_pairs_with_header_and_blank_lines(tmp_path):
    text = "path_a,path_b,label\ns1/1.pgm,s1/2.pgm,1\n\ns1/1.pgm, s2/1.pgm ,0\ns3/1.pgm,s3/2.pgm,same\n"
    pair_set = read_pairs(write(tmp_path, "pairs.csv", text), tmp_path / "faces")
    assert pair_set.format == "csv"
    assert [p.same for p in pair_set.pairs] == [True, False, True]
    assert pair_set.pairs[1].b == tmp_path / "faces" / "s2" / "1.pgm"
    assert pair_set.pairs[1].line == 4
    assert pair_set.fold_ids is None


def test_csv_without_header(tmp_path):
    pair_set = read_pairs(write(tmp_path, "list.txt", "a.jpg,b.jpg,0\nc.jpg,d.jpg,1\n"), tmp_path)
    assert pair_set.format == "csv" and len(pair_set.pairs) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a.jpg,b.jpg,1\na.jpg,b.jpg\n", r"pairs.csv:2: expected 3 fields"),
        ("a.jpg,b.jpg,1\nc.jpg,d.jpg,maybe\n", r"pairs.csv:2: label 'maybe'"),
        ("path_a,path_b,label\na.jpg,,1\n", r"pairs.csv:2: empty image path"),
        ("a.jpg,b.jpg,1\n\n\nx,y,z,w\n", r"pairs.csv:4: expected 3 fields"),
    ],
)
def test_csv_malformed(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        read_pairs(write(tmp_path, "pairs.csv", text), tmp_path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataError, match="nothing.csv: pair file not found"):
        read_pairs(tmp_path / "nothing.csv", tmp_path)
    with pytest.raises(DataError, match="empty.txt: pair file is empty"):
        read_pairs(write(tmp_path, "empty.txt", "\n\n"), tmp_path)
    with pytest.raises(DataError, match="header.csv: no pairs found"):
        read_pairs(write(tmp_path, "header.csv", "path_a,path_b,label\n"), tmp_path)
