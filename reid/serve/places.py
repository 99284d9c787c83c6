"""Where each served gallery is kept: a folder under ``root``, or a location of any backend.

Three rules, in order, give a gallery name its location (:meth:`GalleryPlaces.location`):

1. its ``galleries:`` entry's ``location`` (a folder, ``postgresql://HOST/DB?gallery=NAME``,
   ``milvus:FILE.db/COLLECTION``, ``milvus://HOST:PORT/COLLECTION``);
2. else ``gallery_location``, a location with ``{name}`` standing in the gallery's own name
   in its store (``postgresql://db.example.org/reid?gallery={name}``,
   ``milvus://milvus.example.org:19530/{name}``): where the admin API makes new galleries,
   and where the galleries it lists are found;
3. else the folder ``root/NAME``, as before locations existed.

The galleries served are those the rules find: the entries with a location whose gallery is
there, and the galleries kept where ``gallery_location`` points (else the gallery folders
under ``root``).  Every location goes through :mod:`reid.gallery.opener`, so a password in
one is refused there, in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from reid.errors import ConfigError
from reid.gallery.catalogue import DB_FILE
from reid.gallery.milvus import parse_location as milvus_location
from reid.gallery.opener import BACKENDS, backend_module, gallery_name, gallery_names, gallery_uid
from reid.names import check_gallery_name
from reid.serve.config import NAME_FIELD

# A gallery name that fits every backend's rule, put in gallery_location to find where the
# name lands in the store's own name of the gallery.
PROBE = "reidprobe0"
LITE_MODULE = BACKENDS["milvus"][0]


@dataclass
class GalleryPlaces:
    """The locations of the galleries one server serves (see the module).  ``named``: the
    ``location`` of each ``galleries:`` entry that gives one; ``template``:
    ``gallery_location``.  Raises ConfigError naming the setting for a location no backend
    takes, one with a password, or a ``gallery_location`` whose ``{name}`` is not the
    gallery's own name in its store."""

    root: Path
    template: str | None = None
    named: dict[str, str | Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._affixes = ("", "")
        for name, location in self.named.items():
            try:
                gallery_name(location)
                # A folder is the path written, never a bare name resolved under galleries/.
                self.named[name] = Path(location) if backend_module(location) is None else location
            except ConfigError as exc:
                raise ConfigError(f"gallery {name}: location: {exc}") from None
        if self.template is None:
            return
        if self.template.count(NAME_FIELD) != 1:
            raise ConfigError(f"gallery_location: write {NAME_FIELD} once, where the gallery's name goes")
        try:
            stored = gallery_name(self.template.replace(NAME_FIELD, PROBE))
        except ConfigError as exc:
            raise ConfigError(f"gallery_location: {exc}") from None
        if stored.count(PROBE) != 1:
            raise ConfigError(
                f"gallery_location: {NAME_FIELD} must stand in the gallery's own name "
                "(postgresql://HOST/DB?gallery={name}, milvus:FILE.db/{name}, milvus://HOST:PORT/{name}, a folder's name)"
            )
        before, after = stored.split(PROBE)
        self._affixes = (before, after)

    def location(self, name: str) -> str | Path:
        """Where gallery ``name`` is kept (or would be made); ConfigError for a name no gallery may have."""
        check_gallery_name(name)
        if name in self.named:
            return self.named[name]
        if self.template is not None:
            location = self.template.replace(NAME_FIELD, name)
            return Path(location) if backend_module(location) is None else location
        return self.root / name

    def is_folder(self, name: str) -> bool:
        """True when gallery ``name`` is a FAISS + SQLite folder."""
        return backend_module(self.location(name)) is None

    def exists(self, name: str) -> bool:
        """True when gallery ``name`` is there (GalleryError when its server cannot be reached)."""
        location = self.location(name)
        if backend_module(location) is None:
            return (Path(location) / DB_FILE).is_file()
        return gallery_uid(location) is not None

    def uid(self, name: str) -> str | None:
        """The id gallery ``name`` was made with, or None when it is not there."""
        return gallery_uid(self.location(name))

    def names(self) -> list[str]:
        """Every gallery served (see the module), sorted; GalleryError when a store cannot be reached."""
        found = {name for name in self.named if self.exists(name)}
        if self.template is not None:
            before, after = self._affixes
            for stored in gallery_names(self.template.replace(NAME_FIELD, PROBE)):
                name = stored[len(before) : len(stored) - len(after)] if stored.startswith(before) and stored.endswith(after) else ""
                if _valid(name) and name not in self.named and gallery_name(self.location(name)) == stored:
                    found.add(name)
        elif self.root.is_dir():
            found.update(
                path.name for path in self.root.iterdir()
                if _valid(path.name) and path.name not in self.named and (path / DB_FILE).is_file()
            )  # fmt: skip
        return sorted(found)

    def lite_files(self) -> list[str]:
        """The locations (one per entry, and ``gallery_location``) on milvus-lite files,
        which one process at a time may open."""
        places = [*self.named.values(), *([] if self.template is None else [self.template.replace(NAME_FIELD, PROBE)])]
        return [str(place) for place in places if backend_module(place) == LITE_MODULE and not milvus_location(str(place)).server]


def _valid(name: str) -> bool:
    try:
        check_gallery_name(name)
    except ConfigError:
        return False
    return True
