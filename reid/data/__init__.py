"""Datasets, the synthetic set, the P x K sampler, transforms and safe image loading."""

from __future__ import annotations

import hashlib
import json
import os
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


def load_dataset(spec: str, synthetic: SyntheticConfig | None = None) -> ReidDataset:
    """Load a dataset named ``KIND:PATH`` (KIND one of :data:`KINDS`) or ``synthetic``
    (optionally ``synthetic:PATH``; the set is generated once and cached).

    Returns its train, query and gallery splits as :class:`ImageRecord` lists; entries not
    taken are in ``skipped`` with the reason. Images are not read here.

    Raises:
        ConfigValueError: an unknown kind, or a kind without its folder (naming the key
            ``data``).
        DataError: a missing folder, or a folder without the expected layout; one line
            naming it.
    """
    from reid.data.folders import read_identity_folders
    from reid.data.market import read_market_style, read_msmt17
    from reid.data.synthetic import SyntheticConfig, generate_synthetic  # noqa: F811

    kind, _, path = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise ConfigValueError(
            "data", f"{spec!r}: unknown dataset kind {kind!r}; use one of {', '.join(KINDS)} as KIND:PATH", sep=" "
        )
    if kind == "synthetic":
        config = synthetic or SyntheticConfig()
        root = generate_synthetic(Path(path) if path else synthetic_home(config), config)
        dataset = read_market_style(root, "synthetic")
        return dataset
    if not path:
        raise ConfigValueError("data", f"{spec!r}: {kind} needs a folder, as {kind}:PATH", sep=" ")
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
    "data_spec_kind",
    "generate_synthetic",
    "load_dataset",
    "quiet_opencv",
    "read_image",
    "relabel",
]
