"""Helpers of the service tests: a served root with a real (untrained) model, keys, uploads."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import uvicorn
from fastapi.testclient import TestClient

from reid.gallery import Gallery, ItemMeta
from reid.models import Encoder, load_encoder, stand_in_model
from reid.serve import AdminKey, KeyStore, Service, create_app, crop_rules, load_serve_config
from reid.serve.pool import WorkerPool
from reid.serve.run import uvicorn_options

ADMIN = "admin-key-for-the-tests-0123456789"
ROOT = Path(__file__).resolve().parents[2]


def build_model(folder: Path, threshold: float = 0.3) -> Path:
    """A small untrained person model (ResNet-18, 64-d, 64x32 input)."""
    return stand_in_model(folder, "person", name="stand-in", embedding_dim=64, input_size=(64, 32), threshold=threshold)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def files(paths: list[Path], field: str = "images") -> list[tuple[str, tuple[str, bytes, str]]]:
    return [(field, (p.name, p.read_bytes(), "image/jpeg")) for p in paths]


def b64(path: Path) -> dict[str, str]:
    return {"name": path.name, "data": base64.b64encode(path.read_bytes()).decode()}


@dataclass
class Served:
    """A root served in process: the client, the service and a gallery key of each scope."""

    root: Path
    service: Service
    client: TestClient
    keys: dict[str, str]

    def admin(self) -> dict[str, str]:
        return bearer(ADMIN)

    def key(self, name: str) -> dict[str, str]:
        return bearer(self.keys[name])

    def create(self, gallery: str) -> Any:
        response = self.client.post("/v1/galleries", json={"name": gallery}, headers=self.admin())
        assert response.status_code == 201, response.text
        return response.json()

    def new_key(self, gallery: str, *scopes: str) -> str:
        response = self.client.post("/v1/keys", json={"gallery": gallery, "scopes": list(scopes)}, headers=self.admin())
        assert response.status_code == 201, response.text
        return response.json()["key"]


def serve_root(
    root: Path, model_folder: Path, encoder: Encoder, pool: WorkerPool | None = None, **settings: Any
) -> tuple[Service, TestClient]:
    config = load_serve_config(None, root=str(root), models={"m": str(model_folder)}, **settings)
    root.mkdir(parents=True, exist_ok=True)
    models = {"m": encoder}
    service = Service(config, models, crop_rules(config, models), KeyStore(config.keys_path), AdminKey(ADMIN, "tests"))
    return service, TestClient(create_app(service, pool), base_url="http://127.0.0.1:8000")


def routes_of(app: Any) -> list[tuple[str, set[str]]]:
    """Each route of ``app`` that its OpenAPI schema lists: its path template and methods
    (routes live in routers; the schema is the one public list of them all)."""
    return [(path, {m.upper() for m in methods}) for path, methods in app.openapi()["paths"].items()]


def shared_encoder(folder: Path) -> Encoder:
    build_model(folder)
    return load_encoder(folder, device="cpu")


class Server:
    """``reid serve`` in a child process, with its log; ``preexec`` runs in the child before
    it starts (joining a memory-limited group), ``env`` adds to its environment."""

    def __init__(
        self, root: Path, model: Path, log: Path, extra: tuple[str, ...] = (),
        preexec: Callable[[], None] | None = None, env: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        environment = {**os.environ, "REID_SERVE_ADMIN_KEY": ADMIN, "PYTHONPATH": path, **(env or {})}
        command = [sys.executable, "-m", "reid", "serve", "--root", str(root), "--model", f"m={model}",
                   "--port", str(self.port), "--threads", "2", *extra]  # fmt: skip
        self.process = subprocess.Popen(
            command, env=environment, stdout=log.open("wb"), stderr=subprocess.STDOUT, preexec_fn=preexec
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/v1/ready", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.process.kill()
        raise AssertionError("server not ready in 120 s")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=bearer(ADMIN), timeout=120)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.log.read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def uvicorn_in_thread(service: Service, protocol: type | None = None) -> Iterator[str]:
    """A real uvicorn server of ``service`` on 127.0.0.1 and a free port, on a thread of this
    process (a child process pays for importing PyTorch again), with the settings of ``reid
    serve`` (``protocol``: another HTTP protocol class); yields its URL."""
    port = free_port()
    options = {**uvicorn_options(), **({"http": protocol} if protocol is not None else {})}
    server = uvicorn.Server(
        uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_config=None, access_log=False, **options)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def store_legacy(folder: Path, monkeypatch: Any, labels: list[str]) -> None:
    """One item under each of ``labels`` in the gallery at ``folder``, written as by a
    version before the naming rule (reid.names), which took names such as ".."."""
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(len(labels), 64)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    items = [ItemMeta(label, source=f"old-{n}.jpg", image_hash=f"old-{n}") for n, label in enumerate(labels)]
    with monkeypatch.context() as old:
        old.setattr("reid.gallery.store.identity_name", lambda name, what="identity": name)
        with Gallery.open(folder) as gallery:
            gallery.add(vectors, items)
