"""Protocol-buffer text format, as much of it as TensorFlow graph descriptions use.

OpenCV's DNN module imports a frozen TensorFlow graph (binary) together with a text graph
that says which nodes to build and how; the binary supplies the weights of every node the
text names.  This module reads the text dump of a graph (``cv2.dnn.writeTextGraph``) into
:class:`Message` trees, and writes them back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reid.errors import ModelError


@dataclass(frozen=True)
class Scalar:
    """A field value: ``quoted`` ones are strings, the rest numbers, booleans or enums."""

    text: str
    quoted: bool = False


@dataclass
class Message:
    """A text-format message: its fields in file order (a name may repeat)."""

    fields: list[tuple[str, Scalar | Message]] = field(default_factory=list)

    def all(self, name: str) -> list[Scalar | Message]:
        return [value for key, value in self.fields if key == name]

    def first(self, name: str) -> Scalar | Message | None:
        found = self.all(name)
        return found[0] if found else None

    def text(self, name: str, default: str = "") -> str:
        value = self.first(name)
        return value.text if isinstance(value, Scalar) else default

    def add(self, name: str, value: Scalar | Message) -> Message:
        self.fields.append((name, value))
        return self


# A token: punctuation, a double-quoted string (escapes kept as written) or a bare word.
_TOKEN = re.compile(r'\s*(?:(#[^\n]*)|([{}:\[\]<>,;])|"((?:[^"\\]|\\.)*)"|([^\s{}:\[\]<>,;"#]+))')


def _tokens(text: str, source: str) -> list[tuple[str, bool]]:
    tokens: list[tuple[str, bool]] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            if text[position:].strip() == "":
                break
            raise ModelError(f"{source}: unreadable text graph near character {position}")
        position = match.end()
        comment, punct, string, word = match.groups()
        if comment is not None:
            continue
        if punct is not None:
            tokens.append((punct, False))
        elif string is not None:
            tokens.append((string, True))
        elif word is not None:
            tokens.append((word, False))
    return tokens


def parse_text(text: str, source: str = "text graph") -> Message:
    """Parse protobuf text format into a :class:`Message`; ModelError naming ``source``
    when the text is not well formed."""
    tokens = _tokens(text, source)
    root = Message()
    stack = [root]
    i = 0
    while i < len(tokens):
        token, quoted = tokens[i]
        if token == "}" and not quoted:
            if len(stack) == 1:
                raise ModelError(f"{source}: unbalanced '}}' in text graph")
            stack.pop()
            i += 1
            continue
        if i + 1 >= len(tokens):
            raise ModelError(f"{source}: text graph ends inside field {token!r}")
        following = tokens[i + 1][0]
        if following == "{":
            child = Message()
            stack[-1].add(token, child)
            stack.append(child)
            i += 2
        elif following == ":":
            if i + 2 >= len(tokens):
                raise ModelError(f"{source}: text graph ends after {token}:")
            value, value_quoted = tokens[i + 2]
            if value == "{" and not value_quoted:
                child = Message()
                stack[-1].add(token, child)
                stack.append(child)
            else:
                stack[-1].add(token, Scalar(value, value_quoted))
            i += 3
        else:
            raise ModelError(f"{source}: unexpected {following!r} after field {token!r} in text graph")
    if len(stack) != 1:
        raise ModelError(f"{source}: text graph ends inside a message")
    return root


def format_text(message: Message, indent: int = 0) -> str:
    """The text format of ``message`` (what :func:`parse_text` reads back)."""
    pad = " " * indent
    lines = []
    for key, value in message.fields:
        if isinstance(value, Message):
            lines.append(f"{pad}{key} {{\n{format_text(value, indent + 2)}{pad}}}\n")
        else:
            shown = f'"{value.text}"' if value.quoted else value.text
            lines.append(f"{pad}{key}: {shown}\n")
    return "".join(lines)


def scalar(value: bool | int | float | str) -> Scalar:
    """A Python value as a text-format scalar (strings quoted)."""
    if isinstance(value, bool):
        return Scalar("true" if value else "false")
    if isinstance(value, (int, float)):
        return Scalar(repr(value))
    return Scalar(value, quoted=True)


def attr_value(value: bool | int | float | str | list[float] | list[int]) -> Message:
    """The ``AttrValue`` message of a node attribute: b, i, f, s, or a 1-d tensor for lists."""
    if isinstance(value, list):
        floats = any(isinstance(v, float) for v in value)
        tensor = Message().add("dtype", Scalar("DT_FLOAT" if floats else "DT_INT32"))
        tensor.add("tensor_shape", Message().add("dim", Message().add("size", scalar(len(value)))))
        for v in value:
            tensor.add("float_val" if floats else "int_val", scalar(float(v) if floats else int(v)))
        return Message().add("tensor", tensor)
    letter = "b" if isinstance(value, bool) else "i" if isinstance(value, int) else "f" if isinstance(value, float) else "s"
    return Message().add(letter, scalar(value))
