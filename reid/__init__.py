"""reid: person re-identification and face verification.

The pipeline: images or frames -> (detect + crop) -> an Encoder -> L2-normalized
embeddings -> a gallery search, ranking metrics, or a same/different decision.

Distances everywhere are Euclidean between unit embeddings, in 0..2
(:mod:`reid.decision`: ``pair_distance``, ``similarity_to_distance``); thresholds are
checked by ``check_distance_threshold`` and chosen by ``resolve_threshold``, which says
where the value came from (a :class:`Threshold`).  Library errors are
:class:`ReidError` subclasses with one line naming the file and the problem.

A config is a dataclass whose fields state their ranges and choices in their types, checked
by ``check_fields``; a field declared with ``option`` also carries its command-line option
(help, spelling, choices), from which :func:`reid.cli.with_config_options` builds a command's
options and help, for reid's commands and the apps alike.
"""

from reid.decision import (
    THRESHOLD_HELP,
    Threshold,
    check_distance_threshold,
    nearest_identity,
    one_identity_each,
    one_identity_each_together,
    pair_distance,
    resolve_threshold,
    similarity_to_distance,
)
from reid.errors import ConfigError, ConfigValueError, DataError, GalleryError, ModelError, ReidError
from reid.options import check_fields, option
from reid.paths import write_atomic, write_bytes_atomic
from reid.serial import as_dict
from reid.text import printable

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "ConfigValueError",
    "DataError",
    "GalleryError",
    "ModelError",
    "ReidError",
    "THRESHOLD_HELP",
    "Threshold",
    "__version__",
    "as_dict",
    "check_distance_threshold",
    "check_fields",
    "nearest_identity",
    "one_identity_each",
    "one_identity_each_together",
    "option",
    "pair_distance",
    "printable",
    "resolve_threshold",
    "similarity_to_distance",
    "write_atomic",
    "write_bytes_atomic",
]
