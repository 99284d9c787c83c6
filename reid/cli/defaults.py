"""Option defaults read from the library, so that the command line states none of its own.

A command's options default to None and only the ones given reach the library
(:func:`given`); help texts show the library's default (:func:`with_default`). A number
given is checked against its one range (:func:`option_range`): the one its config field
declares in its type, else, for an option of no config, its :func:`ranges` entry.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import typing
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

import typer
from pydantic.fields import FieldInfo

from reid.decision import check_distance_threshold, check_far
from reid.errors import ConfigError, ConfigValueError
from reid.options import flag_of, option_fields, option_spec
from reid.photos import CalibrateConfig, EvalConfig, PairConfig, PhotoConfig


# A count's upper bound of a million or more (frames, items, boxes) only stops a typo (a
# value that would allocate without bound): an error states such a range by its lower end,
# "must be at least 1"; a real two-sided range (a port, a batch size, folds) gives both.
GUARD_BOUND = 1_000_000


@dataclass(frozen=True)
class Range:
    """The values a numeric option takes: ``low``..``high``, either end left out when
    ``low_open``/``high_open``; or, where the library has the one check of a quantity (a
    distance threshold, a false-accept rate: :mod:`reid.decision`, :data:`DECIDED`), that
    ``check``."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    check: Callable[[float, str], Any] | None = None

    def problem(self, value: float) -> str | None:
        """What is wrong with ``value`` (None when it is in range)."""
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        if above and below:
            return None
        if isinstance(self.low, int) and isinstance(self.high, int) and not (self.low_open or self.high_open):
            if self.high >= GUARD_BOUND:
                # The bound is not one a user meets: a count is stated by its lower end only.
                return f"must be at least {self.low:,}" if not above else f"must be at most {self.high:,}"
            return f"must be between {self.low:,} and {self.high:,}"
        return f"must be in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


def _bare(annotation: Any) -> Any:
    """``X`` of ``X | None``."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if type(None) in typing.get_args(annotation) and len(args) == 1 else annotation


# pydantic's bounds (``Field(ge=...)`` and so on): which end of a range each is, and whether open.
_ENDS = {"ge": ("low", False), "gt": ("low", True), "le": ("high", False), "lt": ("high", True)}


@functools.cache
def declared_range(config: type, key: str) -> Range | None:
    """The range field ``key`` of dataclass ``config`` declares in its type
    (:func:`type_range`), or None when it declares none or ``config`` has no such field."""
    if key not in {f.name for f in dataclasses.fields(config)}:
        return None
    return type_range(typing.get_type_hints(config, include_extras=True)[key])


def type_range(hint: Any) -> Range | None:
    """The bounds of ``Annotated[X, pydantic.Field(ge=..., le=...)]`` (``X | None`` read as
    ``X``) as a :class:`Range`; None for a type without bounds."""
    hint = _bare(hint)
    if typing.get_origin(hint) is not typing.Annotated:
        return None
    kind, *metadata = typing.get_args(hint)
    constraints = [c for m in metadata for c in (m.metadata if isinstance(m, FieldInfo) else [m])]
    ends: dict[str, float] = {"low": -math.inf, "high": math.inf}
    opened = {"low": False, "high": False}
    for constraint in constraints:
        for attribute, (end, is_open) in _ENDS.items():
            if (bound := getattr(constraint, attribute, None)) is not None:
                ends[end], opened[end] = bound, is_open
    if ends == {"low": -math.inf, "high": math.inf}:
        return None
    if kind is float:  # a float's interval, written as one: [0, 86400], not 0 to 86,400
        ends = {end: float(value) for end, value in ends.items()}
    elif kind is int:  # whole numbers: an open end is the next one in, closed (lt=1024: at most 1,023)
        ends = {"low": ends["low"] + opened["low"], "high": ends["high"] - opened["high"]}
        opened = {"low": False, "high": False}
    return Range(ends["low"], ends["high"], low_open=opened["low"], high_open=opened["high"])


def _bounded(hint: Any) -> Range:
    bounds = type_range(hint)
    assert bounds is not None, hint
    return bounds


@functools.cache
def option_configs() -> tuple[type, ...]:
    """The configs whose fields are the command line's options, wherever each is taken: a
    range one of their fields declares in its type (``Annotated[int, Field(ge=1, le=4096)]``)
    is the range of the option of that key, in every command and app.  Imported when a
    command runs, not when help is printed: their modules load the engine."""
    from reid.detect import PersonDetectorConfig
    from reid.models.card import ModelCard
    from reid.pipeline import EnrolConfig, QueryConfig, StreamConfig
    from reid.serve.config import ServeConfig
    from reid.track import TrackerConfig

    return (
        QueryConfig, EnrolConfig, StreamConfig, TrackerConfig, ServeConfig, ModelCard,
        PairConfig, CalibrateConfig, EvalConfig, PhotoConfig, PersonDetectorConfig,
    )  # fmt: skip


@functools.cache
def ranges() -> dict[str, Range]:
    """The ranges of the numeric options no config of :func:`option_configs` declares (a
    function's parameter, a field checked by hand), each stated only here. A count outside
    would allocate without bound (ten billion frames, a million folds) or do nothing; a score
    or fraction outside its interval means nothing."""
    from reid.pipeline.configs import Every, MaxFrames

    return {
        # Counts; a source's frames kept and read: the types the apps' configs declare too.
        "every": _bounded(Every),
        "max_frames": _bounded(MaxFrames),
        "demo_frames": Range(2, 100_000),
        "queries": Range(1, 10_000_000),
        "max_items": Range(2, 10**9),
        "max_impostors": Range(1, 10**9),
        # Index options (reid.gallery.IndexSpec); 0 is the automatic choice where one exists.
        "nlist": Range(0, 10_000_000),
        "nprobe": Range(0, 10_000_000),
        "ef_search": Range(1, 100_000),
        "train_size": Range(0, 10**9),
        "pq_m": Range(0, 4096),
        "pq_bits": Range(1, 16),
        "refine": Range(0, 1024),
        "shard_size": Range(0, 10**12),
        # A fraction: the export's agreement tolerance.
        "tolerance": Range(0.0, 1.0, low_open=True),
        # Frames per second of a source.
        "fps": Range(0.0, 1000.0, low_open=True),
    }


@functools.cache
def side() -> Range:
    """A model's input side in pixels, as its card bounds it (:data:`reid.models.card.Side`)."""
    from reid.models.card import Side

    return _bounded(Side)


def __getattr__(name: str) -> Any:
    # The tables above by their names (RANGES, OPTION_CONFIGS, SIDE), built on first use.
    built = {"RANGES": ranges, "OPTION_CONFIGS": option_configs, "SIDE": side}
    if name in built:
        return built[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Distances between unit embeddings and false-accept rates: reid.decision has the one check
# of each, which the configs call too.
DECIDED: dict[str, Callable[[float, str], Any]] = {
    "threshold": check_distance_threshold,
    "appearance": check_distance_threshold,
    "far": check_far,
}


def option_range(name: str, config: type | None = None) -> Range | None:
    """The one range of the numeric option ``name``: the :data:`DECIDED` check of a distance
    or rate, else its field's declared range in ``config`` (an app's config), else in the
    first of :func:`option_configs` with that key, else its :func:`ranges` entry (None: the
    option has no range)."""
    if name in DECIDED:
        return Range(-math.inf, math.inf, check=DECIDED[name])
    for source in ((config,) if config is not None else ()) + option_configs():
        if (declared := declared_range(source, name)) is not None:
            return declared
    return ranges().get(name)


def in_range(name: str, config: type | None = None) -> Callable[[Any], Any]:
    """The typer ``callback=`` of an option with a default of its own (the apps'): the value
    checked against its range (:func:`option_range`; ``config``: the app's config, whose
    field ``name`` declares it), a value outside refused by the command in one line naming
    the option."""

    def check(value: Any) -> Any:
        if value is not None:
            try:
                check_option(name, value, config)
            except ConfigValueError as exc:
                raise typer.BadParameter(exc.problem) from None
        return value

    return check


def check_option(name: str, value: Any, config: type | None = None) -> None:
    """Raise :class:`ConfigValueError` naming the parameter ``name`` (the command line calls
    it by its option when it prints, ``--batch-size 0: ...``) for a number outside its range
    (:func:`option_range`) or one that is not finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    bounds = option_range(name, config)
    if bounds is not None and bounds.check is not None:
        try:
            bounds.check(value, name)
        except ConfigError as exc:
            raise ConfigValueError(name, str(exc).removeprefix(name).lstrip(), sep=" ") from None
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigValueError(name, f"{value}: must be a finite number", sep=" ")
    problem = bounds.problem(value) if bounds is not None else None
    if problem:
        raise ConfigValueError(name, f"{value}: {problem}", sep=" ")


def check_given(command: Callable[..., Any], values: dict[str, Any]) -> None:
    """Check every number given to ``command`` by parameter name (:func:`check_option`); an
    option built from a config field with ``checked_first`` (:func:`with_config_options`)
    against that field's range.  Raises ConfigValueError naming the parameter."""
    configs = getattr(command, "option_configs", {})
    for name, value in values.items():
        if value is not None:
            check_option(name, value, configs.get(name))


def given(**values: Any) -> dict[str, Any]:
    """The options the user gave, by parameter name, each checked (:func:`check_option`);
    the rest stays with the library's defaults.  Raises ConfigValueError, naming the
    parameter, for a value out of range."""
    for name, value in values.items():
        if value is not None:
            check_option(name, value)
    return {key: value for key, value in values.items() if value is not None}


def default_of(function: Callable[..., Any], name: str) -> Any:
    """The default of parameter ``name`` of ``function``."""
    return inspect.signature(function).parameters[name].default


def with_default(text: str, shown: str) -> str:
    """``text`` followed by the default as the option is typed."""
    return f"{text} (default: {shown})".lstrip()


def shown(value: Any, form: str | None = None) -> str:
    """A value as its option is typed: ``256x128`` (a size), ``40,70`` (numbers),
    ``mining=hard margin=0.3`` (pairs), ``on``/``off``, ``none``."""
    if isinstance(value, tuple):
        return ("x" if form == "size" else ",").join(str(v) for v in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "none"
    return "none" if value is None else str(value)


def option_help(field: dataclasses.Field[Any], value: Any, derived: bool = False) -> str:
    """A field's help (:class:`reid.options.OptionSpec`): its text, its choices, and the
    default ``value`` as it is typed, or what applies when it is unset (None, empty, or
    ``derived`` from other fields)."""
    spec = option_spec(field)
    assert spec is not None
    names = spec.names()
    text = spec.help + (f" One of: {', '.join(names)}." if names else "")
    unset = value is None or value == "" or derived
    default = spec.default_text if unset and spec.default_text else shown(value, spec.form)
    return with_default(text, default)


def config_parameters(
    config: type,
    base: Any | None = None,
    keys: Sequence[str] | None = None,
    helps: dict[str, str] | None = None,
    panels: dict[str, Sequence[str]] | None = None,
) -> list[inspect.Parameter]:
    """Typer options for the fields of dataclass ``config`` that the command line sets
    (:func:`reid.options.option_fields`; only ``keys`` when given), each named by its key,
    defaulting to None (not given) and showing the default of ``base`` (``config()``; a
    config with fields that have no default, such as an app's inputs, shows its fields'
    defaults).  A field without a default is a required option, or, where its type admits
    None, one whose help states no default.
    ``helps`` replaces the whole help of a key, for a command where something other than the
    field's default applies when the option is left out (``reid query``'s tracker takes the
    detector's confident score).  ``panels`` names the section of help each key's option is
    listed in (``{"Data": ("data", "p", "k")}``); the others are listed under "Options"."""
    required = {f.name for f in dataclasses.fields(config) if f.default is MISSING and f.default_factory is MISSING}
    if base is None and not required:
        base = config()
    helps = helps or {}
    panel_of = {key: panel for panel, panel_keys in (panels or {}).items() for key in panel_keys}
    hints = typing.get_type_hints(config)
    parameters = []
    for field in option_fields(config):
        if keys is not None and field.name not in keys:
            continue
        spec = option_spec(field)
        assert spec is not None
        kind = _bare(hints[field.name])
        if typing.get_origin(kind) is typing.Literal:
            kind = type(typing.get_args(kind)[0])  # a choice: typed as its values are
        flag = flag_of(field)
        if spec.form == "pairs":
            annotation: Any = list[str] | None
        elif spec.form is not None:
            annotation = str | None
        else:
            annotation = kind | None
        spelled = flag if kind is not bool or spec.switch else f"{flag}/--no-{flag[2:]}"
        declared = (spelled, spec.short) if spec.short else (spelled,)
        if field.name in required:
            # An input the config cannot do without: given on the command line unless None will do.
            default: Any = None if type(None) in typing.get_args(hints[field.name]) else ...
            text = spec.help
        else:
            value = getattr(base, field.name) if base is not None else _field_default(field)
            # A field left unset that the config fills in from others (out from architecture and data).
            derived = base is not None and field.default is None and value is not None and value == getattr(config(), field.name)
            default, text = None, option_help(field, value, derived)
        info = typer.Option(
            default,
            *declared,
            help=helps.get(field.name) or text,
            rich_help_panel=panel_of.get(field.name),
        )
        parameters.append(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation))
    return parameters


def _field_default(field: dataclasses.Field[Any]) -> Any:
    return field.default if field.default is not MISSING else field.default_factory()  # type: ignore[misc]


def config_overrides(config: type, values: dict[str, Any]) -> dict[str, Any]:
    """The options given (by key) that are ``config``'s fields, as its values: sizes, numbers
    and pairs parsed from their text (:data:`reid.options.FORMS`); the options not given, and
    those of other configs (a command may take several, :func:`with_config_options`), left out.

    Raises:
        ConfigValueError: a size, a list of numbers or a pair that does not parse, naming the key.
    """
    fields = {f.name: f for f in dataclasses.fields(config)}
    overrides = {}
    for key, value in values.items():
        if key not in fields or value is None or value == []:
            continue
        spec = option_spec(fields[key])
        form = spec.form if spec is not None else None
        if form == "size":
            value = parse_size(value, key)
        elif form == "numbers":
            value = _numbers(key, value)
        elif form == "pairs":
            value = _pairs(key, value)
        overrides[key] = value
    return overrides


def parse_size(text: str, flag: str = "--input-size") -> tuple[int, int]:
    """``HEIGHTxWIDTH`` as two ints, each within the sides a model card allows
    (:func:`side`, :data:`reid.models.card.Side`); raises ConfigValueError naming ``flag``
    (an option, or a config key the command line names by its option)."""
    parts = text.lower().split("x")
    try:
        height, width = (int(part) for part in parts)
    except ValueError:
        raise ConfigValueError(flag, f"{text[:40]!r}: expected HEIGHTxWIDTH, e.g. 256x128", sep=" ") from None
    bounds = side()
    if bounds.problem(height) or bounds.problem(width):
        raise ConfigValueError(
            flag, f"{text[:40]!r}: height and width must be between {bounds.low} and {bounds.high} pixels", sep=" "
        )
    return height, width


def _numbers(key: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(m) for m in text.split(",") if m.strip())
    except ValueError:
        raise ConfigValueError(key, f"{text[:40]!r}: expected comma-separated whole numbers, e.g. 40,70", sep=" ") from None


def _pairs(key: str, items: list[str]) -> dict[str, str]:
    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigValueError(key, f"{item[:40]!r}: expected KEY=VALUE, e.g. margin=0.3", sep=" ")
        pairs[name.strip()] = value.strip()
    return pairs


def with_config_options(
    config: type,
    base: Any | None = None,
    keys: Sequence[str] | None = None,
    *,
    more: Sequence[tuple[type, Sequence[str] | None, dict[str, str] | None]] = (),
    panels: dict[str, Sequence[str]] | None = None,
    checked_first: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command whose last parameter is ``**options`` an option for each field of
    ``config`` (:func:`config_parameters`), then of each ``(config, keys, helps)`` of
    ``more`` (a command whose options are the fields of several configs); the command
    receives them by key in ``options`` and passes each config's on through
    :func:`config_overrides`.  ``panels``: the section of help of each option, by key.
    ``checked_first``: every number given to these options is checked against its field's
    range before the command runs (:func:`check_given`, called by ``handle_errors``), as
    the options of :func:`option_configs` are; for a config that is built only once the
    command has begun its work (an app's), where its own check would come too late.

    Raises:
        ValueError: two configs state an option of the same key.
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        sources = [(config, config_parameters(config, base, keys, panels=panels))]
        sources += [(other, config_parameters(other, None, other_keys, helps, panels)) for other, other_keys, helps in more]
        built = [p for _, params in sources for p in params]
        names = [p.name for p in [*own, *built]]
        if len(set(names)) != len(names):
            raise ValueError(f"options stated twice: {sorted({n for n in names if names.count(n) > 1})}")
        # Help lists the sections in the order of ``panels``, the command's own options (their
        # rich_help_panel) among the config's; typer passes every option by name.
        order = list(panels or {})

        def rank(parameter: inspect.Parameter) -> int:
            panel = getattr(parameter.default, "rich_help_panel", None)
            return order.index(panel) if panel in order else -1

        ordered = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in sorted([*own, *built], key=rank)]
        command.__signature__ = signature.replace(parameters=ordered)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in command.__signature__.parameters.values()}  # type: ignore[attr-defined]
        if checked_first:
            command.option_configs = {p.name: source for source, params in sources for p in params}  # type: ignore[attr-defined]
        return command

    return decorate
