"""Hostile requests: decompression bombs, truncated files, a gigabyte body, paths and URLs
where an image belongs, a 10,000-character identity, markup in names, malformed forms.
Every answer is a 4xx JSON error of one line, and the gallery is unchanged."""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image
from serve_helpers import Served, b64, files, serve_root

from reid.gallery import Gallery
from reid.models import Encoder


def _png_bomb(width: int = 30_000, height: int = 30_000) -> bytes:
    """A PNG whose header declares width x height pixels (900 megapixels) in a few hundred bytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" * 1000)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def _error(response, status: int) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    message = body["error"]["message"]
    assert "\n" not in message and "Traceback" not in message
    return message


def _items(served: Served) -> int:
    with Gallery.open(served.root / "staff") as gallery:
        return len(gallery)


def test_a_decompression_bomb_is_refused_before_decoding(served: Served) -> None:
    bomb = ("bomb.png", _png_bomb(), "image/png")
    message = _error(served.client.post("/v1/galleries/staff/search", files=[("image", bomb)], headers=served.key("read")), 422)
    assert "bomb.png: image declares 30000 x 30000 pixels, over the limit" in message
    enrol = served.client.post("/v1/galleries/staff/identities/x/images", files=[("images", bomb)], headers=served.key("write"))
    assert enrol.status_code == 200 and enrol.json()["files"][0]["outcome"] == "skipped"
    assert "over the limit" in enrol.json()["files"][0]["reason"] and _items(served) == 0


def test_truncated_and_garbage_images(served: Served, crops: dict[str, list[Path]]) -> None:
    whole = next(iter(crops.values()))[0].read_bytes()
    for name, payload in (("cut.jpg", whole[: len(whole) // 3]), ("noise.jpg", b"\xff\xd8\xff" + b"\x00" * 50), ("one.jpg", b"x")):
        message = _error(
            served.client.post("/v1/galleries/staff/embed", files=[("image", (name, payload, "image/jpeg"))], headers=served.key("read")),
            422,
        )  # fmt: skip
        assert message.startswith(f"{name}: ")
    empty = served.client.post("/v1/galleries/staff/search", files=[("image", ("e.jpg", b"", "image/jpeg"))], headers=served.key("read"))
    assert _error(empty, 422) == "e.jpg: empty file"


def test_a_gigabyte_body_is_refused_by_its_length_and_a_streamed_one_by_its_bytes(served: Served) -> None:
    declared = served.client.post(
        "/v1/galleries/staff/search", content=b"x" * 10, headers={**served.key("read"), "Content-Length": str(2**30)}
    )
    assert "over the limit" in _error(declared, 413)
    limit = served.service.config.max_body_bytes

    def stream():  # type: ignore[no-untyped-def]
        for _ in range(limit // (1 << 20) + 2):
            yield b"\x00" * (1 << 20)

    streamed = served.client.post(
        "/v1/galleries/staff/identities/x/images", content=stream(),
        headers={**served.key("write"), "Content-Type": "multipart/form-data; boundary=b"},
    )  # fmt: skip
    _error(streamed, 413)


def test_too_many_images_in_one_request(tmp_path: Path, model_folder: Path, encoder: Encoder) -> None:
    service, client = serve_root(tmp_path / "root", model_folder, encoder, max_images=2, no_auth=True)
    client.post("/v1/galleries", json={"name": "g"})
    three = [("images", (f"{n}.png", b"x", "image/png")) for n in range(3)]
    assert "at most 2 images" in _error(client.post("/v1/galleries/g/identities/x/images", files=three), 413)


@pytest.mark.parametrize(
    "data", ["/etc/passwd", "../../gallery.db", "file:///etc/shadow", "http://example.com/a.jpg", "C:\\\\photos\\\\a.jpg", "~/a.jpg"]
)
def test_a_path_or_url_where_an_image_belongs_is_a_422(served: Served, data: str) -> None:
    message = _error(
        served.client.post("/v1/galleries/staff/search", json={"image": {"data": data}}, headers=served.key("read")), 422
    )
    assert "never paths or URLs" in message and data not in message


def test_a_path_field_or_text_in_a_file_field_is_a_422(served: Served) -> None:
    extra = served.client.post(
        "/v1/galleries/staff/search", json={"image": {"data": "aGk="}, "path": "/etc/passwd"}, headers=served.key("read")
    )
    assert _error(extra, 422).startswith("path: Extra inputs are not permitted")
    url = served.client.post("/v1/galleries/staff/search", json={"url": "http://x/y.jpg"}, headers=served.key("read"))
    _error(url, 422)
    text = served.client.post("/v1/galleries/staff/search", files={"image": (None, "/etc/passwd")}, headers=served.key("read"))
    assert "must be an uploaded file, not text" in _error(text, 422)
    wrong_type = served.client.post("/v1/galleries/staff/search", content=b"raw", headers={**served.key("read"), "Content-Type": "image/jpeg"})
    _error(wrong_type, 415)
    not_json = served.client.post("/v1/galleries/staff/search", content=b"{", headers={**served.key("read"), "Content-Type": "application/json"})
    _error(not_json, 422)


def test_long_and_odd_identities_and_names(served: Served, crops: dict[str, list[Path]]) -> None:
    long = "x" * 10_000
    photo = files(next(iter(crops.values()))[:1])
    message = _error(served.client.post(f"/v1/galleries/staff/identities/{long}/images", files=photo, headers=served.key("write")), 422)
    assert "10000 characters long" in message and long not in message
    control = served.client.post("/v1/galleries/staff/identities/a%00b/images", files=photo, headers=served.key("write"))
    assert "control character U+0000" in _error(control, 422)
    rename = served.client.patch("/v1/galleries/staff/identities/x", json={"name": long}, headers=served.key("write"))
    _error(rename, 422)
    assert "gallery name '../etc'" in _error(served.client.post("/v1/galleries", json={"name": "../etc"}, headers=served.admin()), 422)
    # An escaped slash makes another path, which no route has; a name no folder may have is refused.
    assert _error(served.client.get("/v1/galleries/..%2F..%2Fetc", headers=served.admin()), 404) == "Not Found"
    assert "gallery name '.hidden'" in _error(served.client.get("/v1/galleries/.hidden", headers=served.admin()), 422)
    markup = "<img src=x onerror=alert(1)> [bold]x &amp;"
    added = served.client.post(f"/v1/galleries/staff/identities/{markup}/images", files=photo, headers=served.key("write"))
    assert added.status_code == 200 and added.json()["identity"] == markup
    listed = served.client.get("/v1/galleries/staff/identities", headers=served.key("read"))
    assert listed.headers["content-type"] == "application/json" and listed.json()["identities"][0]["identity"] == markup
    assert _items(served) == 1


def test_bad_numbers_and_bad_json_fields(served: Served, crops: dict[str, list[Path]]) -> None:
    photo = files(next(iter(crops.values()))[:1], "image")
    for field, value in (("threshold", "0"), ("threshold", "nan"), ("threshold", "2.5"), ("top_k", "0"), ("top_k", "x")):
        _error(served.client.post("/v1/galleries/staff/search", files=photo, data={field: value}, headers=served.key("read")), 422)
    body = {"image": b64(next(iter(crops.values()))[0]), "threshold": -1}
    _error(served.client.post("/v1/galleries/staff/search", json=body, headers=served.key("read")), 422)
    _error(served.client.get("/v1/galleries/staff/identities?limit=100000", headers=served.key("read")), 422)
    _error(served.client.delete("/v1/galleries/staff/identities/x/items/notanumber", headers=served.key("write")), 422)
    huge = json.dumps({"images": [{"data": "A" * 100}] * 3})
    enrol = served.client.post("/v1/galleries/staff/identities/x/images", content=huge, headers={**served.key("write"), "Content-Type": "application/json"})
    assert [f["outcome"] for f in enrol.json()["files"]] == ["skipped"] * 3


def test_unknown_routes_and_methods_are_json(served: Served) -> None:
    assert _error(served.client.get("/v1/nothing"), 404) == "Not Found"
    assert _error(served.client.put("/v1/health"), 405) == "Method Not Allowed"
    assert _error(served.client.get("/v1/galleries/nope", headers=served.admin()), 404) == "no gallery 'nope'"


def test_a_jpeg_in_base64_is_not_taken_for_a_path(served: Served) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 64), (200, 10, 10)).save(buffer, "JPEG")
    import base64

    data = base64.b64encode(buffer.getvalue()).decode()
    assert data.startswith("/9j/")
    ok = served.client.post("/v1/galleries/staff/search", json={"image": {"data": f"data:image/jpeg;base64,{data}"}}, headers=served.key("read"))
    assert ok.status_code == 200 and len(ok.json()["subjects"]) == 1


def test_item_ids_beyond_64_bits_are_a_422(served: Served) -> None:
    for method in ("DELETE", "GET"):
        path = "/v1/galleries/staff/identities/x/items/" if method == "DELETE" else "/v1/galleries/staff/items/"
        suffix = "" if method == "DELETE" else "/thumbnail"
        response = served.client.request(method, f"{path}{2**70}{suffix}", headers=served.admin())
        _error(response, 422)
