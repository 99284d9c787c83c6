"""No server path in any answer: every route's errors (walked from the application's own
routes, with each kind of key, body and path), the keys routes, and the watches a read key
follows, whose sources are shown as the settings allow them, never as the server's paths."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from serve_helpers import ADMIN, Served, bearer, routes_of, serve_root

from reid.gallery import Gallery, ItemMeta
from reid.models import Encoder

# A path of this machine anywhere in an answer (not a URL's, not "read/write").
ABSOLUTE = re.compile(r"(?<![\w:/.%-])/(tmp|work|home|root|srv|etc|usr|var|opt|mnt|proc|dev)(/|\b)")
FILLS = {"identity": "zzz", "item": "99", "identity_id": "0" * 32, "watch_id": "zzz", "key_id": "zzz"}
BODIES: list[dict] = [
    {},
    {"json": {"gallery": "nope", "source": "/etc/passwd", "name": "../../etc", "scopes": ["read"], "images": [{"data": "/etc/passwd"}]}},
    {"content": b"{", "headers": {"Content-Type": "application/json"}},
    {"files": [("image", ("/etc/passwd", b"\x89PNG\r\n\x1a\nxx", "image/png")), ("images", ("../x.jpg", b"\xff\xd8\xff", "image/jpeg"))]},
]


@pytest.fixture
def hidden(tmp_path: Path, model_folder: Path, encoder: Encoder, pedestrian_video: Path) -> Served:
    """A root whose keys file, videos and model lie in folders of their own."""
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 500)
    service, client = serve_root(
        tmp_path / "srv" / "root", model_folder, encoder, keys_file=str(tmp_path / "secret" / "keys.json"),
        watch_files=[str(pedestrian_video), str(videos)],
    )  # fmt: skip
    served = Served(tmp_path / "srv" / "root", service, client, {})
    served.create("staff")
    served.keys = {"read": served.new_key("staff", "read")}
    return served


def _clean(text: str, *paths: Path) -> None:
    for path in {*paths, Path.cwd(), Path.home()}:
        assert str(path) not in text, text[:300]
    assert not ABSOLUTE.search(text), text[:300]


def test_no_error_of_any_route_names_a_server_path(hidden: Served, tmp_path: Path, model_folder: Path) -> None:
    routes = routes_of(hidden.client.app)
    assert len(routes) > 20
    seen = errors = 0
    for template, methods in routes:
        for method in sorted(methods - {"HEAD"}):
            for gallery in ("staff", "nope"):
                path = template.replace("{gallery}", gallery)
                for name, value in FILLS.items():
                    path = path.replace("{" + name + "}", value)
                for headers in ({}, hidden.key("read"), hidden.admin()):
                    for body in BODIES:
                        extra = dict(body)
                        sent = {**headers, **extra.pop("headers", {})}
                        answer = hidden.client.request(method, path, headers=sent, **extra)
                        seen += 1
                        errors += answer.status_code >= 400
                        _clean(answer.text, tmp_path, model_folder)
                        _clean(json.dumps(dict(answer.headers)), tmp_path, model_folder)
    assert seen > 700 and errors > 600, (seen, errors)


def test_revoking_an_unknown_key_names_the_key_only(hidden: Served, tmp_path: Path) -> None:
    answer = hidden.client.delete("/v1/keys/zzz", headers=hidden.admin())
    assert answer.status_code == 404 and answer.json()["error"]["message"] == "no key 'zzz'"
    assert "keys.json" not in answer.text


def test_a_watch_shows_its_source_as_allowed_never_the_server_path(
    hidden: Served, tmp_path: Path, pedestrian_video: Path, model_folder: Path
) -> None:
    admin, read = hidden.admin(), hidden.key("read")
    started = hidden.client.post(
        "/v1/watches", json={"gallery": "staff", "source": str(pedestrian_video), "max_frames": 3}, headers=admin
    )
    assert started.status_code == 201, started.text
    assert started.json()["source"] == pedestrian_video.name
    broken = hidden.client.post(
        "/v1/watches", json={"gallery": "staff", "source": str(tmp_path / "videos" / "broken.mp4")}, headers=admin
    )
    assert broken.status_code == 201 and broken.json()["source"] == "videos/broken.mp4"
    for watch in (started.json()["id"], broken.json()["id"]):
        deadline = time.monotonic() + 120
        while hidden.client.get(f"/v1/watches/{watch}", headers=read).json()["state"] in ("starting", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with hidden.client.stream("GET", f"/v1/watches/{watch}/events", headers=read) as events:
            _clean("".join(events.iter_text()), tmp_path, pedestrian_video.parent, model_folder)
    failed = hidden.client.get(f"/v1/watches/{broken.json()['id']}", headers=read).json()
    assert failed["state"] in ("failed", "done") and failed["source"] == "videos/broken.mp4"
    for who in (admin, read):
        _clean(hidden.client.get("/v1/watches", headers=who).text, tmp_path, pedestrian_video.parent, model_folder)
    refused = hidden.client.post("/v1/watches", json={"gallery": "staff", "source": str(tmp_path / "srv")}, headers=admin)
    assert refused.status_code == 422
    _clean(refused.text, tmp_path)


def test_a_stream_url_is_shown_without_its_password(tmp_path: Path, model_folder: Path, encoder: Encoder) -> None:
    service, client = serve_root(tmp_path / "root", model_folder, encoder, watch_urls=["rtsp://127.0.0.1:9/"])
    Served(tmp_path / "root", service, client, {}).create("staff")
    admin = bearer(ADMIN)
    started = client.post("/v1/watches", json={"gallery": "staff", "source": "rtsp://viewer:s3cret@127.0.0.1:9/live"}, headers=admin)
    assert started.status_code == 201 and started.json()["source"] == "rtsp://127.0.0.1:9/live"
    deadline = time.monotonic() + 120
    watch = started.json()["id"]
    while (state := client.get(f"/v1/watches/{watch}", headers=admin).json())["state"] in ("starting", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert "s3cret" not in json.dumps(state) and "viewer" not in json.dumps(state)


def test_an_item_enrolled_on_the_host_is_shown_by_its_file_name(hidden: Served, tmp_path: Path) -> None:
    vector = np.ones((1, 64), np.float32) / 8.0
    with Gallery.open(hidden.root / "staff") as gallery:
        gallery.add(vector, [ItemMeta("carol", source=str(tmp_path / "people" / "carol" / "1.jpg"), image_hash="c1")])
    one = hidden.client.get("/v1/galleries/staff/identities/carol", headers=hidden.key("read"))
    assert one.json()["items"][0]["source"] == "1.jpg"
    _clean(one.text, tmp_path)
