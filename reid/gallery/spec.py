"""Which index a gallery keeps (:class:`IndexSpec`) and the index kinds, in a module that
imports no FAISS, so that the command line builds its index options at once; the indexes
themselves are :mod:`reid.gallery.index`'s."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from reid.errors import ConfigError, ConfigValueError
from reid.serial import as_dict

INDEX_KINDS = ("flat", "hnsw", "ivf", "ivfpq")
TRAINED_KINDS = ("ivf", "ivfpq")
# FAISS's k-means wants at least this many training points per centroid.
POINTS_PER_CENTROID = 39
# k-means on 64 points a centroid pins the centroids as well as on all points.
SAMPLE_PER_CENTROID = 64
MIN_SHARD_SIZE = 100


@dataclass
class IndexSpec:
    """Which index a gallery keeps, and its build and search parameters.

    HNSW: ``hnsw_m`` links per node, ``ef_construction`` and ``ef_search`` beam widths.
    IVF and IVF-PQ: ``nlist`` inverted lists (0: about sqrt(items), re-chosen and retrained
    each time the gallery has grown enough to want twice as many), ``nprobe`` lists searched
    per query (0: about nlist / 32, at least 8).  Both need training data, so a gallery
    asking for them keeps an exact flat index until it holds ``train_min`` items (IVF-PQ:
    at least 39 per PQ centroid, ``39 * 2**pq_bits``); ``train_size`` items, sampled, train
    the quantizers (0: 64 per list, and for IVF-PQ at least 256 per PQ centroid).
    IVF-PQ: ``pq_m`` sub-quantizers of ``pq_bits`` bits each (0: one per 8 dimensions, so
    ``pq_m`` bytes a item at 8 bits); ``refine``: each search takes ``refine`` times the
    asked-for neighbours from the codes and re-ranks them exactly (0: codes only).
    ``shard_size``: items per index file (0: one file); a full shard is sealed and a new
    one started, so growth adds files instead of rewriting one large index.
    """

    kind: str = "flat"
    hnsw_m: int = 32
    ef_construction: int = 80
    ef_search: int = 128
    nlist: int = 0
    nprobe: int = 0
    train_min: int = 10_000
    train_size: int = 0
    pq_m: int = 0
    pq_bits: int = 8
    refine: int = 16
    shard_size: int = 0

    def __post_init__(self) -> None:
        if self.kind not in INDEX_KINDS:
            raise ConfigValueError("index", f"{self.kind!r}: not an index kind; choose one of {', '.join(INDEX_KINDS)}", sep=" ")
        for name in ("hnsw_m", "ef_construction", "ef_search", "train_min"):
            if getattr(self, name) < 1:
                raise ConfigError(f"index option {name} must be at least 1, got {getattr(self, name)}")
        for name in ("nlist", "nprobe", "train_size", "pq_m", "refine", "shard_size"):
            if getattr(self, name) < 0:
                raise ConfigError(f"index option {name} must be 0 (automatic) or positive, got {getattr(self, name)}")
        if not 1 <= self.pq_bits <= 16:
            raise ConfigError(f"index option pq_bits must be 1 to 16, got {self.pq_bits}")
        if self.kind in TRAINED_KINDS and self.train_size and self.train_size < self.min_training:
            raise ConfigError(
                f"index option train_size {self.train_size} is too small: "
                f"{self.kind} needs at least {self.min_training} training items"
            )
        if self.shard_size and self.shard_size < max(MIN_SHARD_SIZE, self.training_items):
            raise ConfigError(
                f"index option shard_size must be 0 (one shard) or at least "
                f"{max(MIN_SHARD_SIZE, self.training_items)} (the items a {self.kind} shard trains on), "
                f"got {self.shard_size}"
            )

    @property
    def min_training(self) -> int:
        """Fewest items k-means can train the quantizers on."""
        if self.kind == "ivfpq":
            return POINTS_PER_CENTROID * 2**self.pq_bits
        return POINTS_PER_CENTROID

    @property
    def training_items(self) -> int:
        """Items a gallery of this kind holds before it trains (0: kinds that never train)."""
        return max(self.train_min, self.min_training) if self.kind in TRAINED_KINDS else 0

    def sub_quantizers(self, dim: int) -> int:
        """``pq_m``, or one sub-quantizer per 8 dimensions (the largest divisor of ``dim`` below that)."""
        if self.pq_m:
            if dim % self.pq_m:
                raise ConfigError(f"index option pq_m {self.pq_m} does not divide the embedding dimension {dim}")
            return self.pq_m
        return next(m for m in range(max(1, dim // 8), 0, -1) if dim % m == 0)

    def check_dim(self, dim: int) -> None:
        """Raise ConfigError unless this spec can index embeddings of dimension ``dim``."""
        if self.kind == "ivfpq":
            self.sub_quantizers(dim)

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)

    @classmethod
    def from_dict(cls, data: Any) -> IndexSpec:
        """The spec a gallery recorded; ConfigError unless ``data`` is an object of its fields."""
        if not isinstance(data, dict):
            raise ConfigError(f"index_spec is a {type(data).__name__}, not an object of index settings")
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for name, value in values.items():
            wanted, words = (str, "text") if name == "kind" else (int, "a whole number")
            if isinstance(value, bool) or not isinstance(value, wanted):
                raise ConfigError(f"index_spec {name} is {str(value)[:40]!r}, not {words}")
        return cls(**values)
