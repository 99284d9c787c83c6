"""The opener: a gallery by its location, on whichever backend the location names.

A folder path (``./g``, ``a/g``) or a bare name under ``galleries/`` is the FAISS + SQLite
gallery (:class:`reid.gallery.store.Gallery`).  ``postgresql://HOST/DB?gallery=NAME``
and ``milvus:FILE.db/COLLECTION`` / ``milvus://HOST:PORT/COLLECTION`` name the server
backends (:data:`BACKENDS`): a module of ``reid.gallery`` that offers ``open_gallery``
and ``destroy_gallery`` as here, importable once its client is installed.  Every
backend answers as :class:`reid.gallery.base.GalleryBackend`; each module offers
``gallery_uid``, ``gallery_names`` and ``gallery_name`` too, as :func:`gallery_uid`,
:func:`gallery_names` and :func:`gallery_name` here say.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from reid.errors import ConfigError
from reid.gallery.base import GalleryBackend
from reid.gallery.catalogue import DB_FILE
from reid.gallery.catalogue import gallery_uid as folder_uid
from reid.gallery.index import IndexSpec
from reid.gallery.records import ModelFacts
from reid.gallery.store import Gallery, resolve_gallery_path

# URI schemes of the server backends: (module, client package, pip extra).
BACKENDS = {
    "postgresql": ("reid.gallery.postgres", "psycopg", "postgres"),
    "postgres": ("reid.gallery.postgres", "psycopg", "postgres"),
    "milvus": ("reid.gallery.milvus", "pymilvus", "milvus"),
}


def backend_module(location: str | Path) -> str | None:
    """The module of the server backend ``location`` names (a URI), or None for a folder;
    ConfigError in one line when that backend's client is not installed or not built."""
    text = str(location)
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if isinstance(location, Path) or scheme not in BACKENDS:
        return None
    module, client, extra = BACKENDS[scheme]
    if importlib.util.find_spec(client) is None:
        raise ConfigError(f"{scheme}: galleries need the {client} client: pip install 'reid-toolkit[{extra}]'")
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"{scheme}: galleries are not part of this version of reid; use a gallery folder")
    return module


def open_gallery(
    location: str | Path,
    card: ModelFacts | None = None,
    spec: IndexSpec | None = None,
    *,
    create: bool = False,
    lock_timeout: float = 120.0,
    gpu: str | None = None,
    thumbnails: bool = True,
) -> GalleryBackend:
    """The gallery at ``location`` (a folder path, a bare name under ``galleries/``, or a
    server backend's URI), opened and verified; a context manager that closes it.

    With ``card``: opened if it is there (and made with that model), else made with the
    index ``spec`` (and ``thumbnails``); with ``create`` as well, GalleryError when one is
    already there.  Raises GalleryError for a damaged gallery and ConfigError as
    :func:`backend_module`.
    """
    module = backend_module(location)
    if module is not None:
        opener = importlib.import_module(module).open_gallery
        return opener(str(location), card, spec, create=create, lock_timeout=lock_timeout, thumbnails=thumbnails)
    folder = _folder(location)
    if card is None:
        return Gallery.open(folder, lock_timeout, gpu)
    opened = Gallery.create if create else Gallery.open_or_create
    return opened(folder, card, spec, lock_timeout, gpu, thumbnails)


def destroy_gallery(location: str | Path, lock_timeout: float = 120.0) -> int:
    """Delete the gallery at ``location`` with every item in it, without opening it (so a
    damaged one goes too); how many items it held.  GalleryError when there is none."""
    module = backend_module(location)
    if module is not None:
        return int(importlib.import_module(module).destroy_gallery(str(location), lock_timeout))
    return Gallery.destroy(_folder(location), lock_timeout)


def gallery_uid(location: str | Path) -> str | None:
    """The id of the gallery at ``location`` (:attr:`GalleryBackend.uid`), read without
    opening it or making anything; None when there is none.  GalleryError when its server
    cannot be reached, ConfigError as :func:`backend_module`."""
    module = backend_module(location)
    if module is not None:
        return importlib.import_module(module).gallery_uid(str(location))  # type: ignore[no-any-return]
    return folder_uid(_folder(location))


def gallery_names(location: str | Path) -> list[str]:
    """The names (:func:`gallery_name`) of every gallery kept where ``location`` keeps its
    own: the folders beside a gallery folder, the galleries of a PostgreSQL database, the
    collections of a milvus-lite file or Milvus server; sorted."""
    module = backend_module(location)
    if module is not None:
        return importlib.import_module(module).gallery_names(str(location))  # type: ignore[no-any-return]
    parent = _folder(location).parent
    if not parent.is_dir():
        return []
    return sorted(path.name for path in parent.iterdir() if (path / DB_FILE).is_file())


def gallery_name(location: str | Path) -> str:
    """The name ``location`` gives its gallery where it is kept: a folder's name, a
    PostgreSQL location's ``gallery=NAME``, a Milvus collection."""
    module = backend_module(location)
    if module is not None:
        return importlib.import_module(module).gallery_name(str(location))  # type: ignore[no-any-return]
    return _folder(location).name


def _folder(location: str | Path) -> Path:
    return resolve_gallery_path(location) if isinstance(location, str) else Path(location)
