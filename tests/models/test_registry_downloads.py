"""Release artefacts (published files with their own URL, size and digest): downloads from a
real HTTP server on loopback, ``reid models add``, ``show`` and ``fetch``, and the zoo's
entries themselves."""

from __future__ import annotations

import hashlib
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reid.cli import app
from reid.errors import ModelError
from reid.models import registry
from reid.models.registry import (
    ARTEFACTS,
    Artefact,
    PublishedFile,
    add,
    cache_state,
    cached,
    cached_files,
    fetch_artefact,
    fetch_files,
)

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB: a broken download keeps all but its last chunk
OTHER = b"x" * len(PAYLOAD)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    requests_seen: dict[str, int]
    ranges: list[tuple[str, str | None]]
    slow_seconds: float


class _Handler(http.server.BaseHTTPRequestHandler):
    """``/good/NAME`` the payload (the rest of it for a ``Range: bytes=N-``); ``/truncated``
    half of it under the whole length; ``/short`` half of it, honestly labelled; ``/slow``
    headers then silence; ``/flaky`` truncated the first time, served as ``/good/`` after;
    ``/no-range`` the same, but ignoring ``Range``; anything else 404."""

    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        seen = self.server.requests_seen
        seen[self.path] = seen.get(self.path, 0) + 1
        self.server.ranges.append((self.path, self.headers.get("Range")))
        again = self.path in ("/flaky", "/no-range") and seen[self.path] > 1
        offset = int(self.headers["Range"][len("bytes="):].rstrip("-")) if self.headers.get("Range") else 0
        if (self.path.startswith("/good/") or again) and offset and self.path != "/no-range":
            self._send(PAYLOAD[offset:], len(PAYLOAD) - offset, status=206)
        elif self.path.startswith("/good/") or again:
            self._send(PAYLOAD, len(PAYLOAD))
        elif self.path in ("/truncated", "/flaky", "/no-range"):
            self._send(PAYLOAD[: len(PAYLOAD) // 2], len(PAYLOAD))
        elif self.path == "/short":
            self._send(PAYLOAD[: len(PAYLOAD) // 2], len(PAYLOAD) // 2)
        elif self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            time.sleep(self.server.slow_seconds)
        else:
            self.send_error(404, "File not found")

    def _send(self, body: bytes, length: int, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.requests_seen, httpd.ranges, httpd.slow_seconds = {}, [], 3.0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _url(server: _Server, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def _sha(algorithm: str, payload: bytes = PAYLOAD) -> str:
    return f"{algorithm}:{hashlib.new(algorithm, payload).hexdigest()}"


def _artefact(*files: PublishedFile, name: str = "test.release", layout: str = "openvino-ir") -> Artefact:
    return Artefact(name, "person-reid", "test", "release", "http://127.0.0.1/", "", "MIT", layout, "a test", files=files)


def _leftovers(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.is_file()] if cache.exists() else []


@pytest.mark.parametrize("algorithm", ["sha256", "sha384"])
def test_a_good_download_is_checked_then_cached(server: _Server, cache: Path, algorithm: str) -> None:
    published = PublishedFile("m.bin", _url(server, "/good/m.bin"), len(PAYLOAD), _sha(algorithm))
    artefact = _artefact(published)
    assert cached(artefact) is None and cache_state(artefact) == "no"
    path = fetch_artefact(artefact)
    assert path == cache / artefact.name / "m.bin" and path.read_bytes() == PAYLOAD
    assert cached(artefact) == path and cache_state(artefact) == "yes"
    assert fetch_artefact(artefact) == path and server.requests_seen["/good/m.bin"] == 1, "a cached file is not fetched again"


def test_a_model_of_two_files_fetches_both_and_reports_progress(server: _Server, cache: Path) -> None:
    files = (
        PublishedFile("m.xml", _url(server, "/good/m.xml"), len(PAYLOAD), _sha("sha384")),
        PublishedFile("m.bin", _url(server, "/good/m.bin"), len(PAYLOAD), _sha("sha384")),
    )
    artefact = _artefact(*files)
    bars: list[dict[str, object]] = []

    class Bar:
        def __init__(self, published: PublishedFile) -> None:
            self.total, self.record = 0, {"file": published.name, "counted": 0, "closed": False}
            bars.append(self.record)

        def update(self, count: int) -> None:
            self.record["counted"] = int(self.record["counted"]) + count

        def reset(self) -> None:
            self.record["counted"] = 0

        def close(self) -> None:
            self.record.update(closed=True, total=self.total)

    path = fetch_artefact(artefact, progress=Bar)
    assert path.name == "m.xml" and path.with_name("m.bin").read_bytes() == PAYLOAD
    assert [(b["file"], b["total"], b["counted"], b["closed"]) for b in bars] == [
        ("m.xml", len(PAYLOAD), len(PAYLOAD), True), ("m.bin", len(PAYLOAD), len(PAYLOAD), True),
    ]


@pytest.mark.parametrize(
    ("path", "size", "digest", "reason"),
    [
        ("/good/m.bin", len(PAYLOAD), _sha("sha256", OTHER), "with SHA256 "),
        ("/good/m.bin", len(PAYLOAD), _sha("sha384", OTHER), "with SHA384 "),
        ("/good/m.bin", len(PAYLOAD) + 1, _sha("sha256"), f"{len(PAYLOAD):,} bytes, expected {len(PAYLOAD) + 1:,}"),
        ("/short", len(PAYLOAD), _sha("sha256"), f"{len(PAYLOAD) // 2:,} bytes, expected {len(PAYLOAD):,}"),
        ("/truncated", len(PAYLOAD), _sha("sha256"), "the connection broke off"),
        ("/missing", len(PAYLOAD), _sha("sha256"), "HTTP 404"),
    ],
    ids=["wrong-sha256", "wrong-sha384", "wrong-size", "short", "truncated", "404"],
)
def test_a_bad_download_is_refused_in_one_line_and_leaves_nothing(
    server: _Server, cache: Path, path: str, size: int, digest: str, reason: str
) -> None:
    artefact = _artefact(PublishedFile("m.bin", _url(server, path), size, digest))
    with pytest.raises(ModelError) as info:
        fetch_artefact(artefact)
    message = str(info.value)
    assert "\n" not in message and reason in message and _url(server, path) in message, message
    kept = [p.name for p in _leftovers(cache)]
    assert kept == ([".m.bin.partial"] if path == "/truncated" else []), "only what a broken download received waits, hidden"
    assert cache_state(artefact) == "no" and cached(artefact) is None


def test_a_silent_server_times_out(server: _Server, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "NETWORK_TIMEOUT", 0.5)
    artefact = _artefact(PublishedFile("m.bin", _url(server, "/slow"), len(PAYLOAD), _sha("sha256")))
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"\(no answer for 0.5 s\)") as info:
        fetch_artefact(artefact)
    assert time.monotonic() - started < server.slow_seconds, "the timeout bounds the wait"
    assert "reid models add test.release FOLDER" not in str(info.value) and "reid models add test.release FILE" in str(info.value)
    assert _leftovers(cache) == []


def test_an_interrupted_download_resumes_where_it_broke_off(server: _Server, cache: Path) -> None:
    artefact = _artefact(PublishedFile("m.bin", _url(server, "/flaky"), len(PAYLOAD), _sha("sha256")))
    with pytest.raises(ModelError) as info:
        fetch_artefact(artefact)
    kept = (cache / artefact.name / ".m.bin.partial").stat().st_size
    assert 0 < kept <= len(PAYLOAD) // 2
    assert f"broke off before the whole file came); {kept:,} bytes kept, `reid models fetch test.release` resumes" in str(info.value)
    assert cached(artefact) is None and cache_state(artefact) == "no"
    assert fetch_artefact(artefact).read_bytes() == PAYLOAD
    assert server.ranges == [("/flaky", None), ("/flaky", f"bytes={kept}-")], "the second request asks for the rest only"
    assert [p.name for p in _leftovers(cache)] == ["m.bin"]


def test_a_server_that_ignores_range_gets_the_whole_file_asked_again(server: _Server, cache: Path) -> None:
    artefact = _artefact(PublishedFile("m.bin", _url(server, "/no-range"), len(PAYLOAD), _sha("sha256")))
    with pytest.raises(ModelError, match="resumes"):
        fetch_artefact(artefact)
    kept = (cache / artefact.name / ".m.bin.partial").stat().st_size
    assert fetch_artefact(artefact).read_bytes() == PAYLOAD
    assert [r for _, r in server.ranges] == [None, f"bytes={kept}-", None]
    assert [p.name for p in _leftovers(cache)] == ["m.bin"]


def test_a_partial_file_that_does_not_check_is_fetched_whole(server: _Server, cache: Path) -> None:
    artefact = _artefact(PublishedFile("m.bin", _url(server, "/good/m.bin"), len(PAYLOAD), _sha("sha256")))
    partial = cache / artefact.name / ".m.bin.partial"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(OTHER[:1000])  # left by a download of another file under that name
    assert fetch_artefact(artefact).read_bytes() == PAYLOAD
    assert [r for _, r in server.ranges] == ["bytes=1000-", None] and not partial.exists()


def test_offline_the_error_names_the_url_and_reid_models_add(cache: Path) -> None:
    # The .invalid top-level domain never resolves (RFC 2606), so this is offline anywhere.
    files = (PublishedFile("m.xml", "https://models.invalid/m.xml", 1, _sha("sha384")),
             PublishedFile("m.bin", "https://models.invalid/m.bin", 1, _sha("sha384")))
    with pytest.raises(ModelError) as info:
        fetch_artefact(_artefact(*files))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("cannot fetch test.release from https://models.invalid/m.xml (")
    assert message.endswith("bring the file with `reid models add test.release FOLDER (holding m.xml and m.bin)`")


def test_a_model_without_a_published_file_says_to_bring_it(cache: Path) -> None:
    with pytest.raises(ModelError) as info:
        fetch_files("bytetrack_nano.mot17")
    assert "\n" not in str(info.value) and "reid models add bytetrack_nano.mot17 FILE" in str(info.value)


def test_a_model_with_one_of_its_two_files_is_partly_cached(server: _Server, cache: Path) -> None:
    files = (PublishedFile("m.xml", _url(server, "/good/m.xml"), len(PAYLOAD), _sha("sha384")),
             PublishedFile("m.bin", _url(server, "/good/m.bin"), len(PAYLOAD), _sha("sha384")))
    artefact = _artefact(*files)
    path = fetch_artefact(artefact)
    path.with_name("m.bin").unlink()
    assert cache_state(artefact) == "partly" and cached(artefact) is None
    assert registry.is_valid(artefact, path) and not registry.is_valid(artefact, path.with_name("m.bin"))
    assert fetch_artefact(artefact) == path and cache_state(artefact) == "yes"
    assert server.requests_seen == {"/good/m.xml": 1, "/good/m.bin": 2}, "only the missing file is fetched again"


def test_a_cached_file_that_fails_its_check_is_left_alone(server: _Server, cache: Path) -> None:
    artefact = _artefact(PublishedFile("m.bin", _url(server, "/good/m.bin"), len(PAYLOAD), _sha("sha256")))
    path = fetch_artefact(artefact)
    path.write_bytes(OTHER)
    assert cached(artefact) is None and cache_state(artefact) == "check failed"
    with pytest.raises(ModelError, match="left as it is"):
        fetch_artefact(artefact)
    assert path.read_bytes() == OTHER


# ---- reid models add -------------------------------------------------------------------

def _registered(monkeypatch: pytest.MonkeyPatch, artefact: Artefact) -> Artefact:
    monkeypatch.setitem(ARTEFACTS, artefact.name, artefact)
    return artefact


def test_add_takes_a_folder_of_several_files_and_refuses_a_wrong_one(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = (PublishedFile("m.xml", "https://models.invalid/m.xml", len(PAYLOAD), _sha("sha384")),
             PublishedFile("m.bin", "https://models.invalid/m.bin", len(PAYLOAD), _sha("sha384")))
    artefact = _registered(monkeypatch, _artefact(*files))
    brought = tmp_path / "brought" / "FP16"
    brought.mkdir(parents=True)
    (brought / "m.xml").write_bytes(PAYLOAD)
    (brought / "m.bin").write_bytes(OTHER)
    with pytest.raises(ModelError) as info:
        add(artefact.name, tmp_path / "brought")
    assert str(info.value).startswith(f"{brought / 'm.bin'}: refused as test.release's m.bin (") and "left where it is" in str(info.value)
    assert (brought / "m.bin").read_bytes() == OTHER and _leftovers(cache) == [], "nothing is copied when one file is wrong"
    (brought / "m.bin").write_bytes(PAYLOAD)
    paths = add(artefact.name, brought / "m.xml")
    assert paths == [cache / artefact.name / "m.xml", cache / artefact.name / "m.bin"] == cached_files(artefact.name)
    assert all(p.read_bytes() == PAYLOAD for p in paths) and (brought / "m.xml").is_file(), "the user's files stay"


def test_add_records_the_hash_of_a_model_without_a_published_file(tmp_path: Path, cache: Path) -> None:
    onnx = pytest.importorskip("onnx")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 3, 8, 8])],
    )
    export = tmp_path / "my_export.onnx"
    onnx.save(onnx.helper.make_model(graph), export)
    not_onnx = tmp_path / "notes.onnx"
    not_onnx.write_bytes(b"not a graph")
    with pytest.raises(ModelError, match=r"notes.onnx: refused as bytetrack_nano.mot17 \(not an ONNX model"):
        add("bytetrack_nano.mot17", not_onnx)
    assert cache_state(ARTEFACTS["bytetrack_nano.mot17"]) == "no"
    (path,) = add("bytetrack_nano.mot17", export)
    assert path.name == "bytetrack_nano_mot17.onnx" and path.read_bytes() == export.read_bytes()
    assert path.with_name(path.name + ".sha256").read_text().strip() == hashlib.sha256(export.read_bytes()).hexdigest()
    assert cached_files("bytetrack_nano.mot17") == [path]
    # Another export is not this one any more: refused, and the cached one stays.
    other = tmp_path / "other.onnx"
    onnx.save(onnx.helper.make_model(graph, producer_name="other"), other)
    with pytest.raises(ModelError, match="refused as bytetrack_nano.mot17's bytetrack_nano_mot17.onnx"):
        add("bytetrack_nano.mot17", other)
    assert path.read_bytes() == export.read_bytes()


def test_models_cli_show_add_and_fetch(tmp_path: Path, cache: Path, server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["models", "show", "person-reidentification-retail-0277"])
    assert shown.exit_code == 0, shown.output
    assert "runtime: openvino" in shown.output and "BGR, pixels 0-255 as they are" in shown.output
    assert "published market1501_rank1: 96.2" in shown.output and "sha384:554b403108fea776" in shown.output
    wrong = tmp_path / "yolox_nano.onnx"
    wrong.write_bytes(OTHER)
    refused = runner.invoke(app, ["models", "add", "yolox_nano.coco", str(wrong)])
    assert refused.exit_code == 1 and len(refused.output.strip().splitlines()) == 1, refused.output
    assert "refused as yolox_nano.coco's yolox_nano.onnx" in refused.output and wrong.read_bytes() == OTHER
    artefact = _registered(monkeypatch, _artefact(PublishedFile("m.bin", _url(server, "/good/m.bin"), len(PAYLOAD), _sha("sha256"))))
    fetched = runner.invoke(app, ["models", "fetch", artefact.name])
    assert fetched.exit_code == 0, fetched.output
    assert f"downloading {_url(server, '/good/m.bin')}" in fetched.output
    assert f"{artefact.name}: {cache / artefact.name / 'm.bin'}" in fetched.output
    offline = runner.invoke(app, ["models", "fetch", "yolox_s.coco"])
    assert offline.exit_code == 1
    assert offline.output.strip().splitlines()[-1].startswith("error: cannot fetch yolox_s.coco from https://github.com/")


# ---- the zoo's entries -----------------------------------------------------------------

ZOO = (
    "person-detection-retail-0013", "pedestrian-detection-adas-0002", "person-reidentification-retail-0277",
    "person-reidentification-retail-0286", "person-reidentification-retail-0287", "person-reidentification-retail-0288",
    "yolox_nano.coco", "yolox_tiny.coco", "yolox_s.coco", "bytetrack_nano.mot17", "yolox_nano.coco-export",
)


def test_the_zoo_names_its_published_files() -> None:
    for name in ZOO:
        artefact = ARTEFACTS[name]
        assert artefact.source == "release" and artefact.files and artefact.licence
    for name in ZOO[:6]:
        artefact = ARTEFACTS[name]
        assert artefact.runtime == "openvino" and [f.name for f in artefact.files] == [f"{name}.xml", f"{name}.bin"]
        for published in artefact.files:
            assert published.url.startswith("https://storage.openvinotoolkit.org/repositories/open_model_zoo/2023.0/models_bin/1/")
            assert published.size > 0 and published.digest.startswith("sha384:") and len(published.digest) == 7 + 96
        assert artefact.channel_order == "bgr" and artefact.mean == (0, 0, 0)
    nano = ARTEFACTS["yolox_nano.coco"].files[0]
    assert (nano.size, nano.digest) == (3_659_407, "sha256:c789161ed43c8269fcd4e67c67eeeb4e80c622da2eb296a20bc6007bd18a0b7d")
    assert not ARTEFACTS["bytetrack_nano.mot17"].published and ARTEFACTS["bytetrack_nano.mot17"].input_size == (608, 1088)
    assert ARTEFACTS["fastreid_bot_r50.market1501"].layout == "fastreid"
    assert ARTEFACTS["osnet_x0_25.msmt17"].location.endswith("1sSwXSUlj4_tHZequ_iZ8w_Jh0VaRQMqF")


def test_a_published_file_must_say_its_digest_properly() -> None:
    with pytest.raises(ValueError, match="is not ALG:HEX"):
        PublishedFile("m.bin", "https://x.invalid/m.bin", 1, "md5:00")
    with pytest.raises(ValueError, match="plain file name"):
        PublishedFile("FP16/m.bin")
    with pytest.raises(ValueError, match="lists its files"):
        Artefact("x", "person-reid", "x", "release", "", "", "MIT", "onnx", "x")
