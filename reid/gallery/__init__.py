"""Galleries: enrolled embeddings in a FAISS index, their items in SQLite, safe to share.

>>> gallery = Gallery.open_or_create("galleries/staff", encoder.card)
>>> gallery.add(encoder.embed(crops), [ItemMeta("alice", source="a.jpg")])
>>> gallery.search(encoder.embed([probe]), k=5)   # -> [[IdentityMatch(identity, distance, item_id), ...]]
"""

from reid.decision import similarity_to_distance
from reid.gallery.index import INDEX_KINDS, IndexSpec
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
from reid.gallery.store import Gallery, open_gallery, resolve_gallery_path

__all__ = [
    "DB_FILE",
    "INDEX_KINDS",
    "SCORES",
    "AddResult",
    "CheckReport",
    "EmbeddingModel",
    "Gallery",
    "GalleryInfo",
    "GalleryItem",
    "GalleryMeta",
    "IdentityMatch",
    "IdentitySummary",
    "IndexSpec",
    "ItemMeta",
    "ModelFacts",
    "RecallReport",
    "open_gallery",
    "resolve_gallery_path",
    "similarity_to_distance",
]
