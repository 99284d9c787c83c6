"""Evaluation: ranking metrics (CMC, mAP, mINP, re-ranking) and verification (pairs, k-fold, ROC).

Ranking follows the Market-1501 protocol and verification the LFW protocol, both described
in docs/evaluation.md; plots live in :mod:`reid.evaluation.plots`.  This package holds the
metrics only: running an encoder over image files (and cutting photos to their subject)
is :mod:`reid.pipeline.embed` and :mod:`reid.pipeline.calibrate`.
"""

from typing import TYPE_CHECKING

from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.evaluation.names import RANKING_METRICS
    from reid.decision import pair_distance
    from reid.evaluation.pairs import Pair, PairSet, read_pairs
    from reid.evaluation.ranking import (
        AP_DEFINITION,
        RankedList,
        RankingResult,
        evaluate_distmat,
        evaluate_features,
        ranked_lists,
    )
    from reid.evaluation.rerank import rerank_distances
    from reid.evaluation.verification import (
        RocCurve,
        ThresholdChoice,
        VerificationResult,
        choose_threshold,
        roc_curve,
        verification_metrics,
    )

__getattr__, __dir__ = lazy_names(__name__, __file__)

__all__ = [
    "RANKING_METRICS",
    "AP_DEFINITION",
    "Pair",
    "PairSet",
    "RankedList",
    "RankingResult",
    "RocCurve",
    "ThresholdChoice",
    "VerificationResult",
    "choose_threshold",
    "evaluate_distmat",
    "evaluate_features",
    "pair_distance",
    "ranked_lists",
    "read_pairs",
    "rerank_distances",
    "roc_curve",
    "verification_metrics",
]
