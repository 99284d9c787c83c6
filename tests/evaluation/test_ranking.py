"""Ranking metrics: hand-computed cases, a per-query reference, chunking and the tie rule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reid.errors import ConfigError, DataError
from reid.evaluation import evaluate_distmat, evaluate_features, ranked_lists


def reference(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50):
    """Plain per-query evaluation: stable argsort, drop junk, read off ranks of true matches."""
    aps, inps, cmcs = [], [], []
    for i in range(len(q_pids)):
        order = np.argsort(distmat[i], kind="stable")
        junk = (g_pids[order] == q_pids[i]) & (g_camids[order] == q_camids[i])
        match = (g_pids[order] == q_pids[i])[~junk]
        if not match.any():
            continue
        ranks = np.flatnonzero(match) + 1
        aps.append(np.mean(np.arange(1, ranks.size + 1) / ranks))
        inps.append(ranks.size / ranks[-1])
        cmc = np.zeros(max_rank)
        cmc[ranks[0] - 1 :] = 1
        cmcs.append(cmc)
    cmc = np.mean(cmcs, axis=0)
    return {"cmc": cmc, "mAP": np.mean(aps), "mINP": np.mean(inps), "valid": len(aps)}


def arrays(*values):
    return [np.asarray(v) for v in values]


def test_single_query_by_hand():
    # Gallery ranked by distance: g0 (other pid), g1 (match), g2 (other), g3 (match).
    distmat = np.array([[0.1, 0.2, 0.3, 0.4]])
    q_pids, g_pids, q_cams, g_cams = arrays([1], [2, 1, 3, 1], [0], [1, 1, 1, 2])
    result = evaluate_distmat(distmat, q_pids, g_pids, q_cams, g_cams, max_rank=4)
    # True matches at ranks 2 and 4: AP = (1/2 + 2/4) / 2 = 0.5; INP = 2 / 4.
    assert result.rank1 == 0.0
    assert result.rank5 == 1.0
    assert result.mAP == pytest.approx(0.5)
    assert result.mINP == pytest.approx(0.5)
    assert result.cmc.tolist() == [0.0, 1.0, 1.0, 1.0]


def test_same_camera_match_is_removed_and_query_skipped():
    distmat = np.array([[0.1, 0.5, 0.9], [0.3, 0.2, 0.1]])
    # Query 0 (pid 1, cam 0): its only match g0 is in cam 0 too, so it is junk: skipped.
    # Query 1 (pid 2, cam 0): match g1 in cam 1 ranks after g2 (junk? no: pid 3) -> rank 2.
    q_pids, g_pids, q_cams, g_cams = arrays([1, 2], [1, 2, 3], [0, 0], [0, 1, 0])
    result = evaluate_distmat(distmat, q_pids, g_pids, q_cams, g_cams, max_rank=3)
    assert result.num_query == 2
    assert result.num_valid_queries == 1
    assert result.num_skipped_queries == 1
    assert result.rank1 == 0.0 and result.rank5 == 1.0
    assert result.mAP == pytest.approx(0.5)


def test_same_camera_match_does_not_take_a_rank():
    # The same-pid same-camera item at distance 0.1 would be rank 1; removed, the
    # cross-camera match moves from rank 3 to rank 2.
    distmat = np.array([[0.1, 0.2, 0.3]])
    q_pids, g_pids, q_cams, g_cams = arrays([5], [5, 7, 5], [1], [1, 2, 3])
    result = evaluate_distmat(distmat, q_pids, g_pids, q_cams, g_cams, max_rank=2)
    assert result.mAP == pytest.approx(0.5)
    assert result.mINP == pytest.approx(0.5)
    assert result.cmc.tolist() == [0.0, 1.0]


def test_gallery_full_of_distractors():
    # Ten distractors (pid 0) closer than the one true match: rank 11, AP = 1/11.
    distmat = np.array([[*np.linspace(0.1, 0.2, 10), 0.5]])
    g_pids = np.array([0] * 10 + [4])
    result = evaluate_distmat(distmat, np.array([4]), g_pids, np.array([1]), np.array([2] * 11), max_rank=20)
    assert result.rank10 == 0.0
    assert result.mAP == pytest.approx(1 / 11)
    assert result.mINP == pytest.approx(1 / 11)
    assert result.cmc[10] == 1.0 and result.cmc[9] == 0.0


def test_only_distractors_means_nothing_to_evaluate():
    distmat = np.array([[0.1, 0.2]])
    with pytest.raises(DataError, match="none of the 1 queries"):
        evaluate_distmat(distmat, np.array([4]), np.array([0, 0]), np.array([1]), np.array([2, 2]))


def test_ties_are_broken_by_gallery_index():
    # All four items tie.  Stable order by index: g0 (other), g1 (match), g2 (other), g3 (match).
    distmat = np.full((1, 4), 0.7)
    q_pids, g_pids, q_cams, g_cams = arrays([1], [2, 1, 3, 1], [0], [1, 1, 1, 1])
    result = evaluate_distmat(distmat, q_pids, g_pids, q_cams, g_cams, max_rank=4)
    assert result.mAP == pytest.approx(0.5)
    assert result.rank1 == 0.0
    # Reversing the gallery reverses the tie order: matches now at ranks 1 and 3.
    result = evaluate_distmat(distmat, q_pids, g_pids[::-1], q_cams, g_cams, max_rank=4)
    assert result.mAP == pytest.approx((1 + 2 / 3) / 2)
    assert result.rank1 == 1.0


def test_tie_with_junk_item():
    # A junk item tied with a true match must not push the match down.
    distmat = np.array([[0.5, 0.5, 0.2]])
    q_pids, g_pids, q_cams, g_cams = arrays([1], [1, 1, 2], [0], [0, 3, 3])
    result = evaluate_distmat(distmat, q_pids, g_pids, q_cams, g_cams, max_rank=3)
    assert result.mAP == pytest.approx(0.5)


@pytest.mark.parametrize("seed", range(6))
def test_matches_per_query_reference(seed):
    rng = np.random.default_rng(seed)
    num_q, num_g = rng.integers(5, 80), rng.integers(20, 400)
    q_pids, g_pids = rng.integers(0, 15, num_q), rng.integers(0, 15, num_g)
    q_cams, g_cams = rng.integers(0, 4, num_q), rng.integers(0, 4, num_g)
    # Odd seeds use coarse integer distances so that ties are everywhere.
    distmat = rng.random((num_q, num_g)) if seed % 2 == 0 else rng.integers(0, 6, (num_q, num_g)).astype(np.float32)
    expected = reference(distmat, q_pids, g_pids, q_cams, g_cams, max_rank=20)
    result = evaluate_distmat(distmat, q_pids, g_pids, q_cams, g_cams, max_rank=20, chunk_size=int(rng.integers(1, 30)))
    assert result.num_valid_queries == expected["valid"]
    assert result.mAP == pytest.approx(expected["mAP"], abs=1e-12)
    assert result.mINP == pytest.approx(expected["mINP"], abs=1e-12)
    np.testing.assert_allclose(result.cmc, expected["cmc"], atol=1e-12)
    assert result.rank1 == pytest.approx(expected["cmc"][0])
    assert result.rank10 == pytest.approx(expected["cmc"][9])


def assert_same_metrics(a, b):
    """Chunking must not change results; BLAS may round a float32 distance differently for
    another block shape, which can swap two items whose distances differ by one ulp."""
    assert a.num_valid_queries == b.num_valid_queries
    for key in ("rank1", "rank5", "rank10", "mAP", "mINP"):
        assert getattr(a, key) == pytest.approx(getattr(b, key), abs=1e-6)
    np.testing.assert_allclose(a.cmc, b.cmc, atol=1e-6)


def test_chunked_distmat_is_exact():
    rng = np.random.default_rng(11)
    distmat = rng.random((57, 300)).astype(np.float32)
    q_pids, g_pids = rng.integers(0, 9, 57), rng.integers(0, 9, 300)
    q_cams, g_cams = rng.integers(0, 3, 57), rng.integers(0, 3, 300)
    whole = evaluate_distmat(distmat, q_pids, g_pids, q_cams, g_cams)
    for chunk in (1, 5, 56):
        part = evaluate_distmat(distmat, q_pids, g_pids, q_cams, g_cams, chunk_size=chunk)
        assert (part.mAP, part.mINP, part.cmc.tolist()) == (whole.mAP, whole.mINP, whole.cmc.tolist())


def clustered(rng, num_ids, query_per_id, gallery_per_id, dim, cams=6, spread=0.6):
    """Query and gallery features drawn around shared identity centres."""
    centers = rng.standard_normal((num_ids, dim))
    out = []
    for per_id in (query_per_id, gallery_per_id):
        pids = np.repeat(np.arange(1, num_ids + 1), per_id)
        feats = centers[pids - 1] + spread * rng.standard_normal((pids.size, dim))
        out += [feats.astype(np.float32), pids, rng.integers(0, cams, pids.size)]
    return out


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_chunked_equals_unchunked_and_distmat(metric):
    rng = np.random.default_rng(7)
    q, q_pids, q_cams, g, g_pids, g_cams = clustered(rng, 30, 2, 6, 16)
    whole = evaluate_features(q, g, q_pids, g_pids, q_cams, g_cams, metric=metric, chunk_size=10_000)
    pieces = evaluate_features(q, g, q_pids, g_pids, q_cams, g_cams, metric=metric, chunk_size=7)
    assert_same_metrics(pieces, whole)
    if metric == "euclidean":
        distmat = np.linalg.norm(q.astype(np.float64)[:, None] - g[None], axis=2)
    else:
        qn = q / np.linalg.norm(q, axis=1, keepdims=True)
        gn = g / np.linalg.norm(g, axis=1, keepdims=True)
        distmat = 1 - qn.astype(np.float64) @ gn.T
    expected = reference(distmat, q_pids, g_pids, q_cams, g_cams)
    assert whole.mAP == pytest.approx(expected["mAP"], abs=1e-9)
    np.testing.assert_allclose(whole.cmc, expected["cmc"], atol=1e-12)
    assert 0.3 < whole.mAP < 1.0


def test_result_to_dict_is_json():
    rng = np.random.default_rng(3)
    q, q_pids, q_cams, g, g_pids, g_cams = clustered(rng, 5, 2, 4, 8)
    result = evaluate_features(q, g, q_pids, g_pids, q_cams, g_cams)
    data = json.loads(json.dumps(result.to_dict(include_cmc=True)))
    for key in ("rank1", "rank5", "rank10", "mAP", "mINP"):
        assert 0.0 <= data[key] <= 1.0
    assert data["num_query"] == 10 and data["num_gallery"] == 20
    assert len(data["cmc"]) == 50
    assert "precision at each true match" in data["ap_definition"]
    assert result.peak_memory_bytes > 0


def test_peak_memory_follows_chunk_size():
    rng = np.random.default_rng(0)
    q, q_pids, q_cams, g, g_pids, g_cams = clustered(rng, 50, 4, 40, 8)
    small = evaluate_features(q, g, q_pids, g_pids, q_cams, g_cams, chunk_size=4)
    large = evaluate_features(q, g, q_pids, g_pids, q_cams, g_cams, chunk_size=50)
    assert_same_metrics(small, large)
    assert small.peak_memory_bytes * 4 < large.peak_memory_bytes
    # A quarter of the queries at a time stays well under one full float64 distance matrix.
    assert large.peak_memory_bytes < 200 * 2000 * 8 / 2


def test_bad_inputs_raise_clear_errors():
    distmat = np.zeros((2, 3))
    with pytest.raises(DataError, match="g_pids has 2 entries, expected 3"):
        evaluate_distmat(distmat, [1, 2], [1, 2], [0, 0], [1, 1, 1])
    with pytest.raises(DataError, match="NaN"):
        evaluate_distmat(np.array([[np.nan, 1.0]]), [1], [1, 2], [0], [1, 1])
    with pytest.raises(ConfigError, match="unknown metric"):
        evaluate_features(np.ones((1, 2)), np.ones((1, 2)), [1], [1], [0], [1], metric="manhattan")
    with pytest.raises(DataError, match="dimension"):
        evaluate_features(np.ones((1, 2)), np.ones((1, 3)), [1], [1], [0], [1])


def test_ranked_lists_follow_protocol():
    q = np.array([[0.0, 0.0]], np.float32)
    g = np.array([[0.1, 0], [0.2, 0], [0.3, 0], [0.4, 0]], np.float32)
    (lst,) = ranked_lists(q, g, [1], [1, 2, 1, 1], [0], [0, 1, 1, 2], queries=[0], top_k=3)
    # g0 is the same pid and camera: removed.
    assert lst.gallery.tolist() == [1, 2, 3]
    assert lst.matches.tolist() == [False, True, True]
    np.testing.assert_allclose(lst.distances, [0.2, 0.3, 0.4], rtol=1e-5)


def test_every_ranking_figure_is_written_under_its_one_name_as_a_fraction() -> None:
    """The JSON keys of a ranking result are the names of RANKING_METRICS, the history's
    evaluation scalars and the command line's table columns, each in [0, 1]."""
    from reid.cli.common import RANKING
    from reid.engine.history import EVAL_SCALARS
    from reid.evaluation.names import RANKING_METRICS

    rng = np.random.default_rng(0)
    distmat = rng.random((6, 12))
    data = evaluate_distmat(distmat, np.arange(6) % 3, np.arange(12) % 3, np.zeros(6, int), np.ones(12, int)).to_dict()
    assert [key for key in data if key in RANKING_METRICS] == list(RANKING_METRICS) == list(EVAL_SCALARS)
    assert dict(RANKING) == RANKING_METRICS
    assert all(0.0 <= data[key] <= 1.0 for key in RANKING_METRICS)
