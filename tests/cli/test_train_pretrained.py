"""``reid train --pretrained``: imagenet never starts silently from random weights."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from reid.cli import app


def test_offline_imagenet_stops_with_one_line_before_reading_data(tmp_path: Path) -> None:
    # The dataset does not exist: the pretrained start is resolved first, so an offline
    # machine hears about the weights, not about the data.
    result = CliRunner().invoke(app, [
        "train", "--data", f"market1501:{tmp_path / 'absent'}", "--out", str(tmp_path / "m"), "--arch", "resnet34", "--quiet",
    ])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    if "resnet34.imagenet" in result.output:
        assert len(lines) == 1 and lines[0].endswith("or train from scratch with --pretrained none")
    else:
        # With internet the weights arrive and the missing dataset is the one error.
        assert "dataset folder not found" in lines[-1]
    assert not (tmp_path / "m").exists()


def test_unknown_registry_name_or_file_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "train", "--data", "synthetic", "--out", str(tmp_path / "m"), "--arch", "resnet18", "--pretrained", str(tmp_path / "x.pth"), "--quiet",
    ])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: {tmp_path / 'x.pth'}: pretrained weights file not found (nor a registry name; see `reid models list`)"
    ]
