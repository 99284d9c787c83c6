"""Galleries: enrolled embeddings in a FAISS index, their items in SQLite, safe to share.

>>> gallery = open_gallery("galleries/staff", encoder.card)   # opened, or made for the model
>>> gallery.add(encoder.embed(crops), [ItemMeta("alice", source="a.jpg")])
>>> gallery.search(encoder.embed([probe]), k=5)   # -> [[IdentityMatch(identity, distance, item_id), ...]]

Embeddings go in as float32 (N, D) rows of the gallery's model (L2-normalized on the way
in); distances come out as Euclidean between unit embeddings, 0..2
(:func:`similarity_to_distance` of FAISS's inner product).  A damaged, tampered or
unwritable gallery raises GalleryError naming the file; a bad argument ConfigError; a
failed write leaves the gallery as it was.  The seam every backend implements is
:class:`GalleryBackend` (:mod:`~reid.gallery.base`), opened by location with
:func:`open_gallery` (:mod:`~reid.gallery.opener`).  The FAISS + SQLite backend's parts:
:mod:`~reid.gallery.store` (the lock and the commit), :mod:`~reid.gallery.catalogue`
(SQLite), :mod:`~reid.gallery.view` (the loaded state search reads),
:mod:`~reid.gallery.maintenance`, :mod:`~reid.gallery.search`, :mod:`~reid.gallery.check`,
:mod:`~reid.gallery.export`, :mod:`~reid.gallery.files`, :mod:`~reid.gallery.shards`,
:mod:`~reid.gallery.index` and :mod:`~reid.gallery.thumbnails` (small JPEGs of enrolled
crops, personal data, deleted with their items).
"""

from typing import TYPE_CHECKING

from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.decision import similarity_to_distance
    from reid.gallery.spec import INDEX_KINDS, IndexSpec
    from reid.gallery.records import (
        AddResult,
        CheckReport,
        EmbeddingModel,
        GalleryInfo,
        GalleryItem,
        GalleryMeta,
        IdentityMatch,
        IdentitySummary,
        ItemMeta,
        ModelFacts,
        RecallReport,
    )
    from reid.gallery.catalogue import DB_FILE
    from reid.gallery.search import SCORES
    from reid.gallery.base import GalleryBackend
    from reid.gallery.store import Gallery, resolve_gallery_path
    from reid.gallery.opener import destroy_gallery, open_gallery
    from reid.gallery import thumbnails

__getattr__, __dir__ = lazy_names(__name__, __file__)

__all__ = [
    "DB_FILE",
    "INDEX_KINDS",
    "SCORES",
    "AddResult",
    "CheckReport",
    "EmbeddingModel",
    "Gallery",
    "GalleryBackend",
    "GalleryInfo",
    "GalleryItem",
    "GalleryMeta",
    "IdentityMatch",
    "IdentitySummary",
    "IndexSpec",
    "ItemMeta",
    "ModelFacts",
    "RecallReport",
    "destroy_gallery",
    "open_gallery",
    "resolve_gallery_path",
    "similarity_to_distance",
    "thumbnails",
]
