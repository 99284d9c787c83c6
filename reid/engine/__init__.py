"""Training and evaluation engines."""

from typing import TYPE_CHECKING

from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.engine.config import TrainConfig
    from reid.engine.trainer import StepInfo, TrainCallbacks, TrainingDiverged, TrainResult, train

__getattr__, __dir__ = lazy_names(__name__, __file__)

__all__ = [
    "StepInfo",
    "TrainCallbacks",
    "TrainConfig",
    "TrainResult",
    "TrainingDiverged",
    "train",
]
