"""What ``reid serve`` serves: its galleries, their models, detectors and thresholds, and the
server's limits, from ``serve.yaml`` and the command line (options override the file).

A ``serve.yaml``::

    root: galleries                 # folder whose sub-folders are the galleries served
    models: {demo: models/demo}     # loaded before the port opens
    galleries:
      staff: {model: demo, detect: person, no_face: skip, threshold: 0.45}
      visitors: {location: "postgresql://db.example.org/reid?gallery=visitors"}
    gallery_location: "postgresql://db.example.org/reid?gallery={name}"   # default: folders under root
    threads: 4                      # inference threads per process
    queue: 16                       # requests waiting for a thread before 503
    cors_origins: []                # CORS stays off unless origins are named

Every gallery folder under ``root`` (or, with ``gallery_location``, every gallery kept there)
is served with the model whose fingerprint it records; ``galleries`` adds settings (and names
the model of a gallery not yet created), and a ``location`` keeps one elsewhere
(:mod:`reid.serve.places`).
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote, urlsplit, urlunsplit

import yaml
from pydantic import Field

from reid.decision import check_distance_threshold
from reid.errors import ConfigError
from reid.names import check_gallery_name
from reid.options import check_fields
from reid.paths import read_text_bounded
from reid.serial import MAX_CONFIG_BYTES, check_yaml_shape
from reid.pipeline.configs import EnrolConfig, QueryConfig, TopK, check_detect

MIB = 1024 * 1024
# What stands for a gallery's name in gallery_location (reid.serve.places).
NAME_FIELD = "{name}"


@dataclass(frozen=True)
class StreamUrl:
    """A stream URL as the allow-list compares it: ``scheme`` and ``host`` lowercased, the
    ``port`` (None when the URL names none), the ``path``; ``shown`` is the URL without
    its user and password (what a client reads)."""

    scheme: str
    host: str
    port: int | None
    path: str
    shown: str

    @classmethod
    def parse(cls, text: str, what: str = "the stream URL") -> StreamUrl:
        """``text`` parsed; ConfigError for a URL without scheme or host, with a bad port,
        with spaces, controls or backslashes, with more than one ``@`` (parsers disagree on
        which host such a URL names), or with a ``..`` segment."""
        if any(c.isspace() or c == "\\" or unicodedata.category(c)[0] == "C" for c in text):
            raise ConfigError(f"{what} holds spaces, controls or backslashes")
        parts = urlsplit(text)
        if parts.netloc.count("@") > 1:
            raise ConfigError(f"{what} names more than one '@' before its host")
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(f"{what} has a malformed port") from None
        if not parts.scheme or not parts.hostname:
            raise ConfigError(f"{what} names no scheme and host (scheme://host[:port]/path)")
        if not _is_host(parts.hostname):
            raise ConfigError(f"{what} names no whole host (an IP address or a DNS name such as cam1.example.org)")
        if ".." in unquote(parts.path).split("/"):
            raise ConfigError(f"{what} has a '..' segment")
        netloc = parts.netloc.rsplit("@", 1)[-1]
        shown = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        return cls(parts.scheme.lower(), parts.hostname.lower(), port, parts.path, shown)

    def admits(self, other: StreamUrl) -> bool:
        """True when ``other`` is under this allow-list entry: the same scheme, host and port,
        and a path that is this path or below it (``/live`` admits ``/live/1``, not ``/lively``)."""
        if (self.scheme, self.host, self.port) != (other.scheme, other.host, other.port):
            return False
        base = self.path.rstrip("/")
        return not base or other.path == base or other.path.startswith(base + "/")


@dataclass
class GallerySettings:
    """How one gallery is served.  ``model``: a name in :attr:`ServeConfig.models` (default:
    the loaded model whose fingerprint the gallery records); ``detect``
    (:data:`reid.pipeline.subject.DETECT_CHOICES`), ``detector`` (a
    :func:`reid.detect.build_detector` name) and ``no_face``
    (:data:`reid.pipeline.subject.NONE_FOUND`) say how an uploaded photo is cut to its
    subjects, as ``--detect``, ``--detector`` and ``--no-face`` do for the photo commands
    (:func:`reid.pipeline.subject.photo_rule`); ``threshold``: the decision
    threshold, a Euclidean distance between unit embeddings in (0, 2] (default: the model
    card's, else the gallery's); ``top_k``: identities returned per subject by default;
    ``location``: where the gallery is kept, a folder or a backend's location
    (``postgresql://HOST/DB?gallery=NAME``, ``milvus:FILE.db/COLLECTION``,
    ``milvus://HOST:PORT/COLLECTION``; :mod:`reid.serve.places`), never with a password."""

    model: str | None = None
    detect: str = EnrolConfig.detect
    detector: str | None = None
    no_face: str = EnrolConfig.no_face
    threshold: float | None = None
    top_k: TopK = QueryConfig.top_k
    location: str | None = None

    def check(self, where: str) -> None:
        try:
            check_fields(self)
            check_detect(self.detect, self.no_face, self.detector)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        check_distance_threshold(self.threshold, f"{where}: threshold")


@dataclass
class ServeConfig:
    """The server's settings; see the module docstring for the file.

    ``threads`` run inference in each process and ``queue`` requests may wait for one;
    beyond that a request is answered 503 with ``Retry-After``.  ``workers``: uvicorn
    processes sharing the port (each loads the models).  ``max_body_bytes`` bounds a
    request (413 above); ``max_images`` the images in one request.  ``no_auth`` serves
    without keys, only on a loopback host.  ``keys_file`` (default ``ROOT/.serve-keys.json``)
    holds the per-gallery keys, hashed.  ``allowed_hosts``: the names (``Host`` headers)
    the server answers to besides loopback ones; checked when named, and always with
    ``no_auth`` (which then also refuses cross-site writes).  ``watch_urls`` are URL
    prefixes, each with a host, compared by scheme, host, port and path (:class:`StreamUrl`).
    ``max_event_streams``: watch event streams open at once in a process (each key holds at
    most 4); one more is a 503.  ``gallery_location``: where galleries without a
    ``location`` of their own are kept and made, a location with ``{name}`` standing in
    the gallery's own name (``postgresql://db.example.org/reid?gallery={name}``); unset,
    they are the folders under ``root`` (:mod:`reid.serve.places`).
    """

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65_535)] = 8000
    # Upper bounds too: a settings file must not start more processes, threads or waiting
    # requests than one machine serves.
    workers: Annotated[int, Field(ge=1, le=256)] = 1
    threads: Annotated[int, Field(ge=1, le=4096)] = 4
    queue: Annotated[int, Field(ge=0, le=1_000_000)] = 16
    root: Path = Path("galleries")
    models: dict[str, str] = field(default_factory=dict)
    galleries: dict[str, GallerySettings] = field(default_factory=dict)
    defaults: GallerySettings = field(default_factory=GallerySettings)
    max_body_bytes: Annotated[int, Field(ge=1, le=16 * 1024 * MIB)] = 64 * MIB
    max_images: Annotated[int, Field(ge=1, le=100_000)] = 64
    cors_origins: list[str] = field(default_factory=list)
    allowed_hosts: list[str] = field(default_factory=list)
    no_auth: bool = False
    keys_file: Path | None = None
    lock_timeout: Annotated[float, Field(gt=0, le=86_400)] = 30.0
    watch_files: list[str] = field(default_factory=list)
    watch_cameras: list[int] = field(default_factory=list)
    watch_urls: list[str] = field(default_factory=list)
    max_watches: Annotated[int, Field(ge=1, le=1024)] = 4
    max_event_streams: Annotated[int, Field(ge=1, le=10_000)] = 64
    gallery_location: str | None = None

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        if self.keys_file is not None:
            self.keys_file = Path(self.keys_file)
        check_fields(self)
        for name in self.galleries:
            check_gallery_name(name)
            self.galleries[name].check(f"gallery {name}")
            model = self.galleries[name].model
            if model is not None and model not in self.models:
                raise ConfigError(f"gallery {name}: model {model!r} is not one of the models served ({', '.join(self.models) or 'none'})")
        self.defaults.check("defaults")
        if self.defaults.location is not None:
            raise ConfigError("defaults: location is a gallery's own; gallery_location says where the others are kept")
        for entry in self.watch_urls:
            StreamUrl.parse(entry, f"watch_urls entry {entry[:80]!r}:")
            if "@" in urlsplit(entry).netloc:
                raise ConfigError("watch_urls: an entry names no user or password (a watch's source gives them)")
        if self.no_auth and not is_loopback(self.host):
            raise ConfigError(
                f"--no-auth serves every gallery to anyone who can reach {self.host}; it is allowed on a loopback host only"
            )

    @property
    def keys_path(self) -> Path:
        return self.keys_file if self.keys_file is not None else self.root / ".serve-keys.json"

    def settings(self, gallery: str) -> GallerySettings:
        """The settings of ``gallery``: its own entry, else the defaults."""
        return self.galleries.get(gallery, self.defaults)


DNS_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def _is_host(host: str) -> bool:
    """True for an IP address or a DNS name of whole labels (not ``10.0.0.``, not ``10.0.0``)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.split(".")
    return all(DNS_LABEL.fullmatch(label) for label in labels) and not labels[-1].isdigit()


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_serve_config(path: str | Path | None = None, **options: Any) -> ServeConfig:
    """The settings of ``path`` (a YAML mapping; None: defaults only) with ``options``
    (the ones the user gave) over them.  Raises ConfigError naming the file for an unreadable
    file, an unknown key or a bad value."""
    values: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        try:
            text = read_text_bounded(path, MAX_CONFIG_BYTES, "serve settings file")
            # Aliases, deep nesting and a flood of values are refused before anything is built.
            check_yaml_shape(text, path, "serve settings file")
            loaded = yaml.safe_load(text)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({' '.join(str(exc).split())[:200]})") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping of settings")
        values = dict(loaded or {})
    values.update(options)
    where = str(path) if path is not None else "serve settings"
    known = {f.name for f in fields(ServeConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown setting {unknown[0]!r}; known: {', '.join(sorted(known))}")
    try:
        values["galleries"] = {
            str(name): _settings(entry, f"{where}: gallery {name}") for name, entry in (values.get("galleries") or {}).items()
        }
        values["defaults"] = _settings(values.get("defaults") or {}, f"{where}: defaults")
        models = values.get("models") or {}
        if not isinstance(models, dict):
            raise ConfigError(f"{where}: models must map names to model folders")
        values["models"] = {str(k): str(v) for k, v in models.items()}
        for name in ("cors_origins", "allowed_hosts", "watch_files", "watch_urls", "watch_cameras"):
            listed = values.get(name) or []
            if not isinstance(listed, list):
                raise ConfigError(f"{where}: {name} must be a list")
            values[name] = [_camera(v, where) for v in listed] if name == "watch_cameras" else [str(v) for v in listed]
        return ServeConfig(**values)
    except ConfigError as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith(where) else f"{where}: {message}") from None
    except (TypeError, AttributeError) as exc:
        raise ConfigError(f"{where}: malformed settings ({exc})") from None


def _camera(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: watch_cameras holds camera indexes (0, 1, ...), not {value!r}")
    return value


def _settings(entry: Any, where: str) -> GallerySettings:
    if isinstance(entry, GallerySettings):
        return entry
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping of model, detect, detector, no_face, threshold, top_k, location")
    known = {f.name for f in fields(GallerySettings)}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown setting {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return GallerySettings(**entry)
