"""Every route in process (FastAPI's test client) on real crops and a real untrained model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from serve_helpers import Served, b64, files

from reid.data.io import read_image
from reid.gallery import Gallery
from reid.names import identity_id


def _enrol(served: Served, identity: str, paths: list[Path], gallery: str = "staff") -> dict:
    key = served.key("write" if gallery == "staff" else "other")
    response = served.client.post(f"/v1/galleries/{gallery}/identities/{identity}/images", files=files(paths), headers=key)
    assert response.status_code == 200, response.text
    return response.json()


def test_health_ready_and_metrics(served: Served) -> None:
    assert served.client.get("/v1/health").json() == {"status": "ok"}
    ready = served.client.get("/v1/ready").json()
    assert ready["ready"] is True and ready["models"][0]["name"] == "m" and ready["models"][0]["dim"] == 64
    served.client.get("/v1/galleries/staff", headers=served.key("read"))
    text = served.client.get("/metrics").text
    assert 'reid_serve_requests_total{method="GET",route="/v1/galleries/{gallery}",status="200"}' in text
    assert "reid_serve_request_seconds_bucket" in text and "reid_serve_queue_depth" in text


def test_galleries_list_info_create_delete(served: Served, crops: dict[str, list[Path]]) -> None:
    names = [g["name"] for g in served.client.get("/v1/galleries", headers=served.admin()).json()["galleries"]]
    assert names == ["other", "staff"]
    # A gallery key sees its own gallery only.
    mine = served.client.get("/v1/galleries", headers=served.key("read")).json()["galleries"]
    assert [g["name"] for g in mine] == ["staff"]
    info = served.client.get("/v1/galleries/staff", headers=served.key("read")).json()
    assert info["model"] == "m" and info["items"] == 0 and info["dim"] == 64 and info["thumbnails"] is True
    threshold = info["threshold"]
    assert {k: threshold[k] for k in ("value", "source", "detail")} == {"value": 0.05, "source": "given", "detail": "serve settings"}
    # 0.05 is under half the stand-in card's 0.3: the service says so, as the commands do.
    assert threshold["note"].startswith("note: serve settings 0.0500 is under half of stand-in's own threshold")
    other = served.client.get("/v1/galleries/other", headers=served.key("other")).json()
    assert other["threshold"]["source"] == "model card" and other["threshold"]["value"] == 0.3
    again = served.client.post("/v1/galleries", json={"name": "staff"}, headers=served.admin())
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    _enrol(served, "p1", crops[next(iter(crops))][:2], gallery="other")
    gone = served.client.delete("/v1/galleries/other?confirm=other", headers=served.admin())
    assert gone.status_code == 200 and gone.json() == {"deleted": "other", "items": 2}
    assert not (served.root / "other").exists()
    # Its keys went with it.
    assert served.client.get("/v1/galleries/other", headers=served.key("other")).status_code == 401
    assert served.client.get("/v1/galleries/other", headers=served.admin()).status_code == 404
    assert served.client.delete("/v1/galleries/other?confirm=other", headers=served.admin()).status_code == 404


def test_enrol_multipart_and_json_with_per_file_outcomes(served: Served, crops: dict[str, list[Path]]) -> None:
    first, second = list(crops)[:2]
    report = _enrol(served, "alice", crops[first][:2])
    assert (report["added"], report["duplicates"], report["skipped"], report["gallery_items"]) == (2, 0, 0, 2)
    assert [f["outcome"] for f in report["files"]] == ["added", "added"]
    upload = [b64(crops[first][0]), b64(crops[second][0]), {"name": "broken.jpg", "data": "aGVsbG8="}]
    response = served.client.post(
        "/v1/galleries/staff/identities/alice/images", json={"images": upload}, headers=served.key("write")
    )
    assert response.status_code == 200
    outcomes = {f["name"]: (f["outcome"], f["reason"]) for f in response.json()["files"]}
    assert outcomes[crops[first][0].name] == ("duplicate", "duplicate of an enrolled image")
    assert outcomes[crops[second][0].name] == ("added", None)
    assert outcomes["broken.jpg"][0] == "skipped" and outcomes["broken.jpg"][1].startswith("not a readable image")
    with Gallery.open(served.root / "staff") as gallery:
        assert len(gallery) == 3 and sorted(i.source for i in gallery.items("alice"))[0].endswith(".jpg")


def test_identities_paged_one_rename_delete_and_delete_item(served: Served, crops: dict[str, list[Path]]) -> None:
    people = list(crops)
    for n, pid in enumerate(people):
        _enrol(served, f"person-{n}", crops[pid][:2])
    page = served.client.get("/v1/galleries/staff/identities?offset=1&limit=2", headers=served.key("read")).json()
    assert page["total"] == len(people) and [i["identity"] for i in page["identities"]] == ["person-1", "person-2"]
    one = served.client.get("/v1/galleries/staff/identities/person-0", headers=served.key("read")).json()
    assert len(one["items"]) == 2 and one["items"][0]["source"] == crops[people[0]][0].name
    renamed = served.client.patch(
        "/v1/galleries/staff/identities/person-0", json={"name": "Alice Smith"}, headers=served.key("write")
    )
    assert renamed.json() == {"identity": "Alice Smith", "id": identity_id("Alice Smith"), "renamed": "person-0", "items": 2}
    taken = served.client.patch(
        "/v1/galleries/staff/identities/person-1", json={"name": "Alice Smith"}, headers=served.key("write")
    )
    assert taken.status_code == 409
    message = taken.json()["error"]["message"]
    assert message.startswith("staff: identity") and str(served.root) not in message, message
    item = one["items"][0]["id"]
    removed = served.client.delete(f"/v1/galleries/staff/identities/Alice Smith/items/{item}", headers=served.key("write"))
    assert removed.status_code == 200 and removed.json()["id"] == item
    wrong_owner = served.client.delete(
        f"/v1/galleries/staff/identities/person-1/items/{one['items'][1]['id']}", headers=served.key("write")
    )
    assert wrong_owner.status_code == 404
    deleted = served.client.delete("/v1/galleries/staff/identities/person-1", headers=served.key("write"))
    assert deleted.json() == {"deleted": "person-1", "id": identity_id("person-1"), "items": 2}
    missing = served.client.get("/v1/galleries/staff/identities/person-1", headers=served.key("read"))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    with Gallery.open(served.root / "staff") as gallery:
        assert {s.identity: s.items for s in gallery.identities()}["Alice Smith"] == 1
        assert gallery.check(queries=5, k=2).items == 2 * len(people) - 3


def test_search_names_the_enrolled_and_says_unknown_for_a_stranger(served: Served, crops: dict[str, list[Path]]) -> None:
    known, stranger = list(crops)[:2]
    _enrol(served, "alice", crops[known][:2])
    hit = served.client.post(
        "/v1/galleries/staff/search", files=files(crops[known][:1], "image"), headers=served.key("read")
    ).json()
    assert {k: hit["threshold"][k] for k in ("value", "source", "detail")} == {
        "value": 0.05, "source": "given", "detail": "serve settings"
    }  # fmt: skip
    subject = hit["subjects"][0]
    image = read_image(crops[known][0])
    assert subject["box"] == [0, 0, image.shape[1], image.shape[0]]
    assert subject["identity"] == "alice" and subject["decision"] == "known" and subject["distance"] < 1e-3
    assert subject["matches"][0]["identity"] == "alice"
    thumb = served.client.get(f"/v1/galleries/staff/items/{subject['matches'][0]['item']}/thumbnail", headers=served.key("read"))
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg" and thumb.content[:2] == b"\xff\xd8"
    assert served.client.get("/v1/galleries/staff/items/999/thumbnail", headers=served.key("read")).status_code == 404
    miss = served.client.post(
        "/v1/galleries/staff/search", json={"image": b64(crops[stranger][0]), "top_k": 1}, headers=served.key("read")
    ).json()["subjects"][0]
    assert miss["identity"] is None and miss["decision"] == "unknown" and miss["distance"] > 0.05
    assert len(miss["matches"]) == 1
    # The request's threshold wins, and says so.
    loose = served.client.post(
        "/v1/galleries/staff/search", files=files(crops[stranger][:1], "image"), data={"threshold": "2"},
        headers=served.key("read"),
    ).json()  # fmt: skip
    assert loose["threshold"]["detail"] == "request" and loose["subjects"][0]["identity"] == "alice"


def test_search_of_an_empty_gallery_finds_nobody_known(served: Served, crops: dict[str, list[Path]]) -> None:
    path = next(iter(crops.values()))[0]
    answer = served.client.post("/v1/galleries/staff/search", files=files([path], "image"), headers=served.key("read"))
    assert answer.status_code == 200
    assert answer.json()["subjects"][0]["decision"] == "unknown" and answer.json()["subjects"][0]["matches"] == []


def test_verify_two_images_and_against_an_identity(served: Served, crops: dict[str, list[Path]]) -> None:
    first, second = list(crops)[:2]
    _enrol(served, "alice", crops[first][:1])
    same = served.client.post(
        "/v1/galleries/staff/verify", files=files(crops[first][:1], "image") + files(crops[first][:1], "other"),
        headers=served.key("read"),
    ).json()  # fmt: skip
    assert same["same"] is True and same["distance"] < 1e-3 and same["threshold"]["value"] == 0.05
    different = served.client.post(
        "/v1/galleries/staff/verify", json={"image": b64(crops[second][0]), "identity": "alice"},
        headers=served.key("read"),
    ).json()  # fmt: skip
    assert different["same"] is False and different["identity"] == "alice" and different["distance"] > 0.05
    both = served.client.post(
        "/v1/galleries/staff/verify", json={"image": b64(crops[second][0])}, headers=served.key("read")
    )
    assert both.status_code == 422 and "second image or against an identity" in both.json()["error"]["message"]
    nobody = served.client.post(
        "/v1/galleries/staff/verify", json={"image": b64(crops[second][0]), "identity": "ghost"}, headers=served.key("read")
    )
    assert nobody.status_code == 404


def test_embed_gives_the_model_fingerprint_and_unit_rows(served: Served, crops: dict[str, list[Path]]) -> None:
    path = next(iter(crops.values()))[0]
    answer = served.client.post("/v1/galleries/staff/embed", files=files([path], "image"), headers=served.key("read")).json()
    assert answer["fingerprint"] == served.service.models["m"].card.fingerprint and answer["dim"] == 64
    row = np.asarray(answer["subjects"][0]["embedding"])
    assert row.shape == (64,) and abs(np.linalg.norm(row) - 1) < 1e-5
    direct = served.service.models["m"].embed([read_image(path)])[0]
    np.testing.assert_allclose(row, direct, atol=1e-5)


def test_keys_list_create_revoke(served: Served) -> None:
    listed = served.client.get("/v1/keys?gallery=staff", headers=served.admin()).json()["keys"]
    assert sorted(tuple(k["scopes"]) for k in listed) == [("read",), ("read", "write"), ("write",)]
    assert all("key" not in k and "sha256" not in k for k in listed)
    stored = (served.root / ".serve-keys.json").read_text()
    assert all(token not in stored for token in served.keys.values())
    read_id = next(k["id"] for k in listed if k["scopes"] == ["read"])
    assert served.client.delete(f"/v1/keys/{read_id}", headers=served.admin()).status_code == 200
    assert served.client.get("/v1/galleries/staff", headers=served.key("read")).status_code == 401
    assert served.client.delete(f"/v1/keys/{read_id}", headers=served.admin()).status_code == 404
    no_gallery = served.client.post("/v1/keys", json={"gallery": "nope", "scopes": ["read"]}, headers=served.admin())
    assert no_gallery.status_code == 404
    bad_scope = served.client.post("/v1/keys", json={"gallery": "staff", "scopes": ["delete"]}, headers=served.admin())
    assert bad_scope.status_code == 422


def test_openapi_describes_every_route(served: Served) -> None:
    schema = served.client.get("/openapi.json").json()
    paths = schema["paths"]
    assert set(paths["/v1/galleries/{gallery}/search"]["post"]["requestBody"]["content"]) == {
        "multipart/form-data", "application/json",
    }  # fmt: skip
    assert "/v1/galleries/{gallery}/identities/{identity}/items/{item}" in paths
    assert "SearchOut" in schema["components"]["schemas"] and "ErrorBody" in schema["components"]["schemas"]


def test_the_page_is_served_and_loads_nothing_from_elsewhere(served: Served) -> None:
    page = served.client.get("/")
    assert page.status_code == 200 and "<title>reid</title>" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name in ("app.js", "style.css"):
        asset = served.client.get(f"/static/{name}")
        assert asset.status_code == 200
        assert "http://" not in asset.text and "https://" not in asset.text and "innerHTML" not in asset.text
    assert "http://" not in page.text and "https://" not in page.text


def test_a_misspelt_form_field_is_refused_not_ignored(served: Served, crops: dict[str, list[Path]]) -> None:
    photo = next(iter(crops.values()))[:1]
    for route, fields in (
        ("search", {"treshold": "0.01"}),
        ("search", {"topk": "1"}),
        ("verify", {"treshold": "0.000001"}),
        ("embed", {"foo": "bar"}),
    ):
        answer = served.client.post(
            f"/v1/galleries/staff/{route}", files=files(photo, "image") + (files(photo, "other") if route == "verify" else []),
            data=fields, headers=served.key("read"),
        )  # fmt: skip
        assert answer.status_code == 422, (route, fields, answer.text)
        assert answer.json()["error"]["message"].startswith(f"{next(iter(fields))}: Extra inputs are not permitted")
    enrol = served.client.post(
        "/v1/galleries/staff/identities/ann/images", files=files(photo, "images"), data={"identiy": "bob"},
        headers=served.key("write"),
    )  # fmt: skip
    assert enrol.status_code == 422
    with Gallery.open(served.root / "staff") as gallery:
        assert len(gallery) == 0


def test_a_gallery_option_takes_a_boolean_not_a_word(served: Served) -> None:
    for value in ("no", "yes", 0, "false"):
        answer = served.client.post("/v1/galleries", json={"name": "g6", "thumbnails": value}, headers=served.admin())
        assert answer.status_code == 422, (value, answer.text)
    assert served.client.post("/v1/galleries", json={"name": "g6", "thumbnails": False}, headers=served.admin()).status_code == 201
