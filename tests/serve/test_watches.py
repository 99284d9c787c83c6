"""Watches: a tracked query on a short real video (OpenCV's vtest.avi), its events as
Server-Sent Events, pause, stop, and the sources and keys allowed."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from serve_helpers import Served, bearer, files, serve_root

from reid.errors import ConfigError
from reid.models import Encoder
from reid.serve import load_serve_config
from reid.serve.watches import check_source


@pytest.fixture
def watched(tmp_path: Path, model_folder: Path, encoder: Encoder, pedestrian_video: Path) -> Served:
    service, client = serve_root(
        tmp_path / "root", model_folder, encoder, watch_files=[str(pedestrian_video)],
        galleries={"staff": {"detect": "person"}},
    )  # fmt: skip
    served = Served(tmp_path / "root", service, client, {})
    served.create("staff")
    served.create("other")
    served.keys = {"read": served.new_key("staff", "read"), "write": served.new_key("staff", "write"),
                   "other": served.new_key("other", "read")}  # fmt: skip
    return served


def _events(served: Served, watch_id: str, headers: dict[str, str]) -> list[tuple[str, str, dict]]:
    found = []
    with served.client.stream("GET", f"/v1/watches/{watch_id}/events", headers=headers) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        block: dict[str, str] = {}
        for line in response.iter_lines():
            if line.startswith(("id: ", "event: ", "data: ")):
                key, _, value = line.partition(": ")
                block[key] = value
            elif not line and block:
                found.append((block["id"], block["event"], json.loads(block["data"])))
                block = {}
    return found


def test_a_watch_streams_its_tracks_and_ends(watched: Served, pedestrian_video: Path, crops: dict[str, list[Path]]) -> None:
    watched.client.post("/v1/galleries/staff/identities/a/images", files=files(next(iter(crops.values()))[:2]), headers=watched.admin())
    started = watched.client.post(
        "/v1/watches", json={"gallery": "staff", "source": str(pedestrian_video), "max_frames": 30}, headers=watched.admin()
    )
    assert started.status_code == 201, started.text
    watch = started.json()["id"]
    events = _events(watched, watch, watched.key("read"))
    kinds = [kind for _, kind, _ in events]
    assert kinds[-1] == "done" and kinds.count("done") == 1
    assert [int(seq) for seq, _, _ in events] == list(range(1, len(events) + 1))
    done = events[-1][2]
    assert done["state"] == "done" and done["frames"] == 30 and done["fps"] > 0
    ended = [data for _, kind, data in events if kind == "ended"]
    assert ended, "people walk through vtest.avi: some tracks end"
    for track in ended:
        assert track["decision"] in ("known", "unknown") and (track["identity"] is None) == (track["decision"] == "unknown")
        assert 0 <= track["start_frame"] <= track["end_frame"] < 30 and track["frames"] >= 1 and len(track["box"]) == 4
    # Reconnecting after an event gets only what followed it.
    later = _events(watched, watch, {**watched.key("read"), "Last-Event-ID": events[-2][0]})
    assert [kind for _, kind, _ in later] == ["done"]
    # An id that is no whole number (a superscript isdigit() takes, thousands of digits) is one 422.
    for bad in ("²".encode(), b"9" * 5000, b"-1", b"1_0", "١".encode()):
        refused = watched.client.get(f"/v1/watches/{watch}/events", headers={**watched.key("read"), "Last-Event-ID": bad})
        assert refused.status_code == 422 and refused.json()["error"]["message"].startswith("Last-Event-ID: "), bad
    listed = watched.client.get("/v1/watches", headers=watched.key("read")).json()["watches"]
    assert [w["id"] for w in listed] == [watch] and listed[0]["state"] == "done"
    assert watched.client.get("/v1/watches", headers=watched.key("other")).json()["watches"] == []
    assert 'reid_serve_watch_fps{watch="' in watched.client.get("/metrics").text


def test_pause_resume_and_stop(watched: Served, pedestrian_video: Path) -> None:
    watch = watched.client.post(
        "/v1/watches", json={"gallery": "staff", "source": str(pedestrian_video)}, headers=watched.admin()
    ).json()["id"]
    assert watched.client.post(f"/v1/watches/{watch}/pause", headers=watched.admin()).json()["state"] == "paused"
    assert watched.client.post(f"/v1/watches/{watch}/pause", headers=watched.key("read")).status_code == 403
    assert watched.client.post(f"/v1/watches/{watch}/resume", headers=watched.admin()).json()["state"] in ("running", "starting")
    assert watched.client.delete(f"/v1/watches/{watch}", headers=watched.admin()).status_code == 200
    deadline = time.monotonic() + 60
    while watched.client.get(f"/v1/watches/{watch}", headers=watched.admin()).json()["state"] != "stopped":
        assert time.monotonic() < deadline, "the watch did not stop"
        time.sleep(0.1)
    assert _events(watched, watch, watched.admin())[-1][1] == "done"


def test_only_allowed_sources_and_keys(watched: Served, pedestrian_video: Path, tmp_path: Path) -> None:
    other_video = tmp_path / "copy.avi"
    other_video.write_bytes(pedestrian_video.read_bytes()[:1000])
    for source in ("/etc/passwd", str(other_video), "0", "rtsp://camera.example/1", "../" * 8 + "etc/hosts"):
        refused = watched.client.post("/v1/watches", json={"gallery": "staff", "source": source}, headers=watched.admin())
        assert refused.status_code == 422
        # Paths and URLs are not echoed: the answer does not tell which files exist.
        assert len(source) < 4 or source not in refused.json()["error"]["message"]
    write_only = watched.client.post(
        "/v1/watches", json={"gallery": "staff", "source": str(pedestrian_video)}, headers=watched.key("write")
    )
    assert write_only.status_code == 403
    watch = watched.client.post(
        "/v1/watches", json={"gallery": "staff", "source": str(pedestrian_video), "max_frames": 2}, headers=watched.admin()
    ).json()["id"]
    assert watched.client.get(f"/v1/watches/{watch}", headers=watched.key("other")).status_code == 404
    assert watched.client.get(f"/v1/watches/{watch}/events", headers=watched.key("write")).status_code == 403
    assert watched.client.get(f"/v1/watches/{watch}").status_code == 401
    assert watched.client.get("/v1/watches/nope", headers=bearer(watched.keys["read"])).status_code == 404
    _events(watched, watch, watched.admin())


WATCH_ROUTES = [
    ("start", "POST", "/v1/watches", 201),
    ("list", "GET", "/v1/watches", 200),
    ("state", "GET", "/v1/watches/{w}", 200),
    ("events", "GET", "/v1/watches/{w}/events", 200),
    ("pause", "POST", "/v1/watches/{w}/pause", 200),
    ("resume", "POST", "/v1/watches/{w}/resume", 200),
    ("stop", "DELETE", "/v1/watches/{w}", 200),
]
# Who gets what: a key of another gallery is not told that the watch exists.
EXPECTED = {
    "start": {"read": 403, "write": 403, "both": 403, "other": 403},
    "list": {"read": 200, "write": 403, "both": 200, "other": 200},
    "state": {"read": 200, "write": 403, "both": 200, "other": 404},
    "events": {"read": 200, "write": 403, "both": 200, "other": 404},
    "pause": {"read": 403, "write": 403, "both": 403, "other": 403},
    "resume": {"read": 403, "write": 403, "both": 403, "other": 403},
    "stop": {"read": 403, "write": 403, "both": 403, "other": 403},
}


@pytest.mark.parametrize("name,method,path,success", WATCH_ROUTES, ids=[r[0] for r in WATCH_ROUTES])
def test_every_watch_route_for_every_key(watched: Served, pedestrian_video: Path, name: str, method: str, path: str, success: int) -> None:
    watched.keys["both"] = watched.new_key("staff", "read", "write")
    body = {"gallery": "staff", "source": str(pedestrian_video), "max_frames": 2}
    watch = watched.client.post("/v1/watches", json=body, headers=watched.admin()).json()["id"]
    _events(watched, watch, watched.admin())
    got = {}
    for who in ("none", "wrong", "read", "write", "both", "other", "admin"):
        headers = {} if who == "none" else bearer("rk_000000000000_" + "z" * 43) if who == "wrong" else (
            watched.admin() if who == "admin" else watched.key(who)
        )  # fmt: skip
        kwargs = {"json": body} if name == "start" else {}
        got[who] = watched.client.request(method, path.format(w=watch), headers=headers, **kwargs).status_code
    assert got == {"none": 401, "wrong": 401, **EXPECTED[name], "admin": success}


@pytest.mark.parametrize(
    "source",
    [
        "rtsp://10.0.0.5@127.0.0.1:{port}/x",
        "rtsp://10.0.0.5:554@127.0.0.1:{port}/x",
        "rtsp://a@10.0.0.5:554@127.0.0.1:{port}/x",
        "rtsp://10.0.0.5.127.0.0.1.nip.io:{port}/x",
        "rtsp://10.0.0.5:554\\@127.0.0.1:{port}/x",
        "rtsp://127.0.0.1:{port}/10.0.0.5:554/live",
        "rtsp://10.0.0.5:554 @127.0.0.1:{port}/",
        "rtsp://10.0.0.50:554/live",
        "rtsp://10.0.0.5:5540/live",
        "rtsp://10.0.0.5/live",
        "http://10.0.0.5:554/live",
        "rtsp://10.0.0.5:554/lively",
        "rtsp://10.0.0.5:554/live/../../admin",
    ],
)
def test_a_stream_url_is_compared_by_scheme_host_port_and_path_never_as_a_string(
    tmp_path: Path, model_folder: Path, encoder: Encoder, source: str
) -> None:
    """An allow-list entry is a URL with a whole host; a source names another host (whatever
    it starts with) and is refused before anything connects to it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        service, client = serve_root(tmp_path / "root", model_folder, encoder, watch_urls=["rtsp://10.0.0.5:554/live"])
        served = Served(tmp_path / "root", service, client, {})
        served.create("staff")
        answer = client.post("/v1/watches", json={"gallery": "staff", "source": source.format(port=port)}, headers=served.admin())
        assert answer.status_code == 422, answer.text
        assert "127.0.0.1" not in answer.text
        with pytest.raises(TimeoutError):
            listener.accept()
    assert client.get("/v1/watches", headers=served.admin()).json()["watches"] == []


def test_stream_urls_the_list_admits_and_entries_it_refuses() -> None:
    config = load_serve_config(None, watch_urls=["rtsp://10.0.0.5:554/live", "http://Cam1.example.org/"])
    for admitted, shown in (
        ("rtsp://10.0.0.5:554/live", "rtsp://10.0.0.5:554/live"),
        ("RTSP://10.0.0.5:554/live/2?channel=1", "rtsp://10.0.0.5:554/live/2?channel=1"),
        ("rtsp://viewer:pw@10.0.0.5:554/live", "rtsp://10.0.0.5:554/live"),
        ("http://cam1.EXAMPLE.org/any/path", "http://cam1.EXAMPLE.org/any/path"),
    ):
        assert check_source(config, admitted) == (admitted, shown)
    for entry in ("rtsp://10.0.0.", "rtsp://10.0.0", "rtsp://", "10.0.0.5:554", "rtsp://user:pw@10.0.0.5/", "rtsp://a b/"):
        with pytest.raises(ConfigError, match="watch_urls"):
            load_serve_config(None, watch_urls=[entry])


def test_event_streams_are_bounded_per_key_and_in_all(
    tmp_path: Path, model_folder: Path, encoder: Encoder, pedestrian_video: Path
) -> None:
    from serve_helpers import ADMIN, Served, uvicorn_in_thread

    service, client = serve_root(
        tmp_path / "root", model_folder, encoder, watch_files=[str(pedestrian_video)], max_event_streams=6
    )
    served = Served(tmp_path / "root", service, client, {})
    served.create("staff")
    read, other = served.new_key("staff", "read"), served.new_key("staff", "read")
    watch = client.post("/v1/watches", json={"gallery": "staff", "source": str(pedestrian_video)}, headers=served.admin())
    watch_id = watch.json()["id"]
    # A paused watch's stream stays open, as a live camera's does.
    assert client.post(f"/v1/watches/{watch_id}/pause", headers=served.admin()).status_code == 200
    with uvicorn_in_thread(service) as url:
        host, port = url.removeprefix("http://").split(":")

        def stream(key: str) -> tuple[socket.socket, str]:
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.sendall(f"GET /v1/watches/{watch_id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n".encode())
            return sock, sock.recv(4096).decode("latin-1").split("\r\n", 1)[0]

        mine = [stream(read) for _ in range(4)]
        assert [line for _, line in mine] == ["HTTP/1.1 200 OK"] * 4
        # A fifth of one key is refused; other keys still stream, up to the process's bound.
        assert stream(read)[1] == "HTTP/1.1 503 Service Unavailable"
        theirs = [stream(other), stream(ADMIN)]
        assert [line for _, line in theirs] == ["HTTP/1.1 200 OK"] * 2
        assert stream(other)[1] == "HTTP/1.1 503 Service Unavailable"
        # A stream closed by its client gives its place back.
        mine[0][0].close()
        deadline = time.monotonic() + 10
        while (again := stream(read))[1] != "HTTP/1.1 200 OK":
            again[0].close()
            assert time.monotonic() < deadline, "a closed stream kept its place"
            time.sleep(0.3)
        for sock, _ in [*mine[1:], *theirs, again]:
            sock.close()
