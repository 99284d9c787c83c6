"""The protobuf text format reader and writer behind the SSD text graphs."""

from __future__ import annotations

import pytest

from reid.detect.textgraph import Message, Scalar, attr_value, format_text, parse_text
from reid.errors import ModelError

TEXT = """node {
  name: "conv/Conv2D"  # a comment
  op: "Conv2D"
  input: "image_tensor"
  attr { key: "strides" value { list { i: 1 i: 2 } } }
  attr { key: "padding" value { s: "SAME" } }
}
"""


def test_parse_keeps_order_repeats_and_quoting() -> None:
    root = parse_text(TEXT)
    (node,) = root.all("node")
    assert isinstance(node, Message) and node.text("name") == "conv/Conv2D" and node.text("input") == "image_tensor"
    strides = node.all("attr")[0]
    assert isinstance(strides, Message)
    values = strides.first("value").first("list").all("i")  # type: ignore[union-attr]
    assert values == [Scalar("1"), Scalar("2")]
    assert parse_text(format_text(root)) == root


def test_attr_values_of_each_type() -> None:
    assert format_text(attr_value(True)) == "b: true\n"
    assert format_text(attr_value(7)) == "i: 7\n"
    assert format_text(attr_value("CENTER_SIZE")) == 's: "CENTER_SIZE"\n'
    tensor = format_text(attr_value([0.5, 2.0]))
    assert "dtype: DT_FLOAT" in tensor and "float_val: 0.5" in tensor and "size: 2" in tensor
    assert "int_val: -1" in format_text(attr_value([-1]))


@pytest.mark.parametrize("broken", ['node { name: "x"', 'node { name: "x" } }', "node name", "node { name: }"])
def test_malformed_text_is_one_line(broken: str) -> None:
    with pytest.raises(ModelError) as caught:
        parse_text(broken, "graph.pbtxt")
    assert str(caught.value).startswith("graph.pbtxt: ") and "\n" not in str(caught.value)
