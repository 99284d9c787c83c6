"""The auth matrix: every route x no key, a wrong key, read, write, both, another gallery's key,
the admin key; and --no-auth.  Each authorized call runs against state made for it."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from serve_helpers import ADMIN, Served, bearer, serve_root

from reid.models import Encoder
from reid.names import identity_id

_count = itertools.count()


def photo() -> tuple[str, bytes, str]:
    """A real PNG of its own (random pixels), so that no two enrolments are duplicates."""
    rng = np.random.default_rng(next(_count))
    ok, png = cv2.imencode(".png", rng.integers(0, 255, (128, 64, 3), dtype=np.uint8))
    assert ok
    return ("p.png", png.tobytes(), "image/png")


def enrolled(served: Served, identity: str) -> int:
    """Enrol a fresh photo as ``identity`` (as the admin); its item id."""
    response = served.client.post(
        f"/v1/galleries/staff/identities/{identity}/images", files=[("images", photo())], headers=served.admin()
    )
    assert response.json()["added"] == 1, response.text
    items = served.client.get(f"/v1/galleries/staff/identities/{identity}", headers=served.admin()).json()["items"]
    return items[-1]["id"]


Build = Callable[[Served], tuple[str, dict[str, Any]]]


def _new_gallery(s: Served) -> tuple[str, dict[str, Any]]:
    return "/v1/galleries", {"json": {"name": f"g{next(_count)}"}}


def _identity(s: Served) -> tuple[str, dict[str, Any]]:
    enrolled(s, "alice")
    return "/v1/galleries/staff/identities/alice", {}


def _rename(s: Served) -> tuple[str, dict[str, Any]]:
    enrolled(s, "alice")
    return "/v1/galleries/staff/identities/alice", {"json": {"name": f"renamed-{next(_count)}"}}


def _item(s: Served) -> tuple[str, dict[str, Any]]:
    return f"/v1/galleries/staff/identities/alice/items/{enrolled(s, 'alice')}", {}


def _by_id(s: Served) -> tuple[str, dict[str, Any]]:
    enrolled(s, "alice")
    return f"/v1/galleries/staff/ids/{identity_id('alice')}", {}


def _rename_id(s: Served) -> tuple[str, dict[str, Any]]:
    enrolled(s, "alice")
    return f"/v1/galleries/staff/ids/{identity_id('alice')}", {"json": {"name": f"renamed-{next(_count)}"}}


def _item_id(s: Served) -> tuple[str, dict[str, Any]]:
    return f"/v1/galleries/staff/ids/{identity_id('alice')}/items/{enrolled(s, 'alice')}", {}


def _revoke(s: Served) -> tuple[str, dict[str, Any]]:
    return f"/v1/keys/{s.client.post('/v1/keys', json={'gallery': 'staff', 'scopes': ['read']}, headers=s.admin()).json()['id']}", {}


def _fixed(path: str, **kwargs: Any) -> Build:
    return lambda s: (path, kwargs)


ROUTES: list[tuple[str, str, str, int, Build]] = [
    ("list galleries", "GET", "any", 200, _fixed("/v1/galleries")),
    ("create gallery", "POST", "admin", 201, _new_gallery),
    ("gallery info", "GET", "read", 200, _fixed("/v1/galleries/staff")),
    ("delete gallery", "DELETE", "admin", 200, _fixed("/v1/galleries/staff?confirm=staff")),
    ("list identities", "GET", "read", 200, _fixed("/v1/galleries/staff/identities")),
    ("one identity", "GET", "read", 200, _identity),
    ("rename", "PATCH", "write", 200, _rename),
    ("delete identity", "DELETE", "write", 200, _identity),
    ("delete item", "DELETE", "write", 200, _item),
    ("one identity by id", "GET", "read", 200, _by_id),
    ("rename by id", "PATCH", "write", 200, _rename_id),
    ("delete identity by id", "DELETE", "write", 200, _by_id),
    ("delete item by id", "DELETE", "write", 200, _item_id),
    ("enrol", "POST", "write", 200, lambda s: ("/v1/galleries/staff/identities/bob/images", {"files": [("images", photo())]})),
    ("search", "POST", "read", 200, lambda s: ("/v1/galleries/staff/search", {"files": [("image", photo())]})),
    ("verify", "POST", "read", 200, lambda s: ("/v1/galleries/staff/verify", {"files": [("image", photo()), ("other", photo())]})),
    ("embed", "POST", "read", 200, lambda s: ("/v1/galleries/staff/embed", {"files": [("image", photo())]})),
    ("thumbnail", "GET", "read", 200, lambda s: (f"/v1/galleries/staff/items/{enrolled(s, 'alice')}/thumbnail", {})),
    ("list keys", "GET", "admin", 200, _fixed("/v1/keys")),
    ("create key", "POST", "admin", 201, _fixed("/v1/keys", json={"gallery": "staff", "scopes": ["read"]})),
    ("revoke key", "DELETE", "admin", 200, _revoke),
]
# Who may call a route needing each scope (the admin may call every route).
ALLOWED = {
    "any": {"read", "write", "both", "other", "admin"},
    "read": {"read", "both", "admin"},
    "write": {"write", "both", "admin"},
    "admin": {"admin"},
}
# The admin last: a route that deletes the gallery runs it once everyone else was answered.
PRINCIPALS = ["none", "wrong", "other", "read", "write", "both", "admin"]


def _headers(served: Served, who: str) -> dict[str, str]:
    if who == "none":
        return {}
    if who == "wrong":
        return bearer("rk_000000000000_" + "x" * 43)
    if who == "admin":
        return served.admin()
    return served.key(who)


@pytest.mark.parametrize("name,method,scope,success,build", ROUTES, ids=[r[0] for r in ROUTES])
def test_every_route_for_every_key(served: Served, name: str, method: str, scope: str, success: int, build: Build) -> None:
    got = {}
    for who in PRINCIPALS:
        path, kwargs = build(served)
        response = served.client.request(method, path, headers=_headers(served, who), **kwargs)
        got[who] = response.status_code
        if response.status_code >= 400:
            assert set(response.json()) == {"error"} and set(response.json()["error"]) == {"code", "message"}
    expected = {
        who: success if who in ALLOWED[scope] else 401 if who in ("none", "wrong") else 403 for who in PRINCIPALS
    }
    assert got == expected


def test_errors_say_why_without_the_key(served: Served) -> None:
    none = served.client.get("/v1/galleries/staff")
    assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer"
    assert none.json() == {"error": {"code": "unauthorized", "message": "no key: send 'Authorization: Bearer KEY'"}}
    wrong = served.client.get("/v1/galleries/staff", headers=bearer(ADMIN + "x"))
    assert wrong.json()["error"]["message"] == "unknown or revoked key" and ADMIN not in wrong.text
    other = served.client.get("/v1/galleries/staff", headers=served.key("other")).json()
    assert other["error"] == {"code": "forbidden", "message": "this key is for another gallery"}
    scope = served.client.delete("/v1/galleries/staff/identities/x", headers=served.key("read")).json()
    assert scope["error"]["message"] == "this key lacks the 'write' scope"
    basic = served.client.get("/v1/galleries/staff", headers={"Authorization": "Basic YTpi"})
    assert basic.status_code == 401


@pytest.mark.parametrize("path", ["/v1/health", "/v1/ready", "/metrics", "/openapi.json", "/docs"])
def test_public_routes_need_no_key(served: Served, path: str) -> None:
    assert served.client.get(path).status_code == 200


def test_no_auth_serves_everything_without_keys(tmp_path: Path, model_folder: Path, encoder: Encoder) -> None:
    _, client = serve_root(tmp_path / "root", model_folder, encoder, no_auth=True)
    assert client.post("/v1/galleries", json={"name": "open"}).status_code == 201
    assert client.get("/v1/keys").status_code == 200
    assert client.get("/v1/galleries/open/identities").json()["total"] == 0


def test_without_keys_a_rebound_host_and_a_cross_site_write_are_refused(
    tmp_path: Path, model_folder: Path, encoder: Encoder
) -> None:
    """--no-auth on loopback: a page on another site the operator visits cannot use the
    server, neither by a form post (no preflight) nor by DNS rebinding (its own name
    resolved to 127.0.0.1)."""
    _, client = serve_root(tmp_path / "root", model_folder, encoder, no_auth=True)
    assert client.post("/v1/galleries", json={"name": "open"}).status_code == 201
    form = {"files": [("images", photo())]}
    enrol = "/v1/galleries/open/identities/mallory/images"
    hosts = ("rebind.evil.example", "rebind.evil.example:8000", "127.0.0.1.evil.example", "localhost.evil.example", "",
             "localhost:8000@evil.example", "localhost.", "127.0.0.1:x", "[::1]evil")  # fmt: skip
    for host in hosts:
        answer = client.get("/v1/galleries", headers={"Host": host})
        assert answer.status_code == 400 and "Host" in answer.json()["error"]["message"], host
        assert client.post(enrol, headers={"Host": host}, **form).status_code == 400
    for origin in ("http://evil.example", "null", "http://127.0.0.1:8000.evil.example", "https://localhost:9999"):
        cross = client.post(enrol, headers={"Origin": origin}, **form)
        assert cross.status_code == 403 and "cross-site" in cross.json()["error"]["message"], origin
    assert client.post(enrol, headers={"Sec-Fetch-Site": "cross-site"}, **form).status_code == 403
    assert client.get("/v1/galleries/open", headers={"Origin": "http://evil.example"}).json()["items"] == 0
    for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000", "127.0.0.2"):
        own = {"Host": host, "Origin": f"http://{host}"}
        assert client.get("/v1/galleries", headers=own).status_code == 200, host
    same = client.post(enrol, headers={"Origin": "http://127.0.0.1:8000"}, **form)
    assert same.status_code == 200 and same.json()["added"] == 1
    assert client.post(enrol, **form).status_code == 200


def test_with_keys_the_hosts_named_are_the_only_ones_answered(tmp_path: Path, model_folder: Path, encoder: Encoder) -> None:
    _, client = serve_root(tmp_path / "root", model_folder, encoder, allowed_hosts=["reid.example.org"])
    admin = bearer(ADMIN)
    assert client.get("/v1/galleries", headers={**admin, "Host": "reid.example.org"}).status_code == 200
    assert client.get("/v1/galleries", headers={**admin, "Host": "127.0.0.1:8000"}).status_code == 200
    assert client.get("/v1/galleries", headers={**admin, "Host": "evil.example"}).status_code == 400
    # With keys a browser cannot send one cross-site without CORS: Origin is CORS's to judge.
    made = client.post("/v1/galleries", json={"name": "g"}, headers={**admin, "Origin": "http://evil.example"})
    assert made.status_code == 201
