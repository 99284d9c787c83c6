"""Options stated once: a config field carries how the command line sets it.

A field declared with :func:`option` holds its help text, its option's spelling where that
is not the key's own (``--arch`` for ``architecture``), its choices and how its value is
typed (``HxW``, comma-separated numbers, repeated ``KEY=VALUE``) in the dataclass field's
metadata. The command line builds its options from there (:mod:`reid.cli.defaults`), so a
new field needs no edit of the command line and help shows the field's own default. The
library names a wrong value by its key; the command line names it by the option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

# How an option's text becomes the field's value, where that is not the field's own type.
FORMS = ("size", "numbers", "pairs")


@dataclass(frozen=True)
class OptionSpec:
    """How the command line sets one config field.

    ``flag`` is the option's spelling where it is not ``--`` + the key with dashes;
    ``short`` a one-letter spelling (``-P``); ``choices`` the names the value is one of (or
    a function listing them, for a list only known at run time); ``form`` how the text is
    typed (:data:`FORMS`: ``size`` is ``HxW``, ``numbers`` comma-separated integers,
    ``pairs`` repeated ``KEY=VALUE``); ``default_text`` says what applies when the default
    is None (``cuda if available``); ``switch`` makes a boolean a lone flag (``--resume``,
    no ``--no-resume``); ``hidden`` keeps a field off the command line (recipe files only).
    """

    help: str
    flag: str | None = None
    short: str | None = None
    choices: Sequence[str] | Callable[[], Sequence[str]] | None = None
    form: str | None = None
    default_text: str | None = None
    switch: bool = False
    hidden: bool = False

    def names(self) -> tuple[str, ...]:
        """The choices, listed now (a function is called)."""
        if self.choices is None:
            return ()
        return tuple(self.choices() if callable(self.choices) else self.choices)


def option(
    default: Any = MISSING, *, default_factory: Callable[[], Any] | Any = MISSING, help: str, **spec: Any
) -> Any:
    """A dataclass field whose metadata holds its :class:`OptionSpec` (``help`` and ``spec``
    are its fields); ``default``/``default_factory`` as for :func:`dataclasses.field`."""
    if spec.get("form") not in (None, *FORMS):
        raise ValueError(f"form {spec['form']!r} is not one of {', '.join(FORMS)}")
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"option": OptionSpec(help=help, **spec)})


def option_spec(field: dataclasses.Field[Any]) -> OptionSpec | None:
    """The :class:`OptionSpec` of a field declared with :func:`option`, else None."""
    return field.metadata.get("option")


def flag_of(field: dataclasses.Field[Any]) -> str:
    """The option that sets ``field`` (``--arch`` for ``architecture``, ``--max-steps`` for
    ``max_steps``)."""
    spec = option_spec(field)
    return spec.flag if spec is not None and spec.flag else "--" + field.name.replace("_", "-")


def option_fields(config: type) -> list[dataclasses.Field[Any]]:
    """The fields of dataclass ``config`` the command line sets, in declaration order."""
    return [f for f in dataclasses.fields(config) if (spec := option_spec(f)) is not None and not spec.hidden]
