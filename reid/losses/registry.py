"""Name -> loss registry used by ``reid train --loss NAME --loss-option KEY=VALUE``.

Options may arrive as strings from the command line; each is converted to the type its
loss annotates ("0.3" -> 0.3, "true" -> True, "10" -> 10), and anything unknown or
unconvertible is a :class:`reid.errors.ConfigError` naming the valid choices.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


from reid.errors import ConfigError
from reid.losses.base import MetricLoss
from reid.losses.centroid_triplet import CentroidTripletLoss
from reid.losses.contrastive import ContrastiveLoss
from reid.losses.cross_entropy import CrossEntropyLoss
from reid.losses.lifted import LiftedStructuredLoss
from reid.losses.softtriple import SoftTripleLoss
from reid.losses.triplet import TripletLoss

_LOSSES: Mapping[str, type[MetricLoss]] = MappingProxyType(
    {
        "triplet": TripletLoss,
        "contrastive": ContrastiveLoss,
        "lifted": LiftedStructuredLoss,
        "centroid_triplet": CentroidTripletLoss,
        "softtriple": SoftTripleLoss,
        "cross_entropy": CrossEntropyLoss,
    }
)

LOSS_NAMES: tuple[str, ...] = tuple(_LOSSES)

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _target_type(hint: Any) -> type | None:
    """bool, int, float or str from an annotation such as ``float | None``."""
    candidates = typing.get_args(hint) or (hint,)
    for kind in (bool, int, float, str):
        if kind in candidates:
            return kind
    return None


def _convert(name: str, key: str, value: Any, hint: Any) -> Any:
    """Convert a command-line string to the annotated type and check any other value."""
    kind = _target_type(hint)
    if kind is None or (value is None and type(None) in typing.get_args(hint)):
        return value
    if not isinstance(value, str):
        numeric = kind in (int, float) and isinstance(value, (int, float))
        if isinstance(value, kind) or (numeric and not isinstance(value, bool)):
            return value
        raise ConfigError(f"{name}: option {key}={value!r} is not a valid {kind.__name__}")
    if kind is str:
        return value
    text = value.strip()
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{name}: option {key}={value!r} is not true/false")
    try:
        return kind(text)
    except ValueError:
        raise ConfigError(f"{name}: option {key}={value!r} is not a valid {kind.__name__}") from None


def loss_options(name: str) -> dict[str, Any]:
    """The options of loss ``name`` with their defaults (``inspect.Parameter.empty`` if
    the option is required); the one home of every loss's defaults is its signature.

    Raises:
        ConfigError: ``name`` is not a registered loss.
    """
    if name not in _LOSSES:
        raise ConfigError(f"unknown loss {name!r}; choose one of {', '.join(LOSS_NAMES)}")
    parameters = inspect.signature(_LOSSES[name]).parameters
    return {key: parameter.default for key, parameter in parameters.items()}


def convert_options(name: str, **options: Any) -> dict[str, Any]:
    """Check that loss ``name`` has every option in ``options`` and convert command-line
    strings to their types; options it requires but that are not given are not asked for
    (a recipe leaves those the trainer fills in, such as ``num_classes``)."""
    accepted = loss_options(name)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        valid = ", ".join(accepted) or "none"
        raise ConfigError(
            f"{name}: unknown option {', '.join(unknown)}; valid options: {valid}"
        )
    hints = typing.get_type_hints(_LOSSES[name].__init__)
    return {key: _convert(name, key, value, hints.get(key)) for key, value in options.items()}


def typed_options(name: str, **options: Any) -> dict[str, Any]:
    """Check ``options`` against loss ``name`` (all its required options given) and convert
    command-line strings to their types."""
    typed = convert_options(name, **options)
    missing = [k for k, d in loss_options(name).items() if d is inspect.Parameter.empty and k not in options]
    if missing:
        raise ConfigError(f"{name}: missing option {', '.join(missing)}")
    return typed


def build_loss(name: str, **options: Any) -> MetricLoss:
    """Build the loss registered as ``name`` (one of :data:`LOSS_NAMES`) with ``options``,
    given typed or as command-line strings (``margin="0.3"``).

    The loss is called as ``loss(embeddings, labels)`` with float (N, D) embeddings and
    integer (N,) labels and returns a scalar tensor (see :class:`~reid.losses.base.MetricLoss`).

    Raises:
        ConfigError: an unknown loss, an option it does not have, a value that does not
            convert to the option's type or is out of range, or a required option missing.
    """
    typed = typed_options(name, **options)
    return _LOSSES[name](**typed)
