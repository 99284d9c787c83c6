"""Evaluation: ranking metrics (CMC, mAP, mINP, re-ranking) and verification (pairs, k-fold, ROC).

Ranking follows the Market-1501 protocol and verification the LFW protocol, both described
in docs/evaluation.md.  Face cropping for ``--detect face`` lives in
:mod:`reid.evaluation.faces` and plots in :mod:`reid.evaluation.plots`.
"""

from reid.decision import pair_distance
from reid.evaluation.calibrate import Calibration, calibrate_model, model_folder
from reid.evaluation.embed import (
    Embeddings,
    EncoderEvaluation,
    PairDecision,
    PairScores,
    PairVerification,
    compare_images,
    embed_paths,
    evaluate_encoder,
    score_pairs,
    verify_pairs,
)
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

__all__ = [
    "AP_DEFINITION",
    "Calibration",
    "Embeddings",
    "EncoderEvaluation",
    "Pair",
    "PairDecision",
    "PairScores",
    "PairSet",
    "PairVerification",
    "RankedList",
    "RankingResult",
    "RocCurve",
    "ThresholdChoice",
    "VerificationResult",
    "calibrate_model",
    "choose_threshold",
    "compare_images",
    "embed_paths",
    "evaluate_distmat",
    "evaluate_encoder",
    "evaluate_features",
    "model_folder",
    "pair_distance",
    "ranked_lists",
    "read_pairs",
    "rerank_distances",
    "roc_curve",
    "score_pairs",
    "verification_metrics",
    "verify_pairs",
]
