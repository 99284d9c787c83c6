"""The one rule for names (reid.names): what an attacker tried as a person's name is refused,
names people use are kept (in NFC), case decides sameness, ids are never paths."""

from __future__ import annotations

import unicodedata

import pytest

from reid.errors import ConfigError
from reid.names import check_gallery_name, check_identity_id, identity_id, identity_name, name_key


@pytest.mark.parametrize(
    "name,problem",
    [
        ("..", "path syntax"),
        (".", "path syntax"),
        ("a/b", "path syntax"),
        ("a\\b", "path syntax"),
        ("%2e%2e", "path syntax"),
        ("%2E", "path syntax"),
        ("a%2Fb", "path syntax"),
        ("%252e%252e", "path syntax"),
        ("%5c", "path syntax"),
        ("%25252525252F", "path syntax"),
        ("\uff0e\uff0e", "path syntax"),
        ("\u2024\u2024", "path syntax"),
        ("\u2025", "path syntax"),
        ("a\uff0fb", "path syntax"),
        ("a\uff3cb", "path syntax"),
        ("\u3164", "U+3164"),
        ("\uffa0", "U+FFA0"),
        ("\u115f", "U+115F"),
        ("\u2800", "U+2800"),
        ("a\u034fb", "U+034F"),
        ("a\ufe0fb", "U+FE0F"),
        ("a\U000e0100b", "U+E0100"),
        ("\u200b", "U+200B"),
        ("alice\u200b", "U+200B"),
        ("a\u202eb", "U+202E"),
        ("\u2066x", "U+2066"),
        ("a\u00adb", "U+00AD"),
        ("\ufeffalice", "U+FEFF"),
        ("a\nb", "U+000A"),
        ("a%00b", "U+0000"),
        ("a\u2028b", "U+2028"),
        ("\ue000", "U+E000"),
        ("", "empty"),
        ("   ", "no visible character"),
        ("\u0301", "no visible character"),
        (" alice", "leading, trailing or doubled space"),
        ("alice ", "leading, trailing or doubled space"),
        ("alice  smith", "leading, trailing or doubled space"),
        ("alice\u00a0smith", "space U+00A0"),
        ("alice\tsmith", "U+0009"),
        ("x" * 201, "201 characters long"),
    ],
)
def test_names_that_are_paths_invisible_or_ambiguous_are_refused(name: str, problem: str) -> None:
    with pytest.raises(ConfigError, match="^identity ") as caught:
        identity_name(name)
    message = str(caught.value)
    assert problem in message and "\n" not in message
    # The name is shown escaped: a right-to-left override cannot turn the message around.
    assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in message)


@pytest.mark.parametrize("name", ["alice", "Alice Smith", "O'Brien", "Renée", "李 小龙", "100%", "a.b", "...", "x" * 200, "Zoë-3"])
def test_names_people_use_are_kept(name: str) -> None:
    assert identity_name(name) == unicodedata.normalize("NFC", name)


def test_a_name_is_kept_in_nfc_and_compared_case_insensitively() -> None:
    nfd, nfc = "Rene\u0301e", "Ren\u00e9e"
    assert identity_name(nfd) == nfc and len(identity_name(nfd)) == 5
    assert name_key("alice") == name_key("Alice") == name_key("ALICE")
    assert name_key("straße") == name_key("STRASSE") and name_key(nfd) == name_key("RENÉE")
    assert name_key("ＡＬＩＣＥ") == name_key("alice") and name_key("ﬁona") == name_key("Fiona")
    assert name_key("alice") != name_key("alicia")


def test_an_identity_id_is_never_a_path_and_is_one_per_label() -> None:
    for label in ("..", ".", "a/b", "\u200b", "alice", "Alice"):
        ident = identity_id(label)
        assert check_identity_id(ident) == ident and len(ident) == 32 and set(ident) <= set("0123456789abcdef")
    assert identity_id("alice") != identity_id("Alice")
    for text in ("..", "A" * 32, "0" * 31, "0" * 33, "../" + "0" * 29):
        with pytest.raises(ConfigError, match="32 hexadecimal digits"):
            check_identity_id(text)


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "a\\b", "", "x" * 65, "é", "a b", "%2e"])
def test_gallery_names_are_one_plain_folder_name(name: str) -> None:
    with pytest.raises(ConfigError, match="gallery name"):
        check_gallery_name(name)
    assert check_gallery_name("staff-2.a_b") == "staff-2.a_b"
