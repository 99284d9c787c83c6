"""Searching a gallery on GPUs, when faiss-gpu is installed and a GPU is visible.

The files on disk stay CPU indexes, readable by any FAISS build; the GPU holds copies made
for searching only, one per shard (shards go to the GPUs in turn), remade when a shard
changes.  ``REID_FAISS_GPU`` (or the ``gpu`` argument of :class:`reid.gallery.Gallery`)
picks: ``auto`` (default) uses GPUs whenever FAISS can, ``1`` insists (an error when it
cannot), ``0`` never.  HNSW has no GPU version and is searched on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import faiss
import numpy as np

from reid.errors import ConfigError
from reid.gallery.index import built_kind

GPU_ENV = "REID_FAISS_GPU"
GPU_SETTINGS: dict[str, bool | None] = {
    "auto": None,
    "1": True,
    "on": True,
    "yes": True,
    "true": True,
    "0": False,
    "off": False,
    "no": False,
    "false": False,
}
GPU_KINDS = ("flat", "ivf", "ivfpq")
# FAISS's GPU k-selection returns at most this many neighbours a query; larger searches run on the CPU.
GPU_MAX_K = 2048


@dataclass(frozen=True)
class GpuSupport:
    """What this process's FAISS offers: GPU code compiled in (``build``) and GPUs it sees."""

    build: bool
    devices: int


def detect_gpus() -> GpuSupport:
    build = hasattr(faiss, "StandardGpuResources")
    return GpuSupport(build, int(faiss.get_num_gpus()) if build else 0)


def use_gpu(setting: str | None, support: GpuSupport) -> bool:
    """Whether to search on GPUs, for a ``REID_FAISS_GPU`` value (None: auto) and what FAISS offers."""
    key = (setting or "auto").strip().lower()
    if key not in GPU_SETTINGS:
        raise ConfigError(f"{GPU_ENV}={setting!r}: choose auto, 1 (always) or 0 (never)")
    wanted = GPU_SETTINGS[key]
    available = support.build and support.devices > 0
    if wanted is None:
        return available
    if wanted and not available:
        reason = "this FAISS has no GPU support (install faiss-gpu)" if not support.build else "FAISS sees no GPU"
        raise ConfigError(f"{GPU_ENV}={setting}: {reason}")
    return wanted


@dataclass
class GpuSearch:
    """GPU copies of shard indexes, one ``StandardGpuResources`` per device, made when first searched."""

    devices: int
    _resources: dict[int, Any] = field(default_factory=dict)
    # id(cpu index) -> (cpu index, items when copied, copy or None when it stays on the CPU)
    _copies: dict[int, tuple[faiss.Index, int, faiss.Index | None]] = field(default_factory=dict)

    def copies(self, indexes: list[faiss.Index]) -> list[faiss.Index | None]:
        """A GPU copy of each index (None: searched on the CPU); unchanged indexes keep their copy."""
        kept: dict[int, tuple[faiss.Index, int, faiss.Index | None]] = {}
        result = []
        for number, index in enumerate(indexes):
            cached = self._copies.get(id(index))
            if cached is None or cached[0] is not index or cached[1] != index.ntotal:
                cached = (index, int(index.ntotal), self._copy(index, number % self.devices))
            kept[id(index)] = cached
            result.append(cached[2])
        self._copies = kept
        return result

    def added(self, index: faiss.Index, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Items were just added to ``index``: add them to its GPU copy rather than copy it anew."""
        cached = self._copies.get(id(index))
        if cached is None or cached[0] is not index or cached[2] is None or cached[1] + len(ids) != index.ntotal:
            return
        try:
            cached[2].add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids)
        except RuntimeError:
            # The copy is dropped, and made again from the CPU index at the next search.
            del self._copies[id(index)]
            return
        self._copies[id(index)] = (index, int(index.ntotal), cached[2])

    def _copy(self, index: faiss.Index, device: int) -> faiss.Index | None:
        kind = built_kind(index)
        if kind not in GPU_KINDS:
            return None
        if device not in self._resources:
            self._resources[device] = faiss.StandardGpuResources()
        options = faiss.GpuClonerOptions()
        # float16 look-up tables let IVF-PQ with 64 sub-quantizers fit the GPU's shared
        # memory (its codes are approximate anyway); flat and IVF keep float32 vectors.
        options.useFloat16 = kind == "ivfpq"
        try:
            return faiss.index_cpu_to_gpu(self._resources[device], device, index, options)
        except RuntimeError:
            # Layouts the GPU code lacks (e.g. PQ codes other than 8 bits) stay on the CPU.
            return None

    def on_gpu(self) -> int:
        """How many of the indexes last copied are on a GPU."""
        return sum(1 for _, _, copy in self._copies.values() if copy is not None)
