"""``reid query --fps``: the source's frame rate for the tracker's times, given by hand."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
from typer.testing import CliRunner

from reid.cli.app import app
from reid.models import ModelCard, build_network, save_model
from reid.pipeline.synthetic import street_frames, write_street_video
from reid.track.mot import MOT_DECIMALS, read_mot


def test_query_takes_the_frame_rate_by_hand_and_refuses_one_not_above_zero(tmp_path: Path) -> None:
    card = ModelCard(name="m", architecture="resnet18", embedding_dim=64, input_size=(64, 32), threshold=0.5)
    model = tmp_path / "m"
    save_model(build_network(card), card, model)
    scenes = tmp_path / "scenes"
    scenes.mkdir()
    for n, (frame, _) in enumerate(street_frames(2, seed=4)):
        cv2.imwrite(str(scenes / f"{n}.png"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    runner = CliRunner()
    gallery, video, mot = tmp_path / "g", tmp_path / "street.avi", tmp_path / "tracks.txt"
    enrolled = runner.invoke(
        app, ["enroll", str(scenes), "--id", "w", "--detect", "person", "--detector", "hog", "-m", str(model),
              "-g", str(gallery)],
    )  # fmt: skip
    assert enrolled.exit_code == 0, enrolled.output
    write_street_video(video, count=12)
    base = ["query", str(video), "-m", str(model), "-g", str(gallery), "--detector", "hog"]
    result = runner.invoke(app, [*base, "--fps", "7", "--mot", str(mot)])
    assert result.exit_code == 0, result.output
    assert mot.is_file() and all(r.frame >= 1 for r in read_mot(mot))
    # Every box and score of the file with the same decimals (smoothed boxes once gave "249.").
    lines = mot.read_text().splitlines()
    assert lines and all(
        re.fullmatch(rf"\d+,-?\d+(,-?\d+\.\d{{{MOT_DECIMALS}}}){{5}},-1,-1,-1", line) for line in lines
    ), lines
    refused = runner.invoke(app, [*base, "--fps", "0"])
    lines = [line for line in refused.output.splitlines() if line.strip()]
    assert refused.exit_code != 0 and len(lines) == 1 and "--fps" in lines[0], refused.output
