"""Building a network is pure: no file is opened and no connection made, whatever the
cache holds; loading a model folder opens only that folder's files."""

from __future__ import annotations

import socket
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from reid.models import ModelCard, ReidNet, build_network, load_encoder, load_model, save_model
from reid.models.backbones import architecture_available, known_architectures

_WATCHING: list[list[str]] = []


def _audit(event: str, args: tuple) -> None:
    if _WATCHING and (event == "open" or event.startswith(("socket.", "urllib."))):
        _WATCHING[-1].append(f"{event} {args[0] if args else ''}")


sys.addaudithook(_audit)  # hooks cannot be removed; this one records only inside watched()


@contextmanager
def watched() -> Iterator[list[str]]:
    """Every file opened and every socket or URL touched inside the block."""
    seen: list[str] = []
    _WATCHING.append(seen)
    try:
        yield seen
    finally:
        _WATCHING.pop()


@pytest.fixture
def offline_and_uncached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No network (connecting or opening a URL fails) and an empty, unreadable cache."""
    empty = tmp_path / "cache"
    empty.mkdir(mode=0)
    monkeypatch.setenv("REID_CACHE_DIR", str(empty))
    monkeypatch.setenv("TORCH_HOME", str(empty))
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(empty))

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError("network use while building a network")

    monkeypatch.setattr(socket.socket, "connect", refused)
    monkeypatch.setattr(socket, "create_connection", refused)
    monkeypatch.setattr(urllib.request, "urlopen", refused)


ARCHITECTURES = [a for a in known_architectures() if architecture_available(a)]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_building_any_architecture_touches_no_file_and_no_network(architecture: str, offline_and_uncached: None) -> None:
    ReidNet(architecture, num_classes=3)  # first build: imports whatever the architecture's library loads lazily
    with watched() as seen:
        network = ReidNet(architecture, num_classes=3, embedding_dim=64)
        card = ModelCard(name="m", architecture=architecture, embedding_dim=64, num_classes=3)
        rebuilt = build_network(card)
    assert seen == []
    assert network.pretrained_note.startswith("random initialisation")
    assert set(rebuilt.state_dict()) == set(network.state_dict())


def test_loading_a_model_folder_reads_only_that_folder(tmp_path: Path, offline_and_uncached: None) -> None:
    card = ModelCard(name="m", architecture="resnet18", embedding_dim=32, input_size=(64, 32))
    folder = tmp_path / "m"
    saved = save_model(build_network(card), card, folder)
    load_model(folder)  # first load: imports what loading needs
    with watched() as seen:
        network, loaded = load_model(folder)
        encoder = load_encoder(folder, device="cpu")
    opened = [entry.split(" ", 1)[1] for entry in seen]
    assert opened and all(Path(path).resolve().parent == folder.resolve() for path in opened), opened
    assert not [entry for entry in seen if not entry.startswith("open ")]
    assert loaded.fingerprint == saved.fingerprint == encoder.card.fingerprint
    assert network.embedding_dim == 32
