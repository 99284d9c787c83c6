"""Name -> loss registry used by ``reid train --loss NAME --loss-option KEY=VALUE``.

Options may arrive as strings from the command line; each is converted to the type its
loss annotates ("0.3" -> 0.3, "true" -> True, "10" -> 10) by pydantic, as every config
value is, and anything unknown or unconvertible is a :class:`reid.errors.ConfigError`
naming the valid choices.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import TypeAdapter, ValidationError

from reid.errors import ConfigError
from reid.losses.base import MetricLoss
from reid.losses.centroid_triplet import CentroidTripletLoss
from reid.losses.contrastive import ContrastiveLoss
from reid.losses.cross_entropy import CrossEntropyLoss
from reid.losses.lifted import LiftedStructuredLoss
from reid.losses.names import LOSS_NAMES
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

if tuple(_LOSSES) != LOSS_NAMES:
    raise AssertionError("reid.losses.names.LOSS_NAMES must name the losses of the registry, in its order")

@functools.cache
def _option_adapter(hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(hint)


def _convert(name: str, key: str, value: Any, hint: Any) -> Any:
    """``value`` as the type loss ``name`` annotates option ``key`` with, by pydantic (the one
    conversion and check of every config value): ``"0.3"`` to 0.3, ``"true"``/``"on"``/``"1"``
    to True, ``"10"`` to 10; anything that does not convert losslessly is a ConfigError."""
    if hint is None:
        return value
    try:
        # Text converts (it came from the command line); any other value must be of the type already.
        text = isinstance(value, str)
        return _option_adapter(hint).validate_python(value.strip() if text else value, strict=not text)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"]
        raise ConfigError(f"{name}: option {key}={value!r}: {message[:1].lower()}{message[1:]}") from None


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


def needs_positives(name: str) -> bool:
    """Whether loss ``name`` learns only from two images of one identity in a batch
    (:attr:`reid.losses.base.MetricLoss.needs_positives`).

    Raises:
        ConfigError: ``name`` is not a registered loss.
    """
    loss_options(name)
    return _LOSSES[name].needs_positives


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
