"""Datasets, the synthetic set, the P x K sampler, transforms and safe image loading."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from reid.errors import ConfigValueError
from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.data.io import quiet_opencv, read_image
    from reid.data.records import ImageRecord, ReidDataset, relabel
    from reid.data.synthetic import SyntheticConfig, generate_synthetic

__getattr__, __dir__ = lazy_names(__name__, __file__)

KINDS = ("synthetic", "market1501", "dukemtmc", "msmt17", "folder")
# Text that starts as a data spec's KIND: does (a word then a colon, not a drive letter or a URL).
_KIND_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]+:(?!//)")
# How each published layout is told apart: Market-1501 and DukeMTMC-reID share their folders
# and differ in their file names (``PPPP_cCsS_...`` against ``PPPP_cC_fF...``).
_LAYOUT_NAMES = {"market1501": "Market-1501", "dukemtmc": "DukeMTMC-reID", "msmt17": "MSMT17"}
_DUKE_NAME = re.compile(r"^-?\d+_c\d+_f\d+")


def synthetic_home(config: SyntheticConfig) -> Path:
    """Where ``--data synthetic`` is written: a cache folder keyed by the config."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode()).hexdigest()[:10]
    return cache / "reid" / f"synthetic-{key}"


def data_spec_kind(spec: str) -> str | None:
    """The KIND of a data set named ``KIND:PATH`` (KIND one of :data:`KINDS`, any case) or
    ``synthetic``; None for any other text (a file, folder or glob).  What every command
    taking data reads as a data set rather than as a path."""
    kind, sep, _ = spec.partition(":")
    kind = kind.strip().lower()
    return kind if kind in KINDS and (sep or kind == "synthetic") else None


def looks_like_data_spec(text: str) -> bool:
    """True when ``text`` starts as ``KIND:`` does, a known KIND or not (``market:PATH``),
    so that commands taking files or data sets answer it as a data spec (an unknown kind
    named) rather than as a missing file."""
    return data_spec_kind(text) is not None or _KIND_PREFIX.match(text) is not None


def data_layout(path: str | Path) -> str | None:
    """The KIND whose published layout folder ``path`` has: "market1501" or "dukemtmc"
    (``bounding_box_train/``, ``query/``, ``bounding_box_test/``; told apart by the file
    names), "msmt17" (``list_train.txt`` beside ``train/``); None for any other path."""
    root = Path(path)
    if all((root / name).is_dir() for name in ("bounding_box_train", "query", "bounding_box_test")):
        first = next((p.name for p in sorted((root / "bounding_box_train").iterdir()) if p.is_file()), "")
        return "dukemtmc" if _DUKE_NAME.match(first) else "market1501"
    if (root / "list_train.txt").is_file() and (root / "train").is_dir():
        return "msmt17"
    return None


def parse_data_spec(spec: str) -> tuple[str, str]:
    """The (KIND, PATH) of a data spec ``KIND:PATH`` (KIND one of :data:`KINDS`, any case;
    PATH empty only for ``synthetic``): the one reading of ``--data`` and of data sets given
    to enrol, so every command answers a bad one alike.

    Raises ConfigValueError (key ``data``, one line): an unknown KIND; a spec without KIND
    (a folder of a published layout is told the KIND to put before it); a KIND without its
    folder; ``folder:`` on a published layout (told the KIND that reads it).
    """
    kind, sep, path = spec.partition(":")
    kind = kind.strip().lower()
    if kind in KINDS:
        if not path and kind != "synthetic":
            raise ConfigValueError("data", f"{spec!r}: {kind} needs a folder, as {kind}:PATH", sep=" ")
        layout = data_layout(path) if kind == "folder" else None
        if layout is not None:
            raise ConfigValueError(
                "data", f"{spec!r}: {path} is a {_LAYOUT_NAMES[layout]} layout, not identity folders; "
                f"give {layout}:{path}", sep=" "
            )
        return kind, path
    if _KIND_PREFIX.match(spec):
        raise ConfigValueError(
            "data", f"{spec!r}: unknown dataset kind {kind!r}; use one of {', '.join(KINDS)} as KIND:PATH", sep=" "
        )
    layout = data_layout(spec)
    if layout is not None:
        hint = f"this is a {_LAYOUT_NAMES[layout]} layout: give {layout}:{spec}"
    else:
        hint = f"as {', '.join(k + ':' for k in KINDS if k != 'synthetic')} or synthetic"
    raise ConfigValueError("data", f"{spec!r}: give KIND:PATH ({hint})", sep=" ")


def load_dataset(spec: str, synthetic: SyntheticConfig | None = None) -> ReidDataset:
    """Load a dataset named ``KIND:PATH`` (KIND one of :data:`KINDS`) or ``synthetic``
    (optionally ``synthetic:PATH``; the set is generated once and cached).

    Returns its train, query and gallery splits as :class:`ImageRecord` lists; entries not
    taken are in ``skipped`` with the reason. Images are not read here.

    Raises:
        ConfigValueError: as :func:`parse_data_spec` (naming the key ``data``).
        DataError: a missing folder, or a folder without the expected layout; one line
            naming it.
    """
    from reid.data.folders import read_identity_folders
    from reid.data.market import read_market_style, read_msmt17
    from reid.data.synthetic import SyntheticConfig, generate_synthetic  # noqa: F811

    kind, path = parse_data_spec(spec)
    if kind == "synthetic":
        config = synthetic or SyntheticConfig()
        root = generate_synthetic(Path(path) if path else synthetic_home(config), config)
        dataset = read_market_style(root, "synthetic")
        return dataset
    if kind in ("market1501", "dukemtmc"):
        return read_market_style(Path(path), kind)
    if kind == "msmt17":
        return read_msmt17(Path(path))
    return read_identity_folders(Path(path))


__all__ = [
    "KINDS",
    "ImageRecord",
    "ReidDataset",
    "SyntheticConfig",
    "data_layout",
    "data_spec_kind",
    "generate_synthetic",
    "load_dataset",
    "looks_like_data_spec",
    "parse_data_spec",
    "quiet_opencv",
    "read_image",
    "relabel",
]
