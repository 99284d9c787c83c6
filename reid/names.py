"""The one rule for the names people give: identity labels and gallery names.

An **identity name** labels a person in a gallery, is shown to people, is typed into
URLs and becomes a folder name; so it must read as what it is, and never as a path:

* it is kept in Unicode NFC (``Renée`` typed as ``e`` + a combining accent is the same
  name as with the precomposed ``é``);
* 1 to :data:`MAX_IDENTITY` characters, with at least one letter, digit, punctuation mark
  or symbol (a name of spaces or of combining marks alone is invisible);
* no control, format, private-use, unassigned or surrogate characters: no zero-width
  space or joiner, no bidirectional override, no line break (the zero-width joiners some
  scripts write between letters are refused too: what a name looks like must be all it is);
  nor any other character Unicode says to draw as nothing (Default_Ignorable_Code_Point:
  variation selectors, the combining grapheme joiner, the Hangul fillers) or the blank
  Braille pattern, which are letters or marks by category but show nothing;
* spaces are single ordinary spaces (U+0020) between visible characters: none leading,
  trailing or doubled, no other kind of space;
* no path syntax: not ``.`` or ``..``, no ``/`` or ``\\``, also in compatibility form (the
  full-width ``．．`` and ``ａ／ｂ`` are ``..`` and ``a/b`` to NFKC, which compares names), and
  no percent-escapes that decode, in any number of rounds, to any of that (``%2e%2e``,
  ``a%2Fb``, ``%25252F``) or to a forbidden character;
* **case**: names compare by their NFKC case-folded form (:func:`name_key`), so ``alice``,
  ``Alice`` and the full-width ``ＡＬＩＣＥ`` are one name: a gallery refuses a second
  identity whose key equals one it has.  (Letters of other scripts that merely look alike,
  a Cyrillic ``а`` for a Latin ``a``, are other names.)

Labels stored before this rule keep working: galleries open, and such an identity can be
found by its exact label (or by :func:`identity_id`), renamed and deleted; only new labels
(enrolment, renaming) must follow the rule.

A **gallery name** (a folder under the served root) is 1 to 64 ASCII letters, digits, ``.``,
``_`` or ``-``, starting with a letter or digit; gallery names compare case-insensitively
too (``Staff`` beside ``staff`` would be two folders on one file system and one on another).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from urllib.parse import unquote

from reid.errors import ConfigError

MAX_IDENTITY = 200
# Control, format (zero-width, bidi controls, soft hyphen), surrogate, private use,
# unassigned, line and paragraph separators.
FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Characters a person sees: letters, digits, punctuation, symbols.
VISIBLE_CATEGORIES = ("L", "N", "P", "S")
# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties) beyond the categories above,
# and U+2800, the blank Braille pattern: characters drawn as nothing.
INVISIBLE_RANGES = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x2800, 0x2800),
    (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0x1D173, 0x1D17A), (0xE0100, 0xE01EF),
)
PATH_NAMES = frozenset({".", ".."})
PATH_SEPARATORS = ("/", "\\")
GALLERY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# An identity id: hexadecimal digits only, so it can never be a path or a dot segment.
IDENTITY_ID = re.compile(r"[0-9a-f]{32}")


def identity_name(name: object, what: str = "identity") -> str:
    """``name`` in NFC when it may label a new identity (see the module's rule); ConfigError
    naming ``what`` and the problem otherwise (the name is quoted, cut to 40 characters)."""
    if not isinstance(name, str):
        raise ConfigError(f"{what} must be text")
    text = unicodedata.normalize("NFC", name)
    shown = text[:40]
    if not text:
        raise ConfigError(f"{what} is empty")
    if len(text) > MAX_IDENTITY:
        raise ConfigError(f"{what} is {len(text)} characters long; at most {MAX_IDENTITY}")
    decoded = _percent_decoded(text)
    for form in (text, decoded, unicodedata.normalize("NFKC", decoded)):
        bad = next((c for c in form if _invisible(c)), None)
        if bad is not None and unicodedata.category(bad) == "Cs":
            # A file name's bytes that are not UTF-8, as Python holds them.
            raise ConfigError(f"{what} {shown!r} holds bytes that are not UTF-8 text")
        if bad is not None:
            raise ConfigError(f"{what} {shown!r} holds the invisible or control character U+{ord(bad):04X}")
        if form.strip() in PATH_NAMES or any(sep in form for sep in PATH_SEPARATORS):
            raise ConfigError(f"{what} {shown!r} is path syntax ('.', '..', '/' or '\\', also percent-encoded)")
    if not any(unicodedata.category(c).startswith(VISIBLE_CATEGORIES) for c in text):
        raise ConfigError(f"{what} {shown!r} has no visible character")
    odd_space = next((c for c in text if c != " " and (c.isspace() or unicodedata.category(c) == "Zs")), None)
    if odd_space is not None:
        raise ConfigError(f"{what} {shown!r} holds the space U+{ord(odd_space):04X}; use single ordinary spaces")
    if text != text.strip(" ") or "  " in text:
        raise ConfigError(f"{what} {shown!r} has a leading, trailing or doubled space")
    return text


def name_key(name: str) -> str:
    """The form two names are compared by, Unicode's caseless match of identifiers: NFKC,
    case-folded, NFKC again (``Alice`` and ``alice``, ``STRASSE`` and ``straße``, the
    full-width ``ＡＬＩＣＥ`` and ``alice``, the ligature ``ﬁ`` and ``fi`` have one key)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def identity_id(label: str) -> str:
    """The id of the identity stored as ``label``: 32 hexadecimal digits (128 bits of its
    SHA-256), so an identity whose label is odd (one stored before the rule) can still be
    addressed, in a URL, by something that is never a path."""
    return hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def check_identity_id(text: str) -> str:
    """``text`` when it has the form of an :func:`identity_id`; ConfigError otherwise."""
    if not isinstance(text, str) or not IDENTITY_ID.fullmatch(text):
        raise ConfigError("an identity id is 32 hexadecimal digits (the 'id' of the identity in a listing)")
    return text


def check_gallery_name(name: object) -> str:
    """``name`` when it can name a gallery folder (see the module's rule); ConfigError otherwise."""
    if not isinstance(name, str) or not GALLERY_NAME.fullmatch(name):
        shown = name[:80] if isinstance(name, str) else name
        raise ConfigError(
            f"gallery name {shown!r}: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def _invisible(char: str) -> bool:
    code = ord(char)
    return unicodedata.category(char) in FORBIDDEN_CATEGORIES or any(lo <= code <= hi for lo, hi in INVISIBLE_RANGES)


def _percent_decoded(text: str) -> str:
    """``text`` percent-decoded until nothing changes (%252e is %2e is "."); each round that
    changes it shortens it, so a name of at most MAX_IDENTITY characters takes few rounds."""
    decoded = text
    while "%" in decoded:
        step = unquote(decoded, errors="replace")
        if step == decoded:
            break
        decoded = step
    return decoded
