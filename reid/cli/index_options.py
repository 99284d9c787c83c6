"""Index flags shared by ``reid enroll`` (a new gallery's index) and ``reid gallery reindex``."""

from __future__ import annotations

import typer

from reid.errors import ConfigError
from reid.gallery import INDEX_KINDS, IndexSpec

NLIST_OPTION = typer.Option(None, "--nlist", help="IVF / IVF-PQ lists (default: about sqrt(items)).")
NPROBE_OPTION = typer.Option(None, "--nprobe", help="IVF / IVF-PQ lists searched per query (default: nlist / 32).")
EF_SEARCH_OPTION = typer.Option(None, "--ef-search", help="HNSW search beam width (default 128).")
TRAIN_SIZE_OPTION = typer.Option(
    None,
    "--train-size",
    help="IVF / IVF-PQ: items the quantizers train on, sampled when there are more "
    "(default: 64 per list; IVF-PQ at least 65,536).",
)
PQ_M_OPTION = typer.Option(
    None, "--pq-m", help="IVF-PQ sub-quantizers: bytes per item at 8 bits (default: dimension / 8)."
)
PQ_BITS_OPTION = typer.Option(None, "--pq-bits", help="IVF-PQ bits per sub-quantizer (default 8; GPUs need 8).")
REFINE_OPTION = typer.Option(
    None,
    "--refine",
    help="IVF-PQ: re-rank this many times the asked-for neighbours with the stored embeddings "
    "(default 16; 0: codes only).",
)
SHARD_SIZE_OPTION = typer.Option(
    None, "--shard-size", help="Items per index file; full shards are sealed and searched together (default: one)."
)


def index_kind_option(required: bool) -> typer.models.OptionInfo:
    usage = "|".join(INDEX_KINDS)
    if required:
        return typer.Option(..., "--index", help=usage)
    return typer.Option(None, "--index", help=f"Index of a new gallery: {usage} (default flat).")


def spec_from_flags(index: str, **flags: int | None) -> IndexSpec:
    """The index flags as an IndexSpec; flags left unset keep the defaults."""
    return IndexSpec(kind=index, **{name: value for name, value in flags.items() if value is not None})


def optional_spec_from_flags(index: str | None, **flags: int | None) -> IndexSpec | None:
    """As :func:`spec_from_flags`, or None when no flag was given (other flags need ``--index``)."""
    if index is None:
        given = [name for name, value in flags.items() if value is not None]
        if given:
            raise ConfigError(f"--{given[0].replace('_', '-')} needs --index")
        return None
    return spec_from_flags(index, **flags)
