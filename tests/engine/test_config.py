"""Recipes as YAML files: reading, validation, layering, round trip, the resume check."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from reid.engine.config import (
    CONFIG_FILE,
    RECIPE_KEYS,
    TrainConfig,
    check_resume_config,
    option_name,
    resolve_config,
    write_config,
)
from reid.engine.demo import demo_config
from reid.errors import ConfigError, ConfigValueError, ModelError
from reid.losses import LOSS_NAMES, TripletLoss
from reid.models.folder import check_device

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("recipe", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_recipe_in_configs_is_valid(recipe: Path) -> None:
    keys = yaml.safe_load(recipe.read_text())
    config = resolve_config(TrainConfig(), recipe)
    config.validate()
    for key, value in keys.items():
        assert config.to_recipe()[key] == value, key
    assert config.resume is False


def test_configs_hold_the_recommended_recipes() -> None:
    names = {path.name for path in CONFIGS.glob("*.yaml")}
    assert names == {"demo.yaml", "market1501-cpu.yaml", "market1501-bot-resnet50.yaml", "orl-faces.yaml"}
    assert resolve_config(TrainConfig(), CONFIGS / "demo.yaml") == demo_config()
    bot = resolve_config(TrainConfig(), CONFIGS / "market1501-bot-resnet50.yaml")
    assert (bot.architecture, bot.input_size, bot.p, bot.k, bot.epochs, bot.milestones) == ("resnet50", (256, 128), 16, 4, 120, (40, 70))
    assert "Rank-1 94.1, mAP 85.7" in (CONFIGS / "market1501-bot-resnet50.yaml").read_text()
    cpu = resolve_config(TrainConfig(), CONFIGS / "market1501-cpu.yaml")
    assert (cpu.architecture, cpu.pretrained, cpu.input_size, cpu.epochs, cpu.device) == (
        "mobilenet_v2", "mobilenet_v2.imagenet-deepsort", (128, 64), 3, "cpu"
    )
    faces = resolve_config(TrainConfig(), CONFIGS / "orl-faces.yaml")
    assert (faces.kind, faces.no_face, faces.architecture, faces.pretrained, faces.input_size) == (
        "face", "skip", "efficientnet_lite0", "imagenet", (112, 112)
    )


def test_yaml_round_trip_gives_the_same_config(tmp_path: Path) -> None:
    config = TrainConfig(
        data="folder:/data/people", out=tmp_path / "m", architecture="resnet18", input_size=(64, 32),
        lr=1e-5, milestones=(3, 9), grad_clip=5.0, metric_loss="contrastive",
        metric_options={"form": "chopra", "normalize": True}, tensorboard=tmp_path / "tb", pretrained=None,
    )
    text = config.to_yaml()
    assert set(yaml.safe_load(text)) == set(RECIPE_KEYS)
    again = resolve_config(TrainConfig(), write(tmp_path / "c.yaml", text))
    assert again == config
    assert again.to_yaml() == text


def test_layers_defaults_then_file_then_options(tmp_path: Path) -> None:
    recipe = write(tmp_path / "r.yaml", "epochs: 7\nlr: 1e-3\nmetric_options: {margin: 0.5}\n")
    config = resolve_config(TrainConfig(), recipe, {"epochs": 2, "metric_options": {"mining": "all"}})
    assert config.epochs == 2  # the option over the file
    assert config.lr == 0.001  # the file over the default; YAML reads 1e-3 as text, it converts
    assert config.weight_decay == TrainConfig().weight_decay  # the default where neither says
    # Options of the same loss merge key by key, and come back typed.
    assert config.metric_options == {"mining": "all", "margin": 0.5}
    typed = resolve_config(TrainConfig(), None, {"metric_options": {"margin": "0.2", "soft": "true"}})
    assert typed.metric_options == {"mining": "hard", "margin": 0.2, "soft": True}


def test_another_loss_starts_from_its_own_options(tmp_path: Path) -> None:
    recipe = write(tmp_path / "r.yaml", "metric_loss: contrastive\nmetric_options: {form: chopra}\n")
    assert resolve_config(TrainConfig(), recipe).metric_options == {"form": "chopra"}
    assert resolve_config(TrainConfig(), recipe, {"metric_loss": "lifted"}).metric_options == {}
    both = resolve_config(TrainConfig(), recipe, {"metric_options": {"normalize": "true"}})
    assert both.metric_options == {"form": "chopra", "normalize": True}


def test_out_follows_the_final_architecture_and_data(tmp_path: Path) -> None:
    assert TrainConfig().out == Path("models/resnet50-synthetic")
    recipe = write(tmp_path / "r.yaml", "architecture: resnet18\n")
    assert resolve_config(TrainConfig(), recipe, {"data": "market1501:/x"}).out == Path("models/resnet18-market1501")
    assert resolve_config(demo_config(), recipe).out == Path("models/demo")
    assert resolve_config(TrainConfig(), None, {"pretrained": "none"}).pretrained is None


@pytest.mark.parametrize(
    "text,message",
    [
        ("lrr: 0.1\n", "unknown key 'lrr' (did you mean 'lr'?)"),
        ("colour: red\n", "unknown key 'colour'"),
        ("resume: true\n", "resume is not a recipe key; give --resume on the command line"),
        ("epochs: ten\n", "epochs: input should be a valid integer"),
        ("input_size: [256, 128, 3]\n", "input_size: tuple should have at most 2 items"),
        ("amp: sometimes\n", "amp: input should be a valid boolean"),
        ("metric_options: [hard]\n", "metric_options: input should be a valid dictionary"),
        ("lr: -0.1\n", "lr: input should be greater than 0 (got -0.1)"),
        ("epochs: 0\n", "epochs: input should be greater than or equal to 1 (got 0)"),
        ("p: 1\n", "p: input should be greater than or equal to 2 (got 1)"),
        ("input_size: [8, 8]\n", "input_size: input should be greater than or equal to 16 (got 8)"),
        ("optimizer: rmsprop\n", "optimizer: input should be 'adam', 'adamw' or 'sgd' (got 'rmsprop')"),
        ("architecture: vgg16\n", "architecture: input should be 'resnet18', "),
        ("label_smoothing: 1.5\n", "label_smoothing: input should be less than 1 (got 1.5)"),
        ("milestones: [70, 40]\n", "milestones: must be increasing epochs (got [70, 40])"),
        ("milestones: [0, 40]\n", "milestones: input should be greater than or equal to 1 (got 0)"),
        ("metric_loss: arcface\n", "metric_loss: input should be 'triplet', "),
        ("metric_options: {margn: 0.3}\n", "metric_options: triplet: unknown option margn"),
        ("metric_options: {margin: wide}\n", "metric_options: triplet: option margin='wide': input should be a valid number"),
        ("metric_options: {soft: maybe}\n", "metric_options: triplet: option soft='maybe': input should be a valid boolean"),
        ("ce_weight: 0\nmetric_loss: none\n", "ce_weight: is 0 and no metric loss is used"),
        # A batch of one image an identity holds no positive pair for a triplet loss.
        ("k: 1\n", "k: 1: the triplet loss learns from two images of an identity in a batch"),
        ("k: 1\nmetric_loss: contrastive\n", "k: 1: the contrastive loss learns from two images"),
        ("device: tpu\n", "device: 'tpu': not a device (cpu, cuda, cuda:1 ...)"),
        ("epochs: 3\nepochs: 4\n", "not valid YAML (key 'epochs' appears twice (lines 1 and 2))"),
        ("epochs: [3\n", "not valid YAML (line"),
        ("- epochs\n- 3\n", "expected a mapping of config keys to values, found a list"),
        ("? [epochs, 3]\n: 4\n", "a key must be a name, not a list"),
        ("metric_options: {? [a]\n: 1}\n", "a key must be a name, not a list"),
        ("a: &x [1]\nb: *x\n", "line 2: YAML aliases (*x) are not taken in a recipe"),
        ("".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" if i else "l0: &l0 [lol]\n" for i in range(9)),
         "YAML aliases (*l0) are not taken"),
        ("epochs: " + "[" * 1000 + "]" * 1000 + "\n", "nested deeper than the 8 levels a recipe may have"),
        ("metric_options: " + "{a: " * 50 + "1" + "}" * 50 + "\n", "nested deeper than the 8 levels"),
        ("milestones: [" + ", ".join(["1"] * 20_000) + "]\n", "more than the 10,000 values a recipe may have"),
        ("lr: .inf\n", "lr: input should be a finite number (got inf)"),
        ("gamma: .nan\n", "gamma: input should be a finite number (got nan)"),
        ("input_size: [100000, 100000]\n", "input_size: input should be less than or equal to 4096 (got 100000)"),
        ("p: 1000000000\n", "p: input should be less than or equal to 100000"),
        # A seed every generator takes (NumPy's is 32 bits), in whatever spelling it comes.
        ("seed: 1e23\n", "seed: input should be a valid integer"),
        ("seed: 1.0e+23\n", "seed: "),
        ("seed: 100000000000000000000000\n", "seed: input should be less than or equal to 4294967295"),
        ("seed: -1\n", "seed: input should be greater than or equal to 0"),
        ("kind: faces\n", "kind: input should be 'person' or 'face' (got 'faces')"),
        ("no_face: drop\n", "no_face: input should be 'skip', 'whole' or 'error' (got 'drop')"),
    ],
)
def test_bad_config_is_one_line_naming_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    recipe = write(tmp_path / "bad.yaml", text)
    with pytest.raises(ConfigError) as caught:
        resolve_config(TrainConfig(), recipe)
    line = str(caught.value)
    assert line.startswith(f"{recipe}: "), line
    assert message in line, line
    assert "\n" not in line


def test_missing_file_and_bad_option_name_their_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.yaml: config file not found$"):
        resolve_config(TrainConfig(), tmp_path / "nope.yaml")
    # A bad value given over a file's names the key (the command line calls it by its
    # option), even when a file set the key too.
    recipe = write(tmp_path / "r.yaml", "lr: 0.1\nwarmup_epochs: 2\n")
    for key, value, message in (("lr", -1.0, "lr: input should be greater than 0 (got -1.0)"), ("warmup_epochs", -2, "warmup_epochs: input should be greater than or equal to 0 (got -2)")):
        with pytest.raises(ConfigValueError) as caught:
            resolve_config(TrainConfig(), recipe, {key: value})
        assert (str(caught.value), caught.value.key) == (message, key)
    assert option_name("warmup_epochs") == "--warmup" and option_name("max_steps") == "--max-steps"
    # Used as a library, the key itself is named.
    with pytest.raises(ConfigError, match=r"^gamma: input should be greater than 0 \(got 0.0\)$"):
        TrainConfig(gamma=0.0).validate()


def test_resume_check_compares_what_is_trained(tmp_path: Path) -> None:
    started = TrainConfig(out=tmp_path, architecture="resnet18", epochs=10)
    write_config(started, tmp_path)
    assert yaml.safe_load((tmp_path / CONFIG_FILE).read_text()) == started.to_recipe()
    # Length, learning rate, schedule and where it runs may change.
    check_resume_config(replace(started, epochs=30, lr=1e-4, schedule="cosine", threads=1, resume=True), tmp_path)
    for key, value in [("architecture", "resnet50"), ("input_size", (128, 64)), ("optimizer", "sgd"),
                       ("data", "market1501:/elsewhere"), ("metric_options", {"mining": "all", "margin": 0.3})]:
        with pytest.raises(ModelError) as caught:
            check_resume_config(replace(started, **{key: value}), tmp_path)
        assert str(caught.value).startswith(f"{tmp_path / CONFIG_FILE}: the run to resume was started with {key}=")
        assert f"resume with --config {tmp_path / CONFIG_FILE}" in str(caught.value)
    # Options given as text compare by their typed values.
    check_resume_config(replace(started, metric_options={"mining": "hard", "margin": "0.3"}), tmp_path)
    (tmp_path / CONFIG_FILE).write_text("architecture: [\n")
    with pytest.raises(ModelError, match="cannot check the run to resume: .*config.yaml: not valid YAML"):
        check_resume_config(started, tmp_path)


def test_options_the_trainer_fills_in_are_not_asked_of_a_recipe(tmp_path: Path) -> None:
    """SoftTriple needs num_classes and embedding_dim, which training takes from the data and network."""
    TrainConfig(metric_loss="softtriple", metric_options={}).validate()
    recipe = write(tmp_path / "r.yaml", "metric_loss: softtriple\nmetric_options: {centers_per_class: '1'}\n")
    config = resolve_config(TrainConfig(), recipe, {"ce_weight": 0.0})
    assert config.metric_options == {"centers_per_class": 1}
    write_config(config, tmp_path)
    check_resume_config(config, tmp_path)


def test_the_default_metric_options_are_the_triplet_losss_own() -> None:
    """The margin and mining of the default recipe are stated once, by TripletLoss."""
    loss = TripletLoss()
    config = TrainConfig()
    assert config.metric_loss == "triplet"
    assert config.metric_options == {"mining": loss.mining, "margin": loss.margin}


def test_a_huge_config_file_is_refused_unread(tmp_path: Path) -> None:
    recipe = tmp_path / "big.yaml"
    with open(recipe, "wb") as handle:
        handle.truncate(30 << 30)
    with pytest.raises(ConfigError, match=r"big.yaml: 32,212,254,720 bytes, more than the 1,048,576 a config file may have"):
        resolve_config(TrainConfig(), recipe)


def test_a_bomb_as_a_model_folders_config_is_refused_on_resume(tmp_path: Path) -> None:
    bomb = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" if i else "l0: &l0 [lol]\n" for i in range(9))
    (tmp_path / CONFIG_FILE).write_text(bomb)
    with pytest.raises(ModelError, match=r"cannot check the run to resume: .*config.yaml: line 2: YAML aliases"):
        check_resume_config(TrainConfig(out=tmp_path, resume=True), tmp_path)


def test_a_device_this_machine_lacks_is_one_line() -> None:
    for name, problem in (("cuda:99", "CUDA device"), ("tpu", "not a device"), ("cuda:x", "not a device")):
        if name.startswith("cuda") and torch.cuda.is_available() and name != "cuda:99":
            continue
        with pytest.raises(ConfigError, match=problem):
            check_device(name)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="^device cuda: this machine has no CUDA device"):
            check_device("cuda")
    assert check_device("cpu").type == "cpu"


def test_a_loss_over_class_proxies_trains_on_one_image_an_identity(tmp_path: Path) -> None:
    from reid.losses.registry import needs_positives

    assert [name for name in LOSS_NAMES if not needs_positives(name)] == ["softtriple", "cross_entropy"]
    recipe = tmp_path / "one.yaml"
    recipe.write_text("k: 1\nmetric_loss: softtriple\n")
    config = resolve_config(TrainConfig(), recipe, {})
    assert config.k == 1 and not config.needs_positives
    assert TrainConfig(metric_loss="none", k=1).needs_positives is False
