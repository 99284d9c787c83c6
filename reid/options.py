"""Options stated once: a config field carries how the command line sets it.

A field declared with :func:`option` holds its help text, its option's spelling where that
is not the key's own (``--arch`` for ``architecture``), its choices and how its value is
typed (``HxW``, comma-separated numbers, repeated ``KEY=VALUE``) in the dataclass field's
metadata. The command line builds its options from there (:mod:`reid.cli.defaults`), so a
new field needs no edit of the command line and help shows the field's own default. The
library names a wrong value by its key; the command line names it by the option.

A config's ranges and choices are its fields' types (``Annotated[int, Field(ge=1)]``,
``Literal[...]``), checked by pydantic (:func:`check_fields`, :func:`value_error`): one
way every config is checked, whether its values come from code, a file or an option.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from reid.errors import ConfigValueError

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


def value_error(exc: ValidationError) -> ConfigValueError:
    """The first error pydantic found, as one line naming the key of the wrong value
    (``lr: input should be greater than 0 (got -1.0)``)."""
    error = exc.errors()[0]
    key = str(error["loc"][0]) if error["loc"] else exc.title
    message = error["msg"].removeprefix("Value error, ")
    got = repr(error["input"])
    # A value of thousands of characters is shown by its start: the line stays one line's length.
    shown = got if len(got) <= 80 else f"{got[:60]}... ({len(got)} characters)"
    return ConfigValueError(key, f"{message[:1].lower()}{message[1:]} (got {shown})")


@functools.cache
def _field_adapters(config: type) -> dict[str, TypeAdapter[Any]]:
    hints = typing.get_type_hints(config, include_extras=True)
    return {
        f.name: TypeAdapter(hints[f.name], config={"title": f.name})
        for f in dataclasses.fields(config)
        # A nested config checks itself when it is built.
        if not (isinstance(hints[f.name], type) and dataclasses.is_dataclass(hints[f.name]))
    }


def check_fields(config: Any) -> None:
    """Check every field of the dataclass instance ``config`` against its type, strictly (an
    int for a float field passes; a string for a number does not): ranges stated as
    ``Annotated[..., pydantic.Field(...)]``, choices as ``Literal``.  For a plain dataclass's
    ``__post_init__``.

    Raises:
        ConfigValueError: naming the key of the first wrong value (:func:`value_error`).
    """
    for name, adapter in _field_adapters(type(config)).items():
        try:
            adapter.validate_python(getattr(config, name), strict=True)
        except ValidationError as exc:
            raise value_error(exc) from None
