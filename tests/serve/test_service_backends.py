"""``reid serve`` over galleries in PostgreSQL and Milvus: two servers (in process, and two
real ``reid serve`` processes on loopback) sharing one PostgreSQL gallery, keys bound to a
backend gallery's uid, the admin making and deleting galleries there, a milvus-lite gallery
served by one process and refused to a second."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from serve_helpers import ADMIN, ROOT, Server, Served, bearer, files, free_port, serve_root

from reid.gallery import ItemMeta, destroy_gallery, open_gallery
from reid.gallery.opener import gallery_names, gallery_uid
from reid.models import Encoder, load_encoder
from reid.serve.run import start_banner

POSTGRES_CLIENT = "psycopg is not installed (pip install -e '.[postgres]')"


@pytest.fixture
def template(postgres_server: str, request: pytest.FixtureRequest) -> str:
    """A gallery_location in the test server's database, its galleries' names prefixed by
    one of this test's own (tests share the database)."""
    pytest.importorskip("psycopg", reason=POSTGRES_CLIENT)
    prefix = "t" + hashlib.sha256(request.node.name.encode()).hexdigest()[:12]
    return f"{postgres_server}&gallery={prefix}_{{name}}"


def two_services(tmp_path: Path, model_folder: Path, encoder: Encoder, template: str) -> tuple[Served, Served]:
    """Two services with roots of their own (two hosts) over one database, keys in one shared file."""
    out = []
    for host in ("a", "b"):
        service, client = serve_root(
            tmp_path / host, model_folder, encoder, gallery_location=template, keys_file=str(tmp_path / "keys.json"),
            galleries={"staff": {"threshold": 0.05}},
        )  # fmt: skip
        out.append(Served(tmp_path / host, service, client, {}))
    return out[0], out[1]


def enrol(served: Served, identity: str, paths: list[Path], headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = served.client.post(
        f"/v1/galleries/staff/identities/{identity}/images", files=files(paths), headers=headers or served.admin()
    )
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def named(served: Served, path: Path, headers: dict[str, str] | None = None) -> str | None:
    """The identity the server names the person of ``path`` (None: unknown)."""
    response = served.client.post("/v1/galleries/staff/search", files=files([path], "image"), headers=headers or served.admin())
    assert response.status_code == 200, response.text
    return response.json()["subjects"][0]["identity"]  # type: ignore[no-any-return]


def test_two_servers_share_one_postgresql_gallery(
    tmp_path: Path, model_folder: Path, encoder: Encoder, template: str, crops: dict[str, list[Path]]
) -> None:
    a, b = two_services(tmp_path, model_folder, encoder, template)
    assert any(line.startswith("gallery:   none yet where gallery_location says") for line in start_banner(a.service))
    made = a.create("staff")
    assert made["items"] == 0 and made["model"] == "m"
    # Made in the database, not under either root; B lists it.
    assert not (a.root / "staff").exists() and gallery_uid(template.replace("{name}", "staff")) is not None
    assert [g["name"] for g in b.client.get("/v1/galleries", headers=b.admin()).json()["galleries"]] == ["staff"]
    assert "gallery:   staff (m; 0 people, 0 photos; detect auto)" in start_banner(b.service)
    alice, bob = list(crops)[:2]
    assert named(b, crops[alice][0]) is None
    assert enrol(a, "alice", crops[alice][:2])["added"] == 2
    assert named(b, crops[alice][0]) == "alice"
    enrol(b, "bob", crops[bob][:2])
    assert named(a, crops[bob][0]) == "bob"
    listed = a.client.get("/v1/galleries/staff/identities", headers=a.admin()).json()
    assert [i["identity"] for i in listed["identities"]] == ["alice", "bob"] and listed["total"] == 2
    assert b.client.delete("/v1/galleries/staff/identities/alice", headers=b.admin()).json()["items"] == 2
    assert named(a, crops[alice][0]) is None
    assert [i["identity"] for i in a.client.get("/v1/galleries/staff/identities", headers=a.admin()).json()["identities"]] == ["bob"]
    assert a.client.get("/v1/galleries/staff", headers=a.admin()).json()["items"] == 2
    # A gallery key made through one server opens the gallery through the other (one keys file).
    key = bearer(a.new_key("staff", "read", "write"))
    assert named(b, crops[bob][0], key) == "bob"


def test_a_calibration_stored_through_one_host_decides_on_the_other(
    tmp_path: Path, model_folder: Path, encoder: Encoder, template: str
) -> None:
    a, b = two_services(tmp_path, model_folder, encoder, template)
    a.create("lobby")
    assert b.client.get("/v1/galleries/lobby", headers=b.admin()).json()["threshold"]["source"] == "model card"
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(40, encoder.dim)).astype(np.float32)
    with open_gallery(template.replace("{name}", "lobby")) as gallery:
        gallery.add(vectors, [ItemMeta(f"person-{n // 2}", image_hash=f"h{n}") for n in range(40)])
        stored = gallery.calibrate(far=0.1)
    for served in (a, b):
        threshold = served.client.get("/v1/galleries/lobby", headers=served.admin()).json()["threshold"]
        assert threshold["source"] == "gallery calibration" and threshold["value"] == pytest.approx(stored.threshold)


def test_a_key_is_refused_once_its_postgresql_gallery_is_deleted_and_made_again(
    tmp_path: Path, model_folder: Path, encoder: Encoder, template: str
) -> None:
    a, b = two_services(tmp_path, model_folder, encoder, template)
    a.create("staff")
    key = bearer(a.new_key("staff", "read"))
    assert b.client.get("/v1/galleries/staff", headers=key).status_code == 200
    location = template.replace("{name}", "staff")
    first = gallery_uid(location)
    gone = b.client.delete("/v1/galleries/staff?confirm=staff", headers=b.admin())
    assert gone.status_code == 200 and gone.json() == {"deleted": "staff", "items": 0}
    assert gallery_uid(location) is None and b.client.get("/v1/galleries", headers=b.admin()).json()["galleries"] == []
    assert a.client.get("/v1/galleries/staff", headers=a.admin()).status_code == 404
    b.create("staff")
    assert gallery_uid(location) not in (None, first)
    # The key's gallery was deleted: the new one under its name is another, on both servers.
    for served in (a, b):
        assert served.client.get("/v1/galleries/staff", headers=key).status_code == 401
    # A key the keys file kept (as a host with a keys file of its own would) opens nothing either.
    stale = bearer(b.new_key("staff", "read"))
    assert a.client.get("/v1/galleries/staff", headers=stale).status_code == 200
    kept = json.loads((tmp_path / "keys.json").read_text())
    a.client.delete("/v1/galleries/staff?confirm=staff", headers=a.admin())
    (tmp_path / "keys.json").write_text(json.dumps(kept))
    a.create("staff")
    assert a.client.get("/v1/galleries/staff", headers=stale).status_code == 401
    assert b.client.get("/v1/galleries/staff", headers=stale).status_code == 401


def test_reid_serve_keys_create_makes_a_key_of_a_postgresql_gallery(
    tmp_path: Path, model_folder: Path, encoder: Encoder, template: str
) -> None:
    from typer.testing import CliRunner

    from reid.cli.app import app

    a, _ = two_services(tmp_path, model_folder, encoder, template)
    settings = tmp_path / "serve.yaml"
    settings.write_text(json.dumps({"gallery_location": template, "keys_file": str(tmp_path / "keys.json")}))
    command = ["serve", "keys", "create", "--config", str(settings), "--gallery", "staff", "--scope", "read"]
    absent = CliRunner().invoke(app, command)
    assert absent.exit_code == 1 and "no gallery here; a key opens an existing gallery" in absent.output
    a.create("staff")
    made = CliRunner().invoke(app, command)
    assert made.exit_code == 0, made.output
    token = made.output.strip().splitlines()[-1]
    assert a.client.get("/v1/galleries/staff", headers=bearer(token)).status_code == 200


def test_a_gallery_with_its_own_location_beside_folders_under_the_root(
    tmp_path: Path, model_folder: Path, encoder: Encoder, postgres_server: str
) -> None:
    pytest.importorskip("psycopg", reason=POSTGRES_CLIENT)
    location = f"{postgres_server}&gallery=visitors_named"
    service, client = serve_root(
        tmp_path / "root", model_folder, encoder, galleries={"visitors": {"location": location}}
    )  # fmt: skip
    served = Served(tmp_path / "root", service, client, {})
    assert client.get("/v1/galleries", headers=served.admin()).json()["galleries"] == []
    served.create("visitors")
    served.create("staff")
    # "visitors" in the database, "staff" a folder under the root as before.
    assert gallery_uid(location) is not None and (tmp_path / "root" / "staff").is_dir()
    names = [g["name"] for g in client.get("/v1/galleries", headers=served.admin()).json()["galleries"]]
    assert names == ["staff", "visitors"]
    assert client.delete("/v1/galleries/visitors?confirm=visitors", headers=served.admin()).status_code == 200
    assert gallery_uid(location) is None


def test_a_writer_waits_for_another_hosts_write_and_past_the_timeout_is_busy(
    tmp_path: Path, model_folder: Path, encoder: Encoder, template: str, crops: dict[str, list[Path]]
) -> None:
    psycopg = pytest.importorskip("psycopg", reason=POSTGRES_CLIENT)
    from reid.gallery.postgres import LOCK_SPACE, SCHEMA_PREFIX, parse_location

    service, client = serve_root(tmp_path / "a", model_folder, encoder, gallery_location=template, lock_timeout=1)
    served = Served(tmp_path / "a", service, client, {})
    served.create("staff")
    conninfo, name = parse_location(template.replace("{name}", "staff"))
    # Another host's write in progress: its transaction holds the gallery's advisory lock.
    with psycopg.connect(conninfo) as other, other.transaction():
        other.execute("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", [LOCK_SPACE, SCHEMA_PREFIX + name])
        pid = next(iter(crops))
        response = client.post("/v1/galleries/staff/identities/alice/images", files=files(crops[pid][:2]), headers=served.admin())
        assert response.status_code == 503 and response.headers["Retry-After"] == "1", response.text
        error = response.json()["error"]
        assert error["code"] == "busy" and error["message"].startswith("gallery staff: another process has been writing for 1 s")
    assert client.get("/v1/galleries/staff", headers=served.admin()).json()["items"] == 0
    assert enrol(served, "alice", crops[pid][:2])["added"] == 2


def test_a_database_out_of_reach_is_busy_and_its_location_never_shown(tmp_path: Path, model_folder: Path, encoder: Encoder) -> None:
    pytest.importorskip("psycopg", reason=POSTGRES_CLIENT)
    location = f"postgresql://127.0.0.1:{free_port()}/vision?gallery=lobby"
    service, client = serve_root(tmp_path / "root", model_folder, encoder, galleries={"lobby": {"location": location}})
    response = client.get("/v1/galleries/lobby", headers=bearer(ADMIN))
    assert response.status_code == 503 and response.json()["error"]["code"] == "busy", response.text
    message = response.json()["error"]["message"]
    assert message.startswith("gallery lobby: cannot connect to the database") and "vision" not in message
    # A gallery key meanwhile: the outage is said, the key is not called revoked.
    _, token = service.keys.create("lobby", ["read"], lambda gallery: "made-before-the-outage")
    response = client.get("/v1/galleries/lobby", headers=bearer(token))
    assert response.status_code == 503 and response.json()["error"]["code"] == "busy", response.text


def test_a_threshold_from_the_gallery_names_the_gallery_never_its_location(
    tmp_path: Path, model_folder: Path, encoder: Encoder, postgres_server: str
) -> None:
    pytest.importorskip("psycopg", reason=POSTGRES_CLIENT)
    location = f"{postgres_server}&gallery=lobby_threshold"
    open_gallery(location, encoder.card).close()
    # The model recalibrated to no threshold (its fingerprint is the weights' and the
    # embedding's): the gallery's recorded one decides, and the answer says where it came from.
    recalibrated = tmp_path / "recalibrated"
    shutil.copytree(model_folder, recalibrated)
    card = json.loads((recalibrated / "card.json").read_text())
    (recalibrated / "card.json").write_text(json.dumps({**card, "threshold": None}))
    service, client = serve_root(
        tmp_path / "root", recalibrated, load_encoder(recalibrated, device="cpu"), galleries={"lobby": {"location": location}}
    )  # fmt: skip
    threshold = client.get("/v1/galleries/lobby", headers=bearer(ADMIN)).json()["threshold"]
    assert (threshold["value"], threshold["source"], threshold["detail"]) == (0.3, "gallery", "gallery lobby")
    destroy_gallery(location)


def test_a_name_the_database_refuses_is_one_line(tmp_path: Path, model_folder: Path, encoder: Encoder, template: str) -> None:
    a, _ = two_services(tmp_path, model_folder, encoder, template)
    response = a.client.post("/v1/galleries", json={"name": "Front-Desk"}, headers=a.admin())
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "lower-case letters, digits or _" in message and "\n" not in message


def people(market1501_mini: Path, count: int) -> dict[str, list[Path]]:
    """Real crops of ``count`` people of the query set (each photo of one person only)."""
    found: dict[str, list[Path]] = {}
    for path in sorted((market1501_mini / "query").glob("*.jpg")):
        found.setdefault(path.name.split("_")[0], []).append(path)
    return dict(list(found.items())[:count])


def enrol_at_once(clients: dict[str, Any], crops: dict[str, list[Path]]) -> dict[str, int]:
    """Every other person of ``crops`` enrolled through each of two clients at once (no
    photo reaches both), as ``p<pid>``; how many each enrolment added.  Asserts none failed."""
    hosts = sorted(clients)
    shares = {host: list(crops)[n :: len(hosts)] for n, host in enumerate(hosts)}
    added: dict[str, int] = {}
    failures: list[str] = []

    def enrol_all(host: str) -> None:
        for pid in shares[host]:
            response = clients[host].post(f"/v1/galleries/staff/identities/p{pid}/images", files=files(crops[pid]))
            if response.status_code != 200:
                failures.append(response.text)
            else:
                added[f"p{pid}"] = response.json()["added"]

    threads = [threading.Thread(target=enrol_all, args=(host,)) for host in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not failures, failures[0]
    return added


def test_concurrent_enrolments_through_two_servers_add_up(
    tmp_path: Path, model_folder: Path, encoder: Encoder, template: str, market1501_mini: Path
) -> None:
    a, b = two_services(tmp_path, model_folder, encoder, template)
    a.create("staff")
    for served in (a, b):
        served.client.headers.update(served.admin())
    crops = people(market1501_mini, 8)
    expected = {f"p{pid}": len(paths) for pid, paths in crops.items()}
    # Each enrolment whole: every photo of every person, from both servers, counted once.
    assert enrol_at_once({"a": a.client, "b": b.client}, crops) == expected
    for served in (a, b):
        info = served.client.get("/v1/galleries/staff").json()
        assert (info["items"], info["identities"]) == (sum(expected.values()), len(expected))
        identities = served.client.get("/v1/galleries/staff/identities?limit=100").json()["identities"]
        assert {i["identity"]: i["items"] for i in identities} == expected


@pytest.mark.slow
def test_concurrent_enrolments_through_two_reid_serve_processes_add_up(
    tmp_path: Path, model_folder: Path, encoder: Encoder, template: str, market1501_mini: Path
) -> None:
    settings = tmp_path / "serve.yaml"
    settings.write_text(json.dumps({"gallery_location": template, "keys_file": str(tmp_path / "keys.json")}))
    servers = [Server(tmp_path / host, model_folder, tmp_path / f"{host}.log", ("--config", str(settings))) for host in "ab"]
    try:
        a, b = (server.client() for server in servers)
        assert a.post("/v1/galleries", json={"name": "staff"}).status_code == 201
        crops = people(market1501_mini, 12)
        # Each enrolment whole: every photo of every person, from both hosts, counted once.
        expected = {f"p{pid}": len(paths) for pid, paths in crops.items()}
        assert enrol_at_once({"a": a, "b": b}, crops) == expected
        for client in (a, b):
            info = client.get("/v1/galleries/staff").json()
            assert (info["items"], info["identities"]) == (sum(expected.values()), len(expected))
            identities = client.get("/v1/galleries/staff/identities?limit=100").json()["identities"]
            assert {i["identity"]: i["items"] for i in identities} == expected
        # Enrolled through one process (a took the first person), named through the other.
        pid = next(iter(crops))
        found = b.post("/v1/galleries/staff/search", files=files(crops[pid][:1], "image")).json()
        assert found["subjects"][0]["matches"][0]["identity"] == f"p{pid}"
        assert found["subjects"][0]["matches"][0]["distance"] < 1e-3
    finally:
        logs = [server.stop() for server in servers]
    assert all("Traceback" not in log for log in logs), logs


milvus = pytest.mark.skipif(
    any(__import__("importlib.util").util.find_spec(m) is None for m in ("pymilvus", "milvus_lite")),
    reason="the Milvus gallery needs pymilvus and milvus-lite (pip install -e '.[dev]')",
)


@milvus
def test_a_milvus_lite_gallery_served_by_one_process(
    tmp_path: Path, model_folder: Path, encoder: Encoder, crops: dict[str, list[Path]]
) -> None:
    location = f"milvus:{tmp_path / 'galleries.db'}/staff"
    service, client = serve_root(
        tmp_path / "root", model_folder, encoder, galleries={"staff": {"location": location, "threshold": 0.05}}
    )  # fmt: skip
    served = Served(tmp_path / "root", service, client, {})
    served.create("staff")
    assert gallery_names(location) == ["staff"] and not (tmp_path / "root" / "staff").exists()
    alice, bob = list(crops)[:2]
    key = bearer(served.new_key("staff", "read", "write"))
    assert enrol(served, "alice", crops[alice][:2], key)["added"] == 2
    enrol(served, "bob", crops[bob][:2], key)
    assert named(served, crops[alice][0], key) == "alice" and named(served, crops[bob][0], key) == "bob"
    assert client.delete("/v1/galleries/staff/identities/alice", headers=key).json()["items"] == 2
    assert named(served, crops[alice][0], key) is None
    with open_gallery(location) as gallery:
        assert len(gallery) == 2 and [s.identity for s in gallery.identities()] == ["bob"]
    assert client.delete("/v1/galleries/staff?confirm=staff", headers=served.admin()).json()["items"] == 2
    assert gallery_names(location) == [] and client.get("/v1/galleries/staff", headers=key).status_code == 401


@milvus
def test_a_second_process_serving_a_milvus_lite_file_is_refused_in_one_line(
    tmp_path: Path, model_folder: Path, encoder: Encoder
) -> None:
    location = f"milvus:{tmp_path / 'galleries.db'}/staff"
    settings = tmp_path / "serve.yaml"
    settings.write_text(json.dumps({"galleries": {"staff": {"location": location}}}))
    # This process holds the file, as a first server would.
    gallery_names(location)
    command = [sys.executable, "-m", "reid", "serve", "--config", str(settings), "--root", str(tmp_path / "root"),
               "--model", f"m={model_folder}", "--port", str(free_port())]  # fmt: skip
    env = {**os.environ, "REID_SERVE_ADMIN_KEY": ADMIN, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "one process at a time" in lines[0] and "Traceback" not in done.stderr, done.stderr
