"""Training configuration: the one home of training defaults, and recipes as YAML files.

A recipe is every :class:`TrainConfig` field but ``resume`` and ``overwrite`` (actions, not
part of what is trained), written as a YAML mapping with the field names as keys. The effective config
of a run is built in layers: the defaults (TrainConfig's, or the demo's), then a file's
keys, then the keys given on the command line. :func:`resolve_config` builds it and names
the layer that supplied a bad value: the file by path and key, a value given by its key
(which the command line names by its option, :mod:`reid.options`).
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, Field, TypeAdapter, ValidationError

from reid.errors import ConfigError, ConfigValueError, ModelError
from reid.losses.names import LOSS_NAMES, TRIPLET_MARGIN, TRIPLET_MINING
from reid.models.card import POOLINGS
from reid.models.names import BACKBONES, known_architectures
from reid.options import flag_of, option, value_error
from reid.paths import read_text_bounded, write_bytes_atomic
from reid.serial import MAX_CONFIG_BYTES, check_yaml_shape

CONFIG_FILE = "config.yaml"
OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULES = ("step", "cosine", "constant")
NO_METRIC_LOSS = ("", "none")
# What the training photos show: people (taken as they are) or faces (cut to the chip of
# the largest face, aligned by its five landmarks, when the images are decoded).
KINDS = ("person", "face")
# What happens to a face photo in which no face is found (reid.pipeline.subject.NONE_FOUND).
NO_FACE_CHOICES = ("skip", "whole", "error")

# The metric loss of the strong baseline and the options a recipe spells out for it; their
# values are the loss's own defaults (batch-hard mining, margin 0.3), named where help reads
# them without PyTorch.
DEFAULT_METRIC_LOSS = "triplet"


def default_metric_options() -> dict[str, Any]:
    """The options a recipe spells out for :data:`DEFAULT_METRIC_LOSS`, at its own defaults."""
    return {"mining": TRIPLET_MINING, "margin": TRIPLET_MARGIN}

# Warm-up starts from a tenth of the learning rate and rises linearly to all of it: a
# freshly initialised BNNeck and classifier would otherwise take full-size steps on a
# random start (Luo et al. 2019, "Bag of Tricks", warm-up from 3.5e-5 to 3.5e-4). (reid.engine.optim).
WARMUP_START_FACTOR = 0.1

# backbone_lr_scale when none is given and training starts from a model that already
# embeds (a Re-ID model): measured on Market-1501 in docs/models.md, "Training from a
# published Re-ID start". From ImageNet, or from scratch, every layer takes lr.
EMBEDDING_START_LR_SCALE = 0.1
# From such a start the metric loss measures on unit vectors (``normalize``) unless the
# recipe's metric_options say otherwise: the start's embedding is compared on the unit
# sphere, and the raw feature's triplet moved it away (docs/models.md, the same section).
EMBEDDING_START_NORMALIZE = True
# From such a start, with its whole embedding kept (fc as the neck), the saved model is
# this share of the trained weights and the rest the start's (WiSE-FT, reid.engine.wise):
# chosen on validation identities carved from the training split, then measured on
# held-out ones (docs/models.md, the same section).
EMBEDDING_START_WISE_ALPHA = 0.2

# The bounds of sizes are far above any real run, low enough that a typo cannot ask for
# terabytes (an input of 100000x100000, a batch of a million identities); they are stated
# in the field types below, which pydantic checks (:meth:`TrainConfig.validate`).
Side = Annotated[int, Field(ge=16, le=4096)]


def _increasing(milestones: tuple[int, ...]) -> tuple[int, ...]:
    if list(milestones) != sorted(milestones):
        raise ValueError("must be increasing epochs")
    return milestones


# What a run asks to do rather than what it trains; never read from or written to a file.
ACTION_KEYS = ("resume", "overwrite")

# What a resumed run must share with the run that wrote the checkpoint: the data, the
# network, the losses and the optimizer whose state the checkpoint holds. Schedule, length,
# batch shape and where things run may change between the two.
RESUME_FIXED_KEYS = (
    "data",
    "architecture",
    "pretrained",
    "pooling",
    "last_stride",
    "embedding_dim",
    "keep_fc",
    "input_size",
    "optimizer",
    "seed",
    "ce_weight",
    "label_smoothing",
    "metric_loss",
    "metric_options",
    "metric_weight",
    "kind",
    "no_face",
)


def default_out(architecture: str, data: str) -> Path:
    """Where a model goes when no ``out`` is given: ``models/ARCH-DATA``, DATA the kind of ``data``."""
    return Path("models") / f"{architecture}-{data.partition(':')[0]}"


@dataclass
class TrainConfig:
    """Everything ``reid train`` can set; defaults are the BNNeck strong baseline (Luo et
    al. 2019, "Bag of Tricks and A Strong Baseline for Deep Person Re-identification"):
    ResNet-50 with last stride 1, 256x128 inputs, P=16 identities x K=4 images a batch,
    Adam at 3.5e-4 with warm-up, cross-entropy with label smoothing plus a batch-hard
    triplet loss. These field defaults are the one home of the training defaults; the
    command line passes only the options given.

    ``out`` left empty means ``models/ARCH-DATA`` (``models/resnet50-market1501``);
    ``pretrained`` ``"none"`` means random initialisation, like None. ``input_size`` is
    (height, width) in pixels; ``epochs``, ``warmup_epochs`` and ``milestones`` count
    epochs; ``max_steps`` counts optimizer steps over the whole run; ``metric_options``
    are the options of ``metric_loss`` (see :func:`reid.losses.loss_options`). Building a
    config checks nothing; :meth:`validate` and :func:`resolve_config` do, by pydantic
    against the field types (their ranges and choices are stated there, once). Each field
    also carries its command-line option (:func:`reid.options.option`), from which
    ``reid train`` builds its options.
    """

    data: str = option("synthetic", help="Dataset: synthetic, market1501:PATH, dukemtmc:PATH, msmt17:PATH or folder:PATH.")
    out: Path | None = option(
        None,
        help="Model folder to write.",
        default_text="models/ARCH-DATA: the architecture and the kind of --data, as models/resnet50-market1501",
    )
    name: str = option("", help="Name written on the model card.", default_text="the folder's name")
    architecture: Literal[tuple(BACKBONES)] = option("resnet50", flag="--arch", help="Backbone.", choices=known_architectures)
    pretrained: str | None = option(
        "imagenet",
        help="imagenet (cached, else downloaded, else an error), none (train from scratch), a name from "
        "`reid models list`, or a checkpoint file (torchreid, fast-reid, DataParallel).",
    )
    pooling: Literal[tuple(POOLINGS)] = option("avg", help="Pooling of the last feature map.", choices=POOLINGS)
    last_stride: Literal[1, 2] = option(1, help="Stride of the backbone's last stage (1 keeps twice the resolution).", choices=("1", "2"))
    embedding_dim: Annotated[int, Field(ge=1, le=65_536)] | None = option(None, help="Add a linear reduction to this dimension.", default_text="none, the backbone's")
    # A start's fc (torchreid's Linear + BatchNorm1d + ReLU) is the layer it embeds with;
    # kept, the network before training embeds exactly as the start does.
    keep_fc: bool = option(
        True, help="From a start with torchreid's fc (Linear + BatchNorm1d + ReLU): keep it as the neck, its output the embedding (else it is dropped for a BNNeck).",
    )
    input_size: tuple[Side, Side] = option((256, 128), flag="--size", help="Input size HxW.", form="size")
    p: Annotated[int, Field(ge=2, le=100_000)] = option(16, short="-P", help="Identities per batch (per process under torchrun, which needs the spelling -P).")
    k: Annotated[int, Field(ge=1, le=10_000)] = option(4, short="-K", help="Images per identity in a batch.")
    epochs: Annotated[int, Field(ge=1, le=1_000_000)] = option(60, help="Epochs.")
    max_steps: Annotated[int, Field(ge=1)] | None = option(None, help="Stop after this many steps in all.", default_text="none, every epoch")
    optimizer: Literal[OPTIMIZERS] = option("adam", help="Optimizer.", choices=OPTIMIZERS)
    lr: Annotated[float, Field(gt=0, allow_inf_nan=False)] = option(3.5e-4, help="Learning rate.")
    # A start that already embeds: the layers it fills move at a fraction of the rate of
    # the fresh head, which must learn from nothing (docs/models.md measures it).
    backbone_lr_scale: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = option(
        None, help="Learning rate of the layers a start fills (the backbone, a kept fc), as a fraction of --lr; the fresh head keeps --lr.",
        default_text=f"{EMBEDDING_START_LR_SCALE} from a Re-ID model (1 where the saved model blends it, --wise-alpha), 1 from ImageNet or none",
    )
    wise_alpha: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = option(
        None, help="Share of the trained weights in the saved model, the rest the start's (WiSE-FT; a start that embeds with its whole network, fc kept); 1 saves the trained weights.",
        default_text=f"{EMBEDDING_START_WISE_ALPHA} from such a start, 1 otherwise",
    )
    weight_decay: Annotated[float, Field(ge=0, allow_inf_nan=False)] = option(5e-4, help="Weight decay.")
    momentum: Annotated[float, Field(ge=0, lt=1)] = option(0.9, help="Momentum of SGD.")
    warmup_epochs: Annotated[int, Field(ge=0, le=1_000_000)] = option(10, flag="--warmup", help=f"Warm-up epochs (linear from {WARMUP_START_FACTOR:.0%} of --lr).")
    schedule: Literal[SCHEDULES] = option("step", help="Learning-rate schedule.", choices=SCHEDULES)
    milestones: Annotated[tuple[Annotated[int, Field(ge=1)], ...], AfterValidator(_increasing)] = option(
        (40, 70), help="Comma-separated epochs where the step schedule multiplies lr by --gamma.", form="numbers"
    )
    gamma: Annotated[float, Field(gt=0, allow_inf_nan=False)] = option(0.1, help="Factor of the step schedule.")
    grad_clip: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = option(None, help="Clip the gradient norm to this value.", default_text="none")
    amp: bool = option(True, help="Mixed precision on CUDA.")
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = option(0, help="Random seed.")
    ce_weight: Annotated[float, Field(ge=0, allow_inf_nan=False)] = option(1.0, help="Weight of identity cross-entropy (0 disables it).")
    label_smoothing: Annotated[float, Field(ge=0, lt=1)] = option(0.1, help="Label smoothing of the cross-entropy.")
    metric_loss: Literal[(*LOSS_NAMES, *NO_METRIC_LOSS)] = option(DEFAULT_METRIC_LOSS, flag="--loss", help="Metric loss.", choices=lambda: (*LOSS_NAMES, "none"))
    metric_options: dict[str, Any] = option(
        default_factory=default_metric_options, flag="--loss-option",
        help="KEY=VALUE option of the metric loss (repeatable).", form="pairs",
    )
    metric_weight: Annotated[float, Field(ge=0, allow_inf_nan=False)] = option(1.0, help="Weight of the metric loss (0 disables it).")
    eval_every: Annotated[int, Field(ge=0)] = option(0, help="Evaluate on the query/gallery split every N epochs (and at the end); 0: never.")
    eval_batch_size: Annotated[int, Field(ge=1, le=65_536)] = option(128, help="Images per batch when evaluating.")
    # The card's threshold is chosen on the query x gallery pairs of identities held out of
    # training (reid.pipeline.calibrate.choose_on_dataset), so the rate it states is honest.
    threshold_far: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = option(
        1e-3,
        help="False-accept rate of the threshold written on the card, chosen on the pairs of the data set's "
        "held-out identities (its query and gallery) after training; a set without held-out identities gets none.",
    )
    resume: bool = option(
        False, switch=True, help="Continue from OUT/checkpoint.pt (the config must train what OUT/config.yaml says)."
    )
    # Replace a finished model in ``out`` (without it, and without ``resume``, one is refused).
    overwrite: bool = option(
        False, switch=True,
        help="Replace the finished model in OUT (without it such a folder is refused); the old one stays whole until the new one is saved.",
    )
    device: str | None = option(None, help="cpu, cuda, cuda:1 ...", default_text="cuda if available")
    threads: Annotated[int, Field(ge=1, le=4096)] | None = option(None, help="CPU threads for PyTorch.", default_text="PyTorch's")
    # Used only when torchrun starts several processes; see docs/scaling.md.
    sync_bn: bool = option(False, help="Under torchrun on CUDA: BatchNorm statistics over the global batch.")
    gather_embeddings: bool = option(False, help="Under torchrun: the metric loss mines over the embeddings of every process.")
    tensorboard: Path | None = option(
        None, help="Also write the history as TensorBoard event files into this folder (needs the tensorboard extra).",
        default_text="none",
    )
    # "face": every training photo is cut to the aligned chip of its largest face (YuNet's
    # five landmarks onto the ArcFace template at ``input_size``) and the card says so, so
    # that verification cuts the same chips; ``no_face`` says what a photo without one gets.
    kind: Literal[KINDS] = option(
        "person", help="What the photos show (face: each photo cut once to the aligned chip of its largest face, found by yunet).",
        choices=KINDS,
    )
    no_face: Literal[NO_FACE_CHOICES] = option("skip", help="With --kind face, a photo without a face.", choices=NO_FACE_CHOICES)

    def __post_init__(self) -> None:
        if self.out is None or str(self.out) == "":
            self.out = default_out(self.architecture, self.data)
        self.out = Path(self.out)
        if self.tensorboard is not None:
            self.tensorboard = Path(self.tensorboard)
        if isinstance(self.pretrained, str) and self.pretrained.lower() == "none":
            self.pretrained = None
        self.input_size = tuple(self.input_size)  # type: ignore[assignment]
        self.milestones = tuple(self.milestones)

    @property
    def uses_metric_loss(self) -> bool:
        return self.metric_loss not in NO_METRIC_LOSS and self.metric_weight > 0

    @property
    def needs_positives(self) -> bool:
        """Whether the metric loss in use learns only from two images of an identity in a
        batch (a pair or triplet loss)."""
        from reid.losses.registry import needs_positives

        return self.uses_metric_loss and self.metric_loss in LOSS_NAMES and needs_positives(self.metric_loss)

    def validate(self) -> None:
        """Check every value, by the field types (pydantic) and the loss's own option types,
        and that something is trained; raise :class:`ConfigValueError` naming the first key
        whose value is wrong."""
        from reid.losses.registry import convert_options
        from reid.models.folder import parse_device

        _validated(type(self), {f.name: getattr(self, f.name) for f in fields(self)})
        if self.device is not None:
            # The name only: whether this machine has that device is checked where training starts.
            parse_device(self.device)
        if not (self.ce_weight > 0 or self.uses_metric_loss):
            raise ConfigValueError("ce_weight", "is 0 and no metric loss is used: nothing would be trained", sep=" ")
        if self.needs_positives and self.k < 2:
            raise ConfigValueError(
                "k",
                f"{self.k}: the {self.metric_loss} loss learns from two images of an identity in a batch; "
                "give 2 or more, or a loss over class proxies (softtriple, cross_entropy)",
                sep=" ",
            )
        if self.uses_metric_loss:
            try:
                convert_options(self.metric_loss, **self.metric_options)
            except ConfigError as exc:
                raise ConfigValueError("metric_options", str(exc)) from None

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain YAML/JSON values (paths as strings, tuples as lists)."""
        data = asdict(self)
        for key in ("out", "tensorboard"):
            data[key] = None if data[key] is None else str(data[key])
        data["input_size"] = list(self.input_size)
        data["milestones"] = list(self.milestones)
        # Written as the word the option takes, so a saved recipe reads as it would be typed.
        data["pretrained"] = "none" if self.pretrained is None else self.pretrained
        return data

    def to_recipe(self) -> dict[str, Any]:
        """:meth:`to_dict` without the action keys: what a config file holds."""
        return {key: value for key, value in self.to_dict().items() if key not in ACTION_KEYS}

    def to_yaml(self) -> str:
        """The recipe as YAML, every key present (defaults included), in field order."""
        return yaml.safe_dump(self.to_recipe(), sort_keys=False, default_flow_style=None)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Build a config from plain values, converting what converts losslessly
        (``"1e-3"`` to 0.001, a list to a tuple) and checking each against its field's
        type; a wrong value raises :class:`ConfigValueError` naming the key."""
        return _validated(cls, values)


@functools.cache
def _adapter(cls: type) -> TypeAdapter[Any]:
    return TypeAdapter(cls)


def _validated(cls: type[TrainConfig], values: dict[str, Any]) -> TrainConfig:
    """``cls`` built from ``values`` by pydantic, the one check of every field's type and
    range; raises :class:`ConfigValueError` naming the key of the first wrong value."""
    try:
        return _adapter(cls).validate_python(values)
    except ValidationError as exc:
        raise value_error(exc) from None


RECIPE_KEYS = tuple(f.name for f in fields(TrainConfig) if f.name not in ACTION_KEYS)
FIELDS = {f.name: f for f in fields(TrainConfig)}


def option_name(key: str) -> str:
    """The command-line option that sets ``key`` (``--arch`` for ``architecture``), read
    from the field's metadata."""
    return flag_of(FIELDS[key])


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice (plain YAML keeps the last silently)
    and a key that is not text (a list or a mapping as a key)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise yaml.constructor.ConstructorError(None, None, f"line {line}: a key must be a name, not a {type(key).__name__}")
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} appears twice (lines {seen[key]} and {line})")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_config_file(path: Path) -> dict[str, Any]:
    """The keys of a recipe file, checked to be known recipe keys (not yet their values).

    The file is bounded before anything is built from it: at most
    :data:`MAX_CONFIG_BYTES`, no aliases, nesting and values bounded (:func:`check_yaml_shape`).

    Raises:
        ConfigError: the file is missing, too large, not YAML, not a mapping or has an
            unknown key; one line naming the file.
    """
    path = Path(path)
    try:
        text = read_text_bounded(path, MAX_CONFIG_BYTES, "config file")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: config file cannot be read ({exc.strerror or exc.__class__.__name__})") from None
    try:
        check_yaml_shape(text, path)
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: not valid YAML ({where}{' '.join(str(problem).split())})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys to values, found a {type(data).__name__}")
    for key in data:
        if key in ACTION_KEYS:
            raise ConfigError(f"{path}: {key} is not a recipe key; give {option_name(key)} on the command line")
        if key not in RECIPE_KEYS:
            close = difflib.get_close_matches(str(key), RECIPE_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{path}: unknown key {key!r}{hint}")
    return data


def merge_layer(lower: dict[str, Any], upper: dict[str, Any]) -> dict[str, Any]:
    """``upper``'s keys over ``lower``'s.

    Loss options belong to their loss: a layer that names another loss without giving
    options starts from that loss's own defaults, and options given for the same loss
    are merged key by key.
    """
    merged = {**lower, **upper}
    below, options = lower.get("metric_options") or {}, upper.get("metric_options", {})
    if not isinstance(below, dict) or not isinstance(options, dict):
        return merged  # not a mapping: left for type validation to name
    same_loss = upper.get("metric_loss", lower.get("metric_loss")) == lower.get("metric_loss")
    merged["metric_options"] = {**(below if same_loss else {}), **options}
    return merged


def resolve_config(base: TrainConfig, config_file: Path | None = None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """The effective config: ``base``, then the keys of ``config_file``, then ``overrides``
    (the options given on the command line, by key).

    Loss options come back converted to their types. ``out`` left empty in every layer is
    derived from the final architecture and data.

    Raises:
        ConfigError: one line naming the file and key of a bad value from the file;
            ConfigValueError naming the key of a bad value in ``base`` or ``overrides``.
    """
    overrides = dict(overrides or {})
    from_file = read_config_file(config_file) if config_file is not None else {}
    values = base.to_dict()
    if base.out == default_out(base.architecture, base.data):
        # The base's out was derived, so it follows the architecture and data of the later layers.
        values["out"] = None
    values = merge_layer(merge_layer(values, from_file), overrides)

    try:
        config = TrainConfig.from_dict(values)
        config.validate()
    except ConfigValueError as exc:
        if exc.key in from_file and exc.key not in overrides:
            raise ConfigError(f"{config_file}: {exc.key}: {exc.problem}") from None
        raise  # named by its key; the command line names it by its option
    if config.uses_metric_loss:
        from reid.losses.registry import convert_options

        config = replace(config, metric_options=convert_options(config.metric_loss, **config.metric_options))
    return config


def write_config(config: TrainConfig, folder: Path) -> Path:
    """Write the recipe of ``config`` as ``folder/config.yaml`` atomically; returns its path."""
    path = Path(folder) / CONFIG_FILE
    try:
        write_bytes_atomic(path, config.to_yaml().encode())
    except OSError as exc:
        raise ModelError(f"{path}: cannot write the training config ({exc.strerror or exc.__class__.__name__})") from exc
    return path


def check_resume_config(config: TrainConfig, folder: Path) -> None:
    """Refuse to resume the run in ``folder`` with a config that trains something else.

    Compares the keys in :data:`RESUME_FIXED_KEYS` with ``folder/config.yaml``; a folder
    without one (a checkpoint from before configs were written) is not checked.

    Raises:
        ModelError: the saved config cannot be read, or a fixed key differs; one line
            naming the file, the key and both values.
    """
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        return
    try:
        saved = resolve_config(TrainConfig(), path)
    except ConfigError as exc:
        raise ModelError(f"cannot check the run to resume: {exc}") from None
    current, before = config.to_recipe(), saved.to_recipe()
    if config.uses_metric_loss:
        from reid.losses.registry import convert_options

        current["metric_options"] = convert_options(config.metric_loss, **config.metric_options)
    for key in RESUME_FIXED_KEYS:
        if current[key] != before[key]:
            raise ModelError(
                f"{path}: the run to resume was started with {key}={before[key]!r}, this run has {current[key]!r}; "
                f"resume with --config {path}, or train into another --out"
            )
