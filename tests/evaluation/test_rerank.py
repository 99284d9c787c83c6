"""k-reciprocal re-ranking against a plain dense implementation of the paper's steps."""

from __future__ import annotations

import numpy as np
import pytest

from reid.errors import ConfigError
from reid.evaluation import evaluate_distmat, evaluate_features, rerank_distances


def rerank_reference(q, g, k1, k2, lam, metric="euclidean"):
    """Zhong et al. 2017 step by step on full matrices, in float64."""
    x = np.vstack([q, g]).astype(np.float64)
    n, nq = len(x), len(q)
    if metric == "euclidean":
        d = ((x[:, None] - x[None]) ** 2).sum(-1)
    else:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        d = 1 - x @ x.T
    d = d / d.max(axis=1, keepdims=True)
    order = np.argsort(d, axis=1, kind="stable")

    def neighbours(i, k):
        return list(order[i, : k + 1])

    def reciprocal(i, k):
        return [j for j in neighbours(i, k) if i in neighbours(j, k)]

    half = int(round(k1 / 2))
    v = np.zeros((n, n))
    for i in range(n):
        base = reciprocal(i, k1)
        expanded = set(base)
        for c in base:
            candidate = reciprocal(c, half)
            if len(set(candidate) & set(base)) > 2 / 3 * len(candidate):
                expanded |= set(candidate)
        idx = sorted(expanded)
        w = np.exp(-d[i, idx])
        v[i, idx] = w / w.sum()
    v = np.stack([v[order[i, :k2]].mean(axis=0) for i in range(n)])
    jaccard = np.zeros((nq, len(g)))
    for i in range(nq):
        for j in range(len(g)):
            a, b = v[i], v[nq + j]
            jaccard[i, j] = 1 - np.minimum(a, b).sum() / np.maximum(a, b).sum()
    return (1 - lam) * jaccard + lam * d[:nq, nq:]


def problem(seed, num_ids=6, q_per=2, g_per=6, dim=5):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((num_ids, dim))
    q_pids = np.repeat(np.arange(num_ids), q_per)
    g_pids = np.repeat(np.arange(num_ids), g_per)
    q = (centers[q_pids] + 0.7 * rng.standard_normal((q_pids.size, dim))).astype(np.float32)
    g = (centers[g_pids] + 0.7 * rng.standard_normal((g_pids.size, dim))).astype(np.float32)
    return q, g, q_pids, g_pids, np.zeros(q_pids.size, int), np.ones(g_pids.size, int)


@pytest.mark.parametrize(
    ("seed", "k1", "k2", "lam", "metric"),
    [(0, 5, 3, 0.3, "euclidean"), (1, 20, 6, 0.3, "euclidean"), (2, 4, 1, 0.5, "cosine"), (3, 7, 2, 0.0, "euclidean")],
)
def test_matches_dense_reference(seed, k1, k2, lam, metric):
    q, g, *_ = problem(seed)
    expected = rerank_reference(q, g, k1, k2, lam, metric)
    got = rerank_distances(q, g, metric=metric, k1=k1, k2=k2, lambda_value=lam, chunk_size=5)
    np.testing.assert_allclose(got, expected, atol=2e-5)


def test_lambda_one_keeps_the_normalized_original_order():
    q, g, *_ = problem(4)
    got = rerank_distances(q, g, lambda_value=1.0)
    x = np.vstack([q, g]).astype(np.float64)
    d = ((x[:, None] - x[None]) ** 2).sum(-1)
    np.testing.assert_allclose(got, (d / d.max(axis=1, keepdims=True))[: len(q), len(q) :], atol=1e-5)


def test_evaluate_features_with_rerank_uses_reranked_distances():
    q, g, q_pids, g_pids, q_cams, g_cams = problem(5, num_ids=8)
    expected = evaluate_distmat(rerank_reference(q, g, 20, 6, 0.3), q_pids, g_pids, q_cams, g_cams)
    result = evaluate_features(q, g, q_pids, g_pids, q_cams, g_cams, rerank=True, chunk_size=3)
    assert result.reranked
    assert result.mAP == pytest.approx(expected.mAP, abs=1e-9)
    np.testing.assert_allclose(result.cmc, expected.cmc)


def test_rerank_helps_on_clustered_data():
    q, g, q_pids, g_pids, q_cams, g_cams = problem(6, num_ids=15, q_per=2, g_per=8, dim=8)
    plain = evaluate_features(q, g, q_pids, g_pids, q_cams, g_cams)
    reranked = evaluate_features(q, g, q_pids, g_pids, q_cams, g_cams, rerank=True)
    assert reranked.mAP > plain.mAP


def test_rejects_bad_parameters():
    q, g, *_ = problem(0)
    with pytest.raises(ConfigError, match="k1"):
        rerank_distances(q, g, k1=0)
    with pytest.raises(ConfigError, match="lambda"):
        rerank_distances(q, g, lambda_value=1.5)
