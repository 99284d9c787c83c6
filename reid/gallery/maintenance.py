"""Index maintenance of a FAISS gallery: train, compact, seal, rewrite without items, reindex.

Each step reads a :class:`~reid.gallery.view.LoadedView` and writes new files (temporary
name, fsync, rename) into the gallery's folder, returning them as a :class:`Rewrite`; it
never commits.  The store names a rewrite's files in one transaction; until then a failed
step deletes what it wrote, and a rewrite no commit names is deleted by the store
(:meth:`Rewrite.discard`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

from reid.gallery.files import new_name, write_snapshot
from reid.gallery.index import TRAINED_KINDS, IndexSpec, auto_nlist, ivf_nlist, plan_training, supports_remove
from reid.gallery.shards import Shard, Written, build_shard, train_template, write_shard
from reid.gallery.view import Layout, LoadedView

# Segments are folded into a new snapshot once they hold this share of its items (so
# rewrites stay proportional to growth), or once there are this many files to open.
COMPACT_SHARE = 0.25
COMPACT_MIN_ITEMS = 4096
COMPACT_MAX_SEGMENTS = 64


@dataclass
class Rewrite:
    """New files for a layout, written but named by no commit yet; ``template`` is the
    trained index behind a new template file, ``spec`` the index options they follow."""

    layout: Layout
    spec: IndexSpec
    written: list[Written] = field(default_factory=list)
    extra: list[Path] = field(default_factory=list)
    template: faiss.Index | None = None

    def paths(self) -> list[Path]:
        return [*(p for item in self.written for p in item.paths), *self.extra]

    def discard(self) -> None:
        for path in self.paths():
            path.unlink(missing_ok=True)


def maintain(view: LoadedView, generation: int) -> Rewrite | None:
    """After an add: the active shard trained, its segments folded in, or it sealed, when
    due; None when nothing is."""
    active, spec = view.layout.active, view.spec
    plan = None
    if spec.kind in TRAINED_KINDS and (
        active.kind == "flat" or (spec.nlist == 0 and auto_nlist(len(active)) >= 2 * ivf_nlist(active.index))
    ):
        # First once it holds enough items, then whenever it has grown to want twice the lists.
        plan = plan_training(spec, len(active))
    full = bool(spec.shard_size) and len(active) >= spec.shard_size
    if plan is None and not full and not _needs_compaction(view):
        return None
    folder, dim = view.folder, view.dim
    rewrite = Rewrite(view.layout, spec)
    with _discarded_on_error(rewrite):
        template, template_record = None, view.layout.template
        if plan is not None:
            template = train_template(spec, dim, plan, active.ids, active.originals)
            rewrite.extra.append(folder / new_name("template", generation, ".faiss"))
            template_record = write_snapshot(template, rewrite.extra[-1])
            rewrite.template = template
            rewrite.written.append(build_shard(spec, dim, active.ids, active.originals, folder, generation, template))
        else:
            rewrite.written.append(write_shard(active, folder, generation))
        sealed = list(view.layout.sealed)
        if full:
            sealed.append((rewrite.written[-1].shard, rewrite.written[-1].record))
            start = template if template is not None else view.template_index()
            empty = np.zeros(0, np.int64)
            rewrite.written.append(build_shard(spec, dim, empty, view.originals, folder, generation, start))
        rewrite.layout = Layout(sealed, rewrite.written[-1].shard, rewrite.written[-1].record, template_record)
    return rewrite


def _needs_compaction(view: LoadedView) -> bool:
    pending = len(view.layout.active) - view.layout.active_record.count
    if len(view.segments) >= COMPACT_MAX_SEGMENTS:
        return True
    if view.layout.active.kind == "hnsw":
        # Opening replays segments into the graph at HNSW's slow insertion rate, so
        # HNSW galleries keep at most a fixed number of items outside the snapshot.
        return pending >= COMPACT_MIN_ITEMS
    return pending >= max(COMPACT_MIN_ITEMS, COMPACT_SHARE * view.layout.active_record.count)


def without(view: LoadedView, ids: np.ndarray, generation: int) -> Rewrite:
    """The shards holding ``ids`` rewritten without them; the active shard is rewritten
    either way, which folds its segments in (so ``ids`` may be empty: a relabelling).
    Shards that lose items in place change in memory: the caller reloads if no commit follows."""
    rewrite = Rewrite(view.layout, view.spec)
    with _discarded_on_error(rewrite):
        sealed = []
        for shard, record in view.layout.sealed:
            gone = ids[shard.holds(ids)]
            if not len(gone):
                sealed.append((shard, record))
            elif len(gone) < len(shard):
                rewrite.written.append(_shard_without(view, shard, gone, generation))
                sealed.append((rewrite.written[-1].shard, rewrite.written[-1].record))
        active = view.layout.active
        rewrite.written.append(_shard_without(view, active, ids[active.holds(ids)], generation))
        rewrite.layout = Layout(sealed, rewrite.written[-1].shard, rewrite.written[-1].record, view.layout.template)
    return rewrite


def _shard_without(view: LoadedView, shard: Shard, gone: np.ndarray, generation: int) -> Written:
    """``shard`` less the items ``gone``, written: removed in place, or rebuilt from its embeddings."""
    if not len(gone) or supports_remove(shard.index):
        if len(gone):
            shard.remove(gone)
        return write_shard(shard, view.folder, generation)
    keep = shard.ids[~np.isin(shard.ids, gone)]
    plan = plan_training(view.spec, len(keep)) if shard.kind in TRAINED_KINDS else None
    template = train_template(view.spec, view.dim, plan, keep, shard.originals) if plan else None
    return build_shard(view.spec, view.dim, keep, shard.originals, view.folder, generation, template)


def reindex(view: LoadedView, spec: IndexSpec, generation: int) -> Rewrite:
    """Every item in new shards as ``spec`` says (full shards sealed, the rest active)."""
    ids, dim, folder = view.labels.ids, view.dim, view.folder
    per_shard = spec.shard_size or max(len(ids), 1)
    plan = plan_training(spec, min(len(ids), per_shard))
    rewrite = Rewrite(view.layout, spec)
    with _discarded_on_error(rewrite):
        template_record = None
        if plan is not None:
            rewrite.template = train_template(spec, dim, plan, ids, view.originals)
            rewrite.extra.append(folder / new_name("template", generation, ".faiss"))
            template_record = write_snapshot(rewrite.template, rewrite.extra[-1])
        sealed_count = len(ids) // per_shard if spec.shard_size else 0
        groups = [ids[n * per_shard : (n + 1) * per_shard] for n in range(sealed_count)]
        groups.append(ids[sealed_count * per_shard :])
        for group in groups:
            rewrite.written.append(build_shard(spec, dim, group, view.originals, folder, generation, rewrite.template))
        sealed = [(w.shard, w.record) for w in rewrite.written[:-1]]
        rewrite.layout = Layout(sealed, rewrite.written[-1].shard, rewrite.written[-1].record, template_record)
    return rewrite


@contextmanager
def _discarded_on_error(rewrite: Rewrite) -> Iterator[None]:
    """Delete the files written in the block when it fails: no commit names them yet."""
    try:
        yield
    except BaseException:
        rewrite.discard()
        raise
