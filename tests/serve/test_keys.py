"""Key files that are not what they should be are refused with one line, unread; a key
belongs to one gallery (its name and its id), even while that gallery is being deleted."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import httpx
import pytest
from serve_helpers import Served, bearer, uvicorn_in_thread

from reid.errors import ConfigError
from reid.gallery import EmbeddingModel, Gallery
from reid.gallery.catalogue import gallery_uid
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


def test_a_key_made_while_its_gallery_is_deleted_never_opens_a_later_one(served: Served) -> None:
    """POST /v1/keys racing DELETE /v1/galleries/race, 30 rounds on a real server: whichever
    wins, no key of the deleted gallery is left, and none opens the gallery made after it."""
    made = refused = 0
    with uvicorn_in_thread(served.service) as url:
        clients = [httpx.Client(base_url=url, headers=served.admin(), timeout=60) for _ in range(3)]
        try:
            for _ in range(30):
                assert clients[0].post("/v1/galleries", json={"name": "race"}).status_code == 201
                start = threading.Barrier(2)
                answers: dict[str, httpx.Response] = {}

                def key() -> None:
                    start.wait()
                    answers["key"] = clients[1].post("/v1/keys", json={"gallery": "race", "scopes": ["read", "write"]})

                def delete() -> None:
                    start.wait()
                    answers["delete"] = clients[2].delete("/v1/galleries/race?confirm=race")

                threads = [threading.Thread(target=key), threading.Thread(target=delete)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(60)
                assert answers["delete"].status_code == 200, answers["delete"].text
                assert answers["key"].status_code in (201, 404), answers["key"].text
                assert clients[0].post("/v1/galleries", json={"name": "race"}).status_code == 201
                assert clients[0].get("/v1/keys", params={"gallery": "race"}).json()["keys"] == []
                if answers["key"].status_code == 201:
                    made += 1
                    token = answers["key"].json()["key"]
                    later = clients[0].get("/v1/galleries/race", headers=bearer(token))
                    assert later.status_code == 401, later.text
                else:
                    refused += 1
                assert clients[0].delete("/v1/galleries/race?confirm=race").status_code == 200
        finally:
            for client in clients:
                client.close()
    assert made + refused == 30


def test_a_key_opens_only_the_gallery_it_was_made_for(tmp_path: Path) -> None:
    """A gallery deleted on the host and made again under its name is another gallery; keys
    made before keys were bound are bound to the gallery there when a server starts."""
    root = tmp_path / "root"
    card = EmbeddingModel("m", "f" * 16, 4)
    Gallery.create(root / "staff", card).close()
    store = KeyStore(root / ".serve-keys.json")
    first = gallery_uid(root / "staff")
    key, token = store.create("staff", ["read"], lambda g: gallery_uid(root / g) or "")
    assert key.gallery_uid == first and first is not None
    Gallery.destroy(root / "staff")
    Gallery.create(root / "staff", card).close()
    assert gallery_uid(root / "staff") not in (None, first)
    assert store.find(token) == key and key.gallery_uid != gallery_uid(root / "staff")
    # A keys file of an older server: its keys name a gallery only.
    legacy = json.loads((root / ".serve-keys.json").read_text())
    for entry in legacy["keys"]:
        del entry["gallery_uid"]
    legacy["keys"].append({**legacy["keys"][0], "id": "0" * 12, "gallery": "gone"})
    (root / ".serve-keys.json").write_text(json.dumps(legacy))
    assert KeyStore(root / ".serve-keys.json").find(token).gallery_uid == ""  # type: ignore[union-attr]
    assert store.bind(lambda g: gallery_uid(root / g)) == 1
    by_id = {k.id: k for k in KeyStore(root / ".serve-keys.json").list()}
    assert by_id[key.id].gallery_uid == gallery_uid(root / "staff") and by_id["0" * 12].gallery_uid == ""


def test_a_keys_file_changed_twice_within_the_clocks_granularity_is_read_again(tmp_path: Path) -> None:
    """Another process's second write may leave the file's time, size and inode as the
    first left them (a coarse clock, an inode used again): a reader still sees it."""
    path = tmp_path / "keys.json"
    writer, reader = KeyStore(path), KeyStore(path)
    first, _ = writer.create("staff", ["read"], lambda gallery: "uid-1")
    assert [k.id for k in reader.list()] == [first.id]
    stamp = path.stat()
    # The same bytes but one key id, written in place and given back the first write's time.
    text = path.read_text()
    other = "f" * 12 if first.id != "f" * 12 else "e" * 12
    path.write_text(text.replace(first.id, other))
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert path.stat().st_size == stamp.st_size and path.stat().st_ino == stamp.st_ino
    assert [k.id for k in reader.list()] == [other]
