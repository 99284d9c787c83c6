"""serve.yaml and options, the keys file, the admin key, and the ``reid serve`` command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reid.cli import app
from reid.errors import ConfigError
from reid.gallery import EmbeddingModel, Gallery
from reid.serve import AdminKey, KeyStore, load_serve_config
from reid.serve.keys import ADMIN_KEY_ENV, ADMIN_KEY_FILE_ENV

runner = CliRunner()


def test_the_file_and_options_over_it(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text(
        "root: g\nport: 9000\nmodels: {demo: models/demo}\n"
        "galleries:\n  staff: {model: demo, detect: person, threshold: 0.45, top_k: 3}\n"
    )
    config = load_serve_config(path, port=9001)
    assert (config.port, config.root, config.models) == (9001, Path("g"), {"demo": "models/demo"})
    assert config.settings("staff").threshold == 0.45 and config.settings("staff").detect == "person"
    assert config.settings("unlisted") == config.defaults
    assert config.keys_path == Path("g") / ".serve-keys.json"


def test_settings_speak_the_photo_commands_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text("galleries:\n  lobby: {detect: face}\n  desk: {detect: none, no_face: error}\n")
    config = load_serve_config(path)
    # An older file's person or face is one of the choices; an unlisted gallery is "auto".
    assert (config.settings("lobby").detect, config.settings("lobby").no_face) == ("face", "skip")
    assert (config.settings("desk").detect, config.settings("desk").no_face) == ("none", "error")
    assert (config.defaults.detect, config.defaults.no_face) == ("auto", "skip")


@pytest.mark.parametrize(
    "text,message",
    [
        ("porte: 1\n", "unknown setting 'porte'"),
        ("galleries: {staff: {threshold: 5}}\n", "threshold is a distance between unit embeddings"),
        ("galleries: {staff: {model: nope}}\n", "model 'nope' is not one of the models served"),
        ("galleries: {'../x': {}}\n", "gallery name '../x'"),
        ("galleries: {staff: {detect: cars}}\n", "detect 'cars'"),
        ("galleries: {staff: {colour: red}}\n", "unknown setting 'colour'"),
        ("galleries: {staff: {no_face: ignore}}\n", "gallery staff: no_face 'ignore': choose one of whole, skip, error"),
        ("defaults: {detect: none, detector: hog}\n", "defaults: detector hog: detect none takes everything whole"),
        ("galleries: {staff: {detect: face, detector: hog}}\n", "hog finds persons, not faces"),
        ("galleries: {staff: {top_k: 0}}\n", "gallery staff: top_k: input should be greater than or equal to 1"),
        # A search's top-k has one range, the query's, from a file as from an option.
        ("defaults: {top_k: 1000000000}\n", "defaults: top_k: input should be less than or equal to 10000"),
        ("defaults: {top_k: 2.5}\n", "defaults: top_k: input should be a valid integer"),
        ("threads: 0\n", "threads: input should be greater than or equal to 1"),
        ("workers: 1000000\n", "workers: input should be less than or equal to 256"),
        ("threads: 100000000\n", "threads: input should be less than or equal to 4096"),
        ("queue: 1000000000000\n", "queue: input should be less than or equal to 1000000"),
        ("max_images: 1000000000\n", "max_images: input should be less than or equal to 100000"),
        ("port: 70000\n", "port: input should be less than or equal to 65535"),
        ("workers: true\n", "workers: input should be a valid integer"),
        ("[1, 2]\n", "expected a mapping"),
        ("a: [\n", "not valid YAML"),
        ("x: &x [1, 1]\ny: &y [*x, *x]\nmodels: {m: *y}\n", "YAML aliases"),
        ("galleries: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than the 8 levels"),
        (b"root: caf\xe9\n", "must be UTF-8 text"),
        # Numbers YAML would build before any check: thousands of digits, in any of its forms.
        ("threads: " + "9" * 5000 + "\n", "line 1: a number longer than 40 characters"),
        ("queue: 0x" + "f" * 5000 + "\n", "line 1: a number longer than 40 characters"),
        ("galleries: {s: {top_k: " + "9" * 5000 + "}}\n", "line 1: a number longer than 40 characters"),
        ("watch_cameras: [" + "1" * 5000 + "]\n", "line 1: a number longer than 40 characters"),
        ("threads: '" + "9" * 5000 + "'\n", r"threads: input should be a valid integer \(got '9{59}\.\.\. \(5002 characters\)\)"),
        ("lock_timeout: .nan\n", "lock_timeout: input should be"),
        ("lock_timeout: .inf\n", "lock_timeout: input should be less than or equal to 86400"),
        ("lock_timeout: -1\n", "lock_timeout: input should be greater than 0"),
    ],
)
def test_bad_settings_name_the_file(tmp_path: Path, text: str | bytes, message: str) -> None:
    path = tmp_path / "serve.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=message) as caught:
        load_serve_config(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_no_auth_only_on_loopback() -> None:
    assert load_serve_config(None, host="127.0.0.1", no_auth=True).no_auth
    assert load_serve_config(None, host="::1", no_auth=True).no_auth
    with pytest.raises(ConfigError, match="loopback host only"):
        load_serve_config(None, host="0.0.0.0", no_auth=True)


def test_keys_are_stored_hashed_and_found_in_constant_time(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key, token = store.create("staff", ["write", "read"], lambda gallery: "uid-of-" + gallery)
    assert key.gallery_uid == "uid-of-staff"
    assert key.scopes == ("read", "write") and token.startswith(f"rk_{key.id}_")
    stored = (tmp_path / "keys.json").read_text()
    assert token not in stored and token.split("_", 2)[2] not in stored and key.sha256 in stored
    assert (tmp_path / "keys.json").stat().st_mode & 0o077 == 0
    # Another process's store sees the key, and then its revocation.
    other = KeyStore(tmp_path / "keys.json")
    assert other.find(token) == key
    assert other.find(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert other.find("rk_" + key.id + "_short") is None and other.find("") is None
    store.revoke(key.id)
    assert other.find(token) is None
    with pytest.raises(ConfigError, match="no key"):
        store.revoke(key.id)
    with pytest.raises(ConfigError, match="scopes"):
        store.create("staff", ["admin"], lambda gallery: "uid-of-" + gallery)


def test_a_malformed_keys_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text(json.dumps({"keys": [{"id": "x"}]}))
    with pytest.raises(ConfigError, match="keys.json: the keys file is malformed"):
        KeyStore(tmp_path / "keys.json").list()


def test_the_admin_key_comes_from_a_file_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ADMIN_KEY_ENV, raising=False)
    monkeypatch.delenv(ADMIN_KEY_FILE_ENV, raising=False)
    assert AdminKey.from_environment() is None
    monkeypatch.setenv(ADMIN_KEY_ENV, "k" * 30)
    assert AdminKey.from_environment().matches("k" * 30)  # type: ignore[union-attr]
    (tmp_path / "admin.key").write_text("f" * 30 + "\n")
    from_file = AdminKey.from_environment(tmp_path / "admin.key")
    assert from_file is not None and from_file.matches("f" * 30) and not from_file.matches("k" * 30)
    with pytest.raises(ConfigError, match="at least 24 characters"):
        AdminKey("short", "test")
    with pytest.raises(ConfigError, match="cannot read the admin key file"):
        AdminKey.from_environment(tmp_path / "missing.key")


def test_the_keys_commands(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    absent = runner.invoke(app, ["serve", "keys", "create", "--gallery", "staff", "--scope", "read", "--root", root])
    assert absent.exit_code == 1 and "no gallery here; a key opens an existing gallery" in absent.output
    Gallery.create(tmp_path / "root" / "staff", EmbeddingModel("m", "f" * 16, 4)).close()
    made = runner.invoke(app, ["serve", "keys", "create", "--gallery", "staff", "--scope", "read", "--root", root])
    assert made.exit_code == 0, made.output
    token = made.output.strip().splitlines()[-1]
    key_id = token.split("_")[1]
    assert KeyStore(tmp_path / "root" / ".serve-keys.json").find(token) is not None
    listed = runner.invoke(app, ["serve", "keys", "list", "--root", root])
    assert key_id in listed.output and token not in listed.output
    # The key's date as every date a user reads: ISO 8601 in UTC, to the second.
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", listed.output), listed.output
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", listed.output), listed.output
    assert runner.invoke(app, ["serve", "keys", "revoke", key_id, "--root", root]).exit_code == 0
    again = runner.invoke(app, ["serve", "keys", "revoke", key_id, "--root", root])
    assert again.exit_code == 1 and "no key" in again.output
    bad = runner.invoke(app, ["serve", "keys", "create", "--gallery", "staff", "--scope", "all", "--root", root])
    assert bad.exit_code == 1 and "choose one or more of read, write" in bad.output
    assert len(runner.invoke(app, ["serve", "keys", "admin"]).output.strip()) >= 40


def test_serve_refuses_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ADMIN_KEY_ENV, raising=False)
    monkeypatch.delenv(ADMIN_KEY_FILE_ENV, raising=False)
    open_wide = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--no-auth", "--model", "m"])
    assert open_wide.exit_code == 1 and "loopback host only" in open_wide.output
    no_model = runner.invoke(app, ["serve", "--root", str(tmp_path)])
    assert no_model.exit_code == 1 and "no model to serve" in no_model.output
    no_key = runner.invoke(app, ["serve", "--root", str(tmp_path), "--model", str(tmp_path / "m")])
    assert no_key.exit_code == 1 and "no admin key" in no_key.output
    for result in (open_wide, no_model, no_key):
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_each_worker_builds_its_app_from_the_settings_it_is_handed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_folder: Path, encoder: object
) -> None:
    from fastapi.testclient import TestClient

    from reid.serial import as_dict
    from reid.serve.app import SERVE_CONFIG_ENV, app_from_environment

    config = load_serve_config(None, root=str(tmp_path / "root"), models={"m": str(model_folder)}, threads=2)
    (tmp_path / "admin.key").write_text("w" * 32)
    monkeypatch.delenv(ADMIN_KEY_ENV, raising=False)
    monkeypatch.setenv(SERVE_CONFIG_ENV, json.dumps({**as_dict(config), "admin_key_file": str(tmp_path / "admin.key")}))
    client = TestClient(app_from_environment())
    assert client.get("/v1/ready").json()["models"][0]["fingerprint"] == encoder.card.fingerprint  # type: ignore[attr-defined]
    assert client.post("/v1/galleries", json={"name": "g"}, headers={"Authorization": "Bearer " + "w" * 32}).status_code == 201
