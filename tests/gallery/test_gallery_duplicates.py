"""Duplicates judged by what the gallery holds (the same pixels embed alike), not by file
bytes: the same image under two identities, near duplicates within one, and ties in search."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gallery_helpers import DIM, clustered, make_card, metas

from reid.errors import ConfigError
from reid.gallery import Gallery, ItemMeta
from reid.gallery.check import NEAR_DUPLICATE, SAME_IMAGE


def resaved(vectors: np.ndarray, identity: str, prefix: str) -> list[ItemMeta]:
    """The photos of ``vectors`` saved again as other files (other bytes, so other hashes)."""
    return [ItemMeta(identity, source=f"{prefix}/{n}.png", image_hash=f"{prefix}-{n}") for n in range(len(vectors))]


def test_the_same_image_under_another_identity_is_refused_when_asked_and_found_by_check(tmp_path: Path) -> None:
    vectors, labels, _ = clustered(3, 2, seed=1)
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        gallery.add(vectors, metas(labels))
        # The same pixels as another file: under its own identity a duplicate, under another refused.
        again = gallery.add(vectors[:1], resaved(vectors[:1], "id0000", "png"), same_image="skip")
        assert again.ids == [] and again.duplicates == [0] and again.conflicts == []
        refused = gallery.add(vectors[:2], resaved(vectors[:2], "mallory", "png"), same_image="skip")
        assert refused.ids == [] and refused.conflicts == [(0, "id0000"), (1, "id0000")]
        assert len(gallery) == 6 and "mallory" not in {s.identity for s in gallery.identities()}
        assert gallery.check(queries=5).same_image_other_identity == 0
        # The library's add judges by hash alone unless asked, as it always did; check finds it.
        kept = gallery.add(vectors[:1], resaved(vectors[:1], "mallory", "keep"))
        assert len(kept.ids) == 1 and kept.conflicts == []
        report = gallery.check(queries=5)
        assert (report.scanned, report.same_image_other_identity) == (7, 2)


def test_the_same_image_twice_in_one_batch(tmp_path: Path) -> None:
    vectors, _, _ = clustered(2, 1, seed=2)
    batch = np.concatenate([vectors, vectors[:1], vectors[:1]])
    items = [ItemMeta(name, source=f"{n}.png", image_hash=f"h{n}") for n, name in enumerate(["a", "b", "a", "c"])]
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        result = gallery.add(batch, items, same_image="skip")
        assert len(result.ids) == 2 and result.duplicates == [2] and result.conflicts == [(3, "a")]
        assert sorted(s.identity for s in gallery.identities()) == ["a", "b"]


def test_near_duplicates_within_an_identity_are_counted_and_kept(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(size=(1, DIM)).astype(np.float32)
    base /= np.linalg.norm(base)
    # Another unit vector at a distance between the two limits.
    side = rng.normal(size=(1, DIM)).astype(np.float32)
    side -= (side @ base.T) * base
    side /= np.linalg.norm(side)
    distance = (SAME_IMAGE + NEAR_DUPLICATE) / 2
    near = (1 - distance**2 / 2) * base + distance * np.sqrt(1 - distance**2 / 4) * side
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        gallery.add(base, resaved(base, "alice", "a"), same_image="skip")
        result = gallery.add(near, resaved(near, "alice", "b"), same_image="skip")
        assert len(result.ids) == 1 and result.near_duplicates == 1 and result.duplicates == []
        stranger = gallery.add(-base, resaved(base, "bob", "c"), same_image="skip")
        assert len(stranger.ids) == 1 and stranger.near_duplicates == 0
        report = gallery.check(queries=3)
        assert (report.near_duplicates, report.same_image_other_identity) == (2, 0)


def test_items_without_an_image_hash_are_not_judged_by_content(tmp_path: Path) -> None:
    vectors, _, _ = clustered(1, 1, seed=4)
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        gallery.add(vectors, [ItemMeta("track-1")], same_image="skip")
        assert len(gallery.add(vectors, [ItemMeta("track-2")], same_image="skip").ids) == 1
        with pytest.raises(ConfigError, match="same_image='drop'"):
            gallery.add(vectors, [ItemMeta("x", image_hash="h")], same_image="drop")


@pytest.mark.parametrize("first", ["alice", "mallory"])
def test_a_tie_goes_to_the_item_enrolled_first(tmp_path: Path, first: str) -> None:
    vectors, _, _ = clustered(2, 1, seed=5)
    second = "mallory" if first == "alice" else "alice"
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        gallery.add(vectors[1:], [ItemMeta("someone")])
        gallery.add(vectors[:1], resaved(vectors[:1], first, "x"))
        gallery.add(vectors[:1], resaved(vectors[:1], second, "y"))
        for score in ("best", "mean"):
            found = gallery.search(vectors[:1], k=3, score=score)[0]
            assert [m.identity for m in found[:2]] == [first, second]
            assert found[0].distance == pytest.approx(found[1].distance, abs=1e-6)


def test_a_query_gets_the_same_distances_alone_and_in_a_batch_so_ties_go_by_item_id(tmp_path: Path) -> None:
    """A batch is scored by a matrix product whose rounding depends on the batch; answers
    are scored again one query at a time, so twins (one vector under two identities, the
    twin enrolled first) tie exactly in any batch and the twin comes first."""
    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(3000, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    labels = [f"p{i:05d}" for i in range(len(vectors))]
    twins = np.arange(0, len(vectors), 10)
    queries = vectors[twins] + rng.normal(size=(len(twins), DIM)).astype(np.float32) * 0.05
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    with Gallery.create(tmp_path / "g", make_card()) as gallery:
        gallery.add(vectors[twins], metas([f"t{i:05d}" for i in twins], prefix="twin"))
        gallery.add(vectors, metas(labels))
        batched = gallery.search(queries, k=2)
        alone = [gallery.search(queries[i : i + 1], k=2)[0] for i in range(len(queries))]
    for i, (together, single) in enumerate(zip(batched, alone, strict=True)):
        assert [(m.identity, m.distance) for m in together] == [(m.identity, m.distance) for m in single]
        assert [m.identity for m in together] == [f"t{twins[i]:05d}", f"p{twins[i]:05d}"]
        assert together[0].distance == together[1].distance
