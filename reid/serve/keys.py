"""API keys: one admin key given at start, and per-gallery keys with scopes, stored hashed.

A gallery key is ``rk_<id>_<secret>``: a public id (to list and revoke it by) and 256
random bits.  Only its SHA-256 is stored.  A slow password hash (bcrypt, scrypt) protects
guessable passwords; a key of 256 random bits cannot be guessed, so one SHA-256 is as good
and costs nothing per request.  Keys are compared by their digests with
:func:`hmac.compare_digest`, in time that does not depend on where they differ.

A gallery key belongs to one gallery: its name and the id the gallery was made with
(:func:`reid.gallery.catalogue.gallery_uid`), so it never opens a gallery made later under
the same name.  Keys are made, and a gallery's keys revoked as it is deleted, under the keys
file's lock (:meth:`KeyStore.create`, :meth:`KeyStore.revoke_gallery`).

The keys file (JSON) is shared by every process serving the root, and by servers on several
hosts when ``keys_file`` names one file they all mount: writes take a file lock and replace
the file atomically; readers reload it when it changes (its modification time, size or
inode).  A file changed within :data:`RECENT_NS` of the read is read again at the next
look, since a second change within the clock's granularity may leave all three as they were.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from reid.errors import ConfigError
from reid.paths import parse_json_bounded, read_text_bounded, write_bytes_atomic
from reid.names import check_gallery_name

SCOPES = ("read", "write")
ADMIN_KEY_ENV = "REID_SERVE_ADMIN_KEY"
ADMIN_KEY_FILE_ENV = "REID_SERVE_ADMIN_KEY_FILE"
# An admin key shorter than this is a password, not a key.
MIN_ADMIN_KEY = 24
# An admin key file holds one line; a keys file about 200 bytes a key.  Larger files (or a
# device such as /dev/zero named by mistake) are refused unread.
MAX_ADMIN_KEY_FILE = 4096
MAX_KEYS_FILE = 16 * 1024 * 1024
# A keys file younger than this is not trusted to be as last read (see the module).
RECENT_NS = 2_000_000_000
KEY_PATTERN = re.compile(r"rk_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")
T = TypeVar("T")


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    """A gallery key as stored: ``id`` (public), the ``gallery`` it opens and that gallery's
    id (``gallery_uid``; empty for a key made before keys were bound, which opens nothing
    until :meth:`KeyStore.bind`), its ``scopes`` (of :data:`SCOPES`), when it was created,
    and the SHA-256 of the key."""

    id: str
    gallery: str
    scopes: tuple[str, ...]
    created: str
    sha256: str
    gallery_uid: str = ""

    def allows(self, scope: str) -> bool:
        return scope in self.scopes


class AdminKey:
    """The admin key's digest; :meth:`matches` compares a presented key in constant time."""

    def __init__(self, token: str, source: str) -> None:
        token = token.strip()
        if len(token) < MIN_ADMIN_KEY:
            raise ConfigError(f"{source}: the admin key must be at least {MIN_ADMIN_KEY} characters (use 'reid serve keys admin')")
        self._sha256 = digest(token)
        self.source = source

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(digest(token), self._sha256)

    @classmethod
    def from_environment(cls, key_file: str | Path | None = None) -> AdminKey | None:
        """The admin key from ``key_file`` (or the file ``REID_SERVE_ADMIN_KEY_FILE`` names),
        else from ``REID_SERVE_ADMIN_KEY``; None when neither is set.  Never from an argument:
        command lines are visible to every user of the host."""
        key_file = key_file or os.environ.get(ADMIN_KEY_FILE_ENV) or None
        if key_file is not None:
            path = Path(key_file)
            try:
                return cls(read_text_bounded(path, MAX_ADMIN_KEY_FILE, "serve admin key file"), str(path))
            except OSError as exc:
                raise ConfigError(f"{path}: cannot read the admin key file ({exc.strerror or exc})") from None
        token = os.environ.get(ADMIN_KEY_ENV)
        return cls(token, ADMIN_KEY_ENV) if token else None


def new_admin_key() -> str:
    """A fresh admin key (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


class KeyStore:
    """The gallery keys of one keys file.  Reads reload the file when it changed; writes
    hold its lock.  Raises ConfigError naming the file when it is unreadable or malformed."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int, int] | None = None
        self._keys: dict[str, ApiKey] = {}

    def create(
        self, gallery: str, scopes: tuple[str, ...] | list[str], uid_of: Callable[[str], str]
    ) -> tuple[ApiKey, str]:
        """A new key for ``gallery`` with ``scopes``, bound to the gallery's id, which
        ``uid_of(gallery)`` gives (or raises for a gallery that is not there) under the keys
        file's lock; returns it and the key itself, which is shown once and never stored."""
        check_gallery_name(gallery)
        scopes = tuple(dict.fromkeys(scopes))
        if not scopes or any(s not in SCOPES for s in scopes):
            raise ConfigError(f"scopes {list(scopes)}: choose one or more of {', '.join(SCOPES)}")
        # The catalogue's clock, imported here: the key commands' help loads no gallery engine.
        from reid.gallery.catalogue import now

        with self._locked() as keys:
            uid = uid_of(gallery)
            key_id = secrets.token_hex(6)
            while key_id in keys:
                key_id = secrets.token_hex(6)
            token = f"rk_{key_id}_{secrets.token_urlsafe(32)}"
            key = ApiKey(key_id, gallery, tuple(s for s in SCOPES if s in scopes), now(), digest(token), uid)
            keys[key_id] = key
        return key, token

    def bind(self, uid_of: Callable[[str], str | None]) -> int:
        """Bind each key without a gallery id to the id of its gallery as it is now
        (``uid_of``: None for a gallery not there, whose keys stay unbound and open
        nothing); how many were bound.  Writes the file only when one was."""
        if all(key.gallery_uid for key in self._current().values()):
            return 0
        bound = 0
        with self._locked() as keys:
            for key_id, key in list(keys.items()):
                uid = None if key.gallery_uid else uid_of(key.gallery)
                if uid is not None:
                    keys[key_id] = ApiKey(key.id, key.gallery, key.scopes, key.created, key.sha256, uid)
                    bound += 1
        return bound

    def revoke(self, key_id: str) -> ApiKey:
        """Delete the key ``key_id``; ConfigError when there is none."""
        with self._locked() as keys:
            key = keys.pop(key_id, None)
            if key is None:
                raise ConfigError(f"{self.path}: no key {key_id[:40]!r}")
        return key

    def revoke_gallery(self, gallery: str, delete: Callable[[], T]) -> T:
        """Run ``delete`` (which deletes ``gallery``) and revoke every key of ``gallery``, both
        under the keys file's lock, so no key is made for it meanwhile; ``delete``'s answer.
        When ``delete`` raises, nothing is revoked."""
        with self._locked() as keys:
            answer = delete()
            for key_id in [k for k, key in keys.items() if key.gallery == gallery]:
                del keys[key_id]
        return answer

    def list(self, gallery: str | None = None) -> list[ApiKey]:
        keys = self._current()
        return sorted((k for k in keys.values() if gallery is None or k.gallery == gallery), key=lambda k: (k.gallery, k.created))

    def find(self, token: str) -> ApiKey | None:
        """The key ``token`` is, or None.  The digest is compared in constant time."""
        match = KEY_PATTERN.fullmatch(token)
        key = self._current().get(match.group(1)) if match else None
        expected = key.sha256 if key is not None else digest("")
        same = hmac.compare_digest(digest(token), expected)
        return key if same and key is not None else None

    def _current(self) -> dict[str, ApiKey]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            self._keys, self._seen = {}, None
            return self._keys
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read the keys file ({exc.strerror or exc})") from None
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        if stamp != self._seen:
            self._keys = self._read()
            self._seen = stamp if time.time_ns() - info.st_mtime_ns > RECENT_NS else None
        return self._keys

    def _read(self) -> dict[str, ApiKey]:
        try:
            raw = parse_json_bounded(read_text_bounded(self.path, MAX_KEYS_FILE, "keys file"), str(self.path), "keys file")
            if not isinstance(raw, dict):
                raise ConfigError(f"{self.path}: the keys file is malformed (not a JSON object)")
            keys = {}
            for entry in raw["keys"]:
                key = ApiKey(
                    str(entry["id"]), str(entry["gallery"]), tuple(str(s) for s in entry["scopes"]),
                    str(entry["created"]), str(entry["sha256"]), str(entry.get("gallery_uid") or ""),
                )  # fmt: skip
                keys[key.id] = key
            return keys
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read the keys file ({exc.strerror or exc})") from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{self.path}: the keys file is malformed ({type(exc).__name__}: {exc})") from None

    @contextmanager
    def _locked(self) -> Iterator[dict[str, ApiKey]]:
        """The keys, under the file's lock, written back (atomically) when the block ends."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise ConfigError(f"{lock}: cannot open the keys lock ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            keys = self._read()
            yield keys
            payload = {"keys": [
                {"id": k.id, "gallery": k.gallery, "gallery_uid": k.gallery_uid, "scopes": list(k.scopes),
                 "created": k.created, "sha256": k.sha256}
                for k in keys.values()
            ]}  # fmt: skip
            write_bytes_atomic(self.path, (json.dumps(payload, indent=1) + "\n").encode())
            os.chmod(self.path, 0o600)
            self._seen = None
        finally:
            os.close(fd)
