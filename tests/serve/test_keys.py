"""Key files that are not what they should be are refused with one line, unread."""

from __future__ import annotations

from pathlib import Path

import pytest

from reid.errors import ConfigError
from reid.serve import AdminKey, KeyStore


def test_an_admin_key_file_that_is_a_device_or_huge_is_refused_unread(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^/dev/zero: more than the 4,096 bytes"):
        AdminKey.from_environment("/dev/zero")
    huge = tmp_path / "admin.key"
    huge.write_bytes(b"k" * 10_000)
    with pytest.raises(ConfigError, match="10,000 bytes, more than the 4,096"):
        AdminKey.from_environment(huge)
    latin = tmp_path / "latin.key"
    latin.write_bytes(b"caf\xe9-" * 10)
    with pytest.raises(ConfigError, match="must be UTF-8 text"):
        AdminKey.from_environment(latin)


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"keys": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 32 levels"),
        ("[1, 2]", "malformed \\(not a JSON object\\)"),
        ('{"keys": [{"id": 1}]}', "malformed \\(KeyError"),
        ("{", "not valid JSON"),
    ],
)
def test_a_malformed_keys_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / ".serve-keys.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        KeyStore(path).list()
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
    assert path.read_text() == text
