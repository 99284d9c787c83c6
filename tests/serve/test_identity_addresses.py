"""Names that are paths: a person named ".." (stored before the naming rule, or tried now)
never turns a request into one about another resource.  Clients normalise URLs the way
httpx and curl -L do; the server answers no redirect; a destructive route answers for
exactly what it names; every identity is reachable by an id that is never a path."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from serve_helpers import Served, files, routes_of, store_legacy, uvicorn_in_thread

from reid.gallery import Gallery
from reid.names import identity_id

# Labels an older server took: each is a path, or invisible, or differs only by its spaces.
LEGACY = ["..", ".", "a/b", "\u200b", "alice ", "%2e%2e"]


def _labels(served: Served) -> dict[str, int]:
    with Gallery.open(served.root / "staff") as gallery:
        return {s.identity: s.items for s in gallery.identities()}


def test_deleting_a_person_named_dot_dot_never_deletes_the_gallery(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    store_legacy(served.root / "staff", monkeypatch, LEGACY)
    with uvicorn_in_thread(served.service) as url, httpx.Client(base_url=url, follow_redirects=True) as client:
        for name in ("..", "."):
            # httpx sends DELETE /v1/galleries/staff (and /v1/galleries/staff/identities) for these.
            answer = client.delete(f"/v1/galleries/staff/identities/{name}", headers=served.admin())
            assert answer.status_code in (404, 405, 422) and not answer.history, (name, answer.status_code, answer.text)
        # curl -L normalises to the trailing slash: no redirect carries the DELETE on.
        for path in ("/v1/galleries/staff/", "/v1/galleries/staff/identities/", "/v1/galleries/"):
            for method in ("DELETE", "POST", "PATCH", "GET"):
                answer = client.request(method, path, headers=served.admin())
                assert answer.status_code in (404, 405) and not answer.history, (method, path, answer.status_code)
        assert (served.root / "staff" / "gallery.db").is_file() and _labels(served) == dict.fromkeys(LEGACY, 1)
        # Percent-encoded dots reach the route as the name "..": exactly that person, or nobody.
        gone = client.delete("/v1/galleries/staff/identities/%2e%2e", headers=served.admin())
        assert gone.status_code == 200 and gone.json()["deleted"] == ".." and gone.json()["items"] == 1
        assert "staff" in [g["name"] for g in client.get("/v1/galleries", headers=served.admin()).json()["galleries"]]
    assert _labels(served) == dict.fromkeys([n for n in LEGACY if n != ".."], 1)


def test_a_gallery_is_deleted_only_when_the_request_names_it_twice(served: Served) -> None:
    for path in ("/v1/galleries/staff", "/v1/galleries/staff?confirm=other", "/v1/galleries/staff?confirm=Staff"):
        answer = served.client.delete(path, headers=served.admin())
        message = answer.json()["error"]["message"]
        assert answer.status_code == 422 and ("confirm=staff" in message or message == "query.confirm: Field required")
    assert (served.root / "staff" / "gallery.db").is_file()
    assert served.client.delete("/v1/galleries/staff?confirm=staff", headers=served.admin()).json()["deleted"] == "staff"


def test_every_stored_label_is_reachable_by_its_id_and_only_it(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    store_legacy(served.root / "staff", monkeypatch, LEGACY)
    listed = served.client.get("/v1/galleries/staff/identities", headers=served.key("read")).json()["identities"]
    ids = {i["identity"]: i["id"] for i in listed}
    assert ids == {label: identity_id(label) for label in LEGACY}
    for label in LEGACY:
        one = served.client.get(f"/v1/galleries/staff/ids/{ids[label]}", headers=served.key("read")).json()
        assert one["identity"] == label and [i["identity"] for i in one["items"]] == [label]
    renamed = served.client.patch(f"/v1/galleries/staff/ids/{ids['a/b']}", json={"name": "ab"}, headers=served.key("write"))
    assert renamed.json() == {"identity": "ab", "id": identity_id("ab"), "renamed": "a/b", "items": 1}
    for label in (".", "\u200b", "alice "):
        deleted = served.client.delete(f"/v1/galleries/staff/ids/{ids[label]}", headers=served.key("write")).json()
        assert deleted == {"deleted": label, "id": ids[label], "items": 1}
    assert _labels(served) == {"..": 1, "%2e%2e": 1, "ab": 1}
    for bad in ("..", "0" * 31, "G" * 32, "%2e%2e", ids[".."] + "0"):
        answer = served.client.delete(f"/v1/galleries/staff/ids/{bad}", headers=served.key("write"))
        # ".." is normalised by the client to the gallery, which a write key may not delete.
        assert answer.status_code in (403, 404, 422), bad
    absent = served.client.delete(f"/v1/galleries/staff/ids/{identity_id('nobody')}", headers=served.key("write"))
    assert absent.status_code == 404 and _labels(served) == {"..": 1, "%2e%2e": 1, "ab": 1}


@pytest.mark.parametrize("name", ["..", ".", "%2e%2e", "\u200b", "a\u202eb", " alice", "alice ", "a  b", "\ufeff"])
def test_a_new_name_that_is_a_path_or_invisible_is_refused_at_enrol_and_rename(
    served: Served, crops: dict[str, list[Path]], name: str
) -> None:
    photo = files(next(iter(crops.values()))[:1])
    escaped = name.replace("%", "%25")
    enrol = served.client.post(f"/v1/galleries/staff/identities/{escaped}/images", files=photo, headers=served.key("write"))
    assert enrol.status_code in (404, 405, 422), (name, enrol.status_code)
    in_json = served.client.post(
        "/v1/galleries/staff/identities/bob/images", files=photo, headers=served.key("write")
    ).json()
    assert in_json["identity"] == "bob"
    rename = served.client.patch("/v1/galleries/staff/identities/bob", json={"name": name}, headers=served.key("write"))
    assert rename.status_code == 422, (name, rename.text)
    assert _labels(served) == {"bob": 1}


def test_case_and_unicode_forms_are_one_name(served: Served, crops: dict[str, list[Path]]) -> None:
    photos = [p for paths in crops.values() for p in paths]
    write = served.key("write")
    assert served.client.post("/v1/galleries/staff/identities/alice/images", files=files(photos[:1]), headers=write).status_code == 200
    twin = served.client.post("/v1/galleries/staff/identities/Alice/images", files=files(photos[1:2]), headers=write)
    assert twin.status_code == 409 and "only in case" in twin.json()["error"]["message"]
    nfd, nfc = "Rene\u0301e", "Ren\u00e9e"
    first = served.client.post(f"/v1/galleries/staff/identities/{nfc}/images", files=files(photos[2:3]), headers=write)
    second = served.client.post(f"/v1/galleries/staff/identities/{nfd}/images", files=files(photos[3:4]), headers=write)
    assert first.json()["identity"] == second.json()["identity"] == nfc and second.json()["added"] == 1
    assert _labels(served) == {"alice": 1, nfc: 2}
    # Looked up by its NFD spelling, it is the NFC identity, never another.
    assert served.client.get(f"/v1/galleries/staff/identities/{nfd}", headers=served.key("read")).json()["identity"] == nfc
    assert served.client.get("/v1/galleries/staff/identities/ALICE", headers=served.key("read")).status_code == 404
    verified = served.client.post(
        "/v1/galleries/staff/verify", files=files(photos[2:3], "image"), data={"identity": nfd}, headers=served.key("read")
    )
    assert verified.status_code == 200 and verified.json()["distance"] < 0.01
    gallery = served.client.post("/v1/galleries", json={"name": "STAFF"}, headers=served.admin())
    assert gallery.status_code == 409 and "only in case" in gallery.json()["error"]["message"]


def test_no_route_answers_a_redirect(served: Served) -> None:
    routes = [(path, methods) for path, methods in routes_of(served.client.app) if path.startswith("/v1/")]
    assert len(routes) > 20
    for path, methods in routes:
        concrete = path.replace("{gallery}", "staff").replace("{identity}", "x").replace("{item}", "1")
        concrete = concrete.replace("{identity_id}", identity_id("x")).replace("{watch_id}", "w").replace("{key_id}", "k")
        for method in sorted(methods - {"HEAD"}):
            answer = served.client.request(method, concrete + "/", headers=served.admin(), follow_redirects=False)
            assert answer.status_code in (404, 405), (method, concrete, answer.status_code)
