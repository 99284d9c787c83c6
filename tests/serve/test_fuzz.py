"""Schema-driven fuzzing of every route from /openapi.json (schemathesis) against ``reid
serve`` itself, in a child process whose memory is held to its idle memory plus its
budget (:func:`reid.serve.connections.memory_budget`) in a control group: whatever the
request, no answer is a 5xx, every error is the JSON error body, no answer holds a key or
a path of the server, and the server's log holds no traceback.  A bounded number of
examples per route by default; many more under ``-m slow``.

The schema is the application's own: it depends on no model, so it is read at import from
an application over an empty root.  Where no memory-limited group can be made (not root,
no cgroup file system) the server runs unlimited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from memory_cgroup import NoCgroup, memory_cgroup
from serve_helpers import ADMIN, Server, bearer

from reid.data.io import ImageLimits
from reid.models import Encoder
from reid.serve import AdminKey, KeyStore, Service, create_app, load_serve_config
from reid.serve.connections import memory_budget

QUICK, THOROUGH = 8, 200
# Request parts httpx takes.
SENT = ("method", "url", "headers", "params", "json", "data", "files", "content")
MIB = 1 << 20
SETTINGS = {"threads": 2, "queue": 4, "max_body_bytes": 8 * MIB, "max_images": 8}
MAX_PIXELS = 4_000_000


def _schema() -> schemathesis.BaseSchema:
    with TemporaryDirectory() as folder:
        config = load_serve_config(None, root=folder)
        app = create_app(Service(config, {}, {}, KeyStore(Path(folder) / "keys.json"), AdminKey(ADMIN, "tests")))
        return schemathesis.openapi.from_dict(app.openapi())


schema = _schema()


@dataclass
class Fuzzed:
    """The server under fuzzing, the secrets and paths no answer may hold, and its log."""

    server: Server
    client: httpx.Client
    secrets: list[str]
    log_read: int = 0

    def new_log(self) -> str:
        text = self.server.log.read_text(errors="replace")
        new, self.log_read = text[self.log_read :], len(text)
        return new


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory, model_folder: Path, encoder: Encoder) -> Iterator[Fuzzed]:
    base = tmp_path_factory.mktemp("fuzz")
    root = base / "root"
    root.mkdir()
    config_file = base / "serve.yaml"
    config_file.write_text(json.dumps(SETTINGS))
    budget = memory_budget(load_serve_config(None, root=str(root), **SETTINGS), ImageLimits(max_pixels=MAX_PIXELS))
    with ExitStack() as stack:
        try:
            group = stack.enter_context(memory_cgroup(4096 * MIB))
        except NoCgroup:
            group = None
        server = Server(
            root, model_folder, base / "server.log", ("--config", str(config_file)),
            preexec=group.preexec if group is not None else None, env={"REID_MAX_IMAGE_PIXELS": str(MAX_PIXELS)},
        )  # fmt: skip
        stack.callback(server.stop)
        client = stack.enter_context(httpx.Client(base_url=server.url, headers=bearer(ADMIN), timeout=120))
        for gallery in ("staff", "other"):
            assert client.post("/v1/galleries", json={"name": gallery}).status_code == 201
        keys = [client.post("/v1/keys", json={"gallery": "staff", "scopes": ["read", "write"]}).json()["key"]]
        if group is not None:
            limit = group.current() + budget
            (group.path / ("memory.max" if group.version == 2 else "memory.limit_in_bytes")).write_text(str(limit))
        fuzzed = Fuzzed(server, client, [ADMIN, *keys, str(base), str(model_folder)])
        yield fuzzed
        log = server.stop()
        assert "Traceback" not in log
        # reid serve says where its page and API docs are before it answers.
        assert f"page:      {server.url}/" in log and f"API docs:  {server.url}/docs" in log, log[:2000]
        if group is not None:
            assert group.oom_killed() == 0 and server.process.returncode is not None


def _part(value: object) -> object:
    """A multipart part as httpx takes it: generated numbers become their text."""
    if isinstance(value, tuple):
        return tuple(_part(v) for v in value)
    return value if isinstance(value, (bytes, str)) or value is None else str(value).encode()


def _check(case: schemathesis.Case, fuzzed: Fuzzed) -> None:
    kwargs = case.as_transport_kwargs(base_url=fuzzed.server.url, headers=bearer(ADMIN))
    kwargs = {k: v for k, v in kwargs.items() if k in SENT and v is not None}
    if isinstance(kwargs.get("data"), (bytes, str)):
        kwargs["content"] = kwargs.pop("data")
    if "files" in kwargs:
        parts = kwargs["files"].items() if isinstance(kwargs["files"], dict) else kwargs["files"]
        kwargs["files"] = [(name, _part(value)) for name, value in parts]
    response = fuzzed.client.request(**kwargs)
    where = f"{case.method} {case.formatted_path}"
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    held = [secret for secret in fuzzed.secrets if secret in response.text]
    assert not held, f"{where}: the answer holds {held}"
    assert fuzzed.server.process.poll() is None, f"{where}: the server died"
    assert "Traceback" not in fuzzed.new_log(), where


@schema.parametrize()
@settings(max_examples=QUICK, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_route_fails_on_generated_requests(case: schemathesis.Case, fuzzed: Fuzzed) -> None:
    _check(case, fuzzed)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=THOROUGH, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_route_fails_on_many_generated_requests(case: schemathesis.Case, fuzzed: Fuzzed) -> None:
    _check(case, fuzzed)
