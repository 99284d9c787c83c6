"""Every command that takes a data set answers a bad data spec with the same line."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from reid.cli.app import app

runner = CliRunner()
# A published model a command would fetch before its first use: the spec is answered first.
PUBLISHED = "osnet_x0_5.dukemtmcreid"
COMMANDS = {
    "train": ("train", "--data", "{spec}", "--out", "{tmp}/m", "--quiet"),
    "eval": ("eval", "-m", PUBLISHED, "--data", "{spec}"),
    "calibrate": ("calibrate", "-m", PUBLISHED, "--data", "{spec}"),
    "enroll": ("enroll", "{spec}", "-m", PUBLISHED, "-g", "{tmp}/g"),
}


def market(root: Path) -> Path:
    for split, name in (("bounding_box_train", "0002_c1s1_000101_01.jpg"), ("query", "0005_c1s1_000401_00.jpg"),
                        ("bounding_box_test", "0005_c2s1_000501_00.jpg")):
        (root / split).mkdir(parents=True)
        cv2.imwrite(str(root / split / name), np.full((16, 8, 3), 90, np.uint8))
    return root


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("spec", "line"),
    [
        ("market:{m}", "error: {key} 'market:{m}': unknown dataset kind 'market'; use one of synthetic, market1501, "
                       "dukemtmc, msmt17, folder as KIND:PATH"),
        ("{m}", "error: {key} '{m}': give KIND:PATH (this is a Market-1501 layout: give market1501:{m})"),
        ("folder:{m}", "error: {key} 'folder:{m}': {m} is a Market-1501 layout, not identity folders; give market1501:{m}"),
    ],
    ids=["unknown-kind", "no-kind", "folder-on-market"],
)
def test_a_bad_data_spec_gets_one_answer_everywhere(tmp_path: Path, command: str, spec: str, line: str) -> None:
    # The key is the option where the spec is one (--data), the word "data" where it is an argument.
    fill = {"m": market(tmp_path / "market"), "tmp": tmp_path, "key": "data" if command == "enroll" else "--data"}
    args = [a.format(spec=spec.format(**fill), **fill) for a in COMMANDS[command]]
    result = runner.invoke(app, args)
    lines = [text for text in result.output.splitlines() if text.strip()]
    assert result.exit_code == 1 and lines == [line.format(**fill)], result.output
    assert not (tmp_path / "g").exists()
