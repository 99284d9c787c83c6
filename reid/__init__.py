"""reid: person re-identification and face verification.

The pipeline: images or frames -> (detect + crop) -> an Encoder -> L2-normalized
embeddings -> a gallery search, ranking metrics, or a same/different decision.
"""

from reid.decision import check_distance_threshold
from reid.errors import ConfigError, DataError, GalleryError, ModelError, ReidError
from reid.text import printable

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DataError",
    "GalleryError",
    "ModelError",
    "ReidError",
    "__version__",
    "check_distance_threshold",
    "printable",
]
