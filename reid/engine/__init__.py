"""Training and evaluation engines."""

from reid.engine.config import TrainConfig
from reid.engine.evaluate import evaluate_model
from reid.engine.inference import Embedded, embed_files
from reid.engine.trainer import StepInfo, TrainCallbacks, TrainingDiverged, TrainResult, train

__all__ = [
    "Embedded",
    "StepInfo",
    "TrainCallbacks",
    "TrainConfig",
    "TrainResult",
    "TrainingDiverged",
    "embed_files",
    "evaluate_model",
    "train",
]
