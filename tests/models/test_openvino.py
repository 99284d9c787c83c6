"""OpenVINO IR encoders: what is refused, in one line naming the file (the Open Model Zoo's
Re-ID models themselves are run in tests/models/test_zoo.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reid.errors import ModelError
from reid.models.card import ModelCard
from reid.models.openvino import OpenVinoEncoder, ir_fingerprint
from tests.conftest import shared_weights

NAME = "person-reidentification-retail-0288"


@pytest.fixture
def ir(tmp_path: Path) -> Path:
    pytest.importorskip("openvino", reason="the openvino extra is not installed")
    folder = shared_weights(f"omz/{NAME}/FP32")
    for path in folder.iterdir():
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / f"{NAME}.xml"


def _card(size: tuple[int, int] = (256, 128)) -> ModelCard:
    return ModelCard(name="ir", architecture="omz", embedding_dim=1, input_size=size, mean=(0.0, 0.0, 0.0),
                     std=(1 / 255, 1 / 255, 1 / 255), channel_order="bgr", neck="none")


def test_an_ir_without_its_weights_is_refused(ir: Path) -> None:
    ir.with_suffix(".bin").unlink()
    with pytest.raises(ModelError, match=rf"^{ir.with_suffix('.bin')}: OpenVINO IR file not found \(an IR is an .xml beside its .bin\)$"):
        OpenVinoEncoder(ir, _card())


def test_a_card_of_another_input_size_is_refused(ir: Path) -> None:
    with pytest.raises(ModelError, match=r"input has shape .*expected \(1, 3, 128, 64\) as the card says"):
        OpenVinoEncoder(ir, _card((128, 64)))


def test_a_damaged_graph_is_refused_in_one_line(ir: Path) -> None:
    ir.write_text("<net>not a graph")
    with pytest.raises(ModelError) as info:
        OpenVinoEncoder(ir, _card())
    assert str(info.value).startswith(f"{ir}: not a readable OpenVINO IR (") and "\n" not in str(info.value)


def test_the_fingerprint_covers_both_files(ir: Path) -> None:
    encoder = OpenVinoEncoder(ir, _card(), threads=1)
    assert encoder.card.weights_fingerprint == ir_fingerprint(ir, ir.with_suffix(".bin")) and encoder.dim == 256
    before = ir_fingerprint(ir, ir.with_suffix(".bin"))
    with open(ir.with_suffix(".bin"), "r+b") as weights:
        weights.seek(100)
        weights.write(b"\x00\x01\x02\x03")
    assert ir_fingerprint(ir, ir.with_suffix(".bin")) != before
