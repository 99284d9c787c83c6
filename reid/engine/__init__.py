"""Training and evaluation engines."""

from reid.engine.config import TrainConfig
from reid.engine.trainer import StepInfo, TrainCallbacks, TrainingDiverged, TrainResult, train

__all__ = [
    "StepInfo",
    "TrainCallbacks",
    "TrainConfig",
    "TrainResult",
    "TrainingDiverged",
    "train",
]
