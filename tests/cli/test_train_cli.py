"""``reid train`` and ``reid demo`` through typer's test runner."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import reid.cli.train
from reid.cli import app
from reid.data import SyntheticConfig, generate_synthetic
from reid.engine import TrainConfig
from reid.engine.demo import demo_config

MICRO = SyntheticConfig(seed=5, train_ids=8, test_ids=4, cameras_per_id=(2, 2), images_per_camera=(2, 2), distractors=2, junk=1)
runner = CliRunner()


@pytest.fixture(scope="module")
def micro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_synthetic(tmp_path_factory.mktemp("micro"), MICRO)


def test_train_writes_a_model_folder(micro: Path, tmp_path: Path) -> None:
    out = tmp_path / "m"
    result = runner.invoke(app, [
        "train", "--data", f"market1501:{micro}", "--out", str(out), "--arch", "resnet18", "--pretrained", "none",
        "--size", "64x32", "--p", "4", "--k", "2", "--epochs", "1", "--eval-every", "1", "--threads", "2",
        "--loss", "triplet", "--loss-option", "mining=hard", "--loss-option", "soft=true", "--json", str(tmp_path / "t.json"), "--quiet",
    ])
    assert result.exit_code == 0, result.output
    card = json.loads((out / "card.json").read_text())
    assert card["architecture"] == "resnet18" and card["input_size"] == [64, 32]
    # Options given on the command line join the recipe's options of the same loss.
    assert card["loss"]["metric"] == {"name": "triplet", "weight": 1.0, "mining": "hard", "margin": 0.3, "soft": True}
    assert 0.0 <= card["metrics"]["rank1"] <= 1.0
    summary = json.loads((tmp_path / "t.json").read_text())
    assert summary["history"][0]["epoch"] == 1 and "eval" in summary["history"][0]


def test_demo_json_has_both_rows(micro: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, [
        "demo", "--data", f"market1501:{micro}", "--out", str(tmp_path / "demo"), "--epochs", "1", "--p", "4", "--k", "2",
        "--json", str(tmp_path / "demo.json"), "--quiet", "--threads", "2",
    ])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "demo.json").read_text())
    for row in ("untrained", "trained"):
        assert set(report[row]) >= {"rank1", "rank5", "rank10", "mAP", "mINP", "num_query", "num_gallery", "num_valid_queries"}
        assert all(0.0 <= report[row][k] <= 1.0 for k in ("rank1", "rank5", "rank10", "mAP", "mINP"))
    assert report["seconds"] > 0
    assert (tmp_path / "demo" / "weights.pt").is_file()
    card = json.loads((tmp_path / "demo" / "card.json").read_text())
    assert 0.0 < card["threshold"] < 2.0 and card["threshold"] == report["threshold"]
    # The demo asks for 0.01; the micro set's few held-out pairs resolve no rate that small.
    assert card["threshold_source"].startswith("reid demo: FAR <= ") and "0.01 asked" in card["threshold_source"]
    assert "untrained" in result.output and "trained" in result.output
    # What both rows were computed on: the micro set's test split, identities held out of training.
    split = report["computed_on"]
    assert split["query_images"] == report["trained"]["num_query"] and split["gallery_images"] == report["trained"]["num_gallery"]
    assert split["held_out"] is True and split["cameras_known"] is True and split["identities"] > 0
    assert f"computed on: {split['dataset']} query {split['query_images']} and gallery" in result.output
    assert "held-out identities" in result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--data", "market1501:/nonexistent/x"], "/nonexistent/x: dataset folder not found"),
        (["--data", "imagenet:/x"], "unknown dataset kind 'imagenet'"),
        (["--size", "big"], "--size 'big': expected HEIGHTxWIDTH"),
        (["--loss-option", "margin"], "--loss-option 'margin': expected KEY=VALUE"),
        (["--loss", "triplet", "--loss-option", "margin=wide"], "option margin='wide': input should be a valid number"),
        # The spelling the help shows first: -P (also what torchrun needs).
        (["-P", "16"], "P=16 needs at least 16 (lower -P)"),
    ],
)
def test_train_errors_are_one_line(micro: Path, tmp_path: Path, args: list[str], message: str) -> None:
    base = ["train", "--data", f"market1501:{micro}", "--out", str(tmp_path / "m"), "--arch", "resnet18", "--pretrained", "none", "--quiet"]
    result = runner.invoke(app, base + args)
    assert result.exit_code == 1
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "m" / "weights.pt").exists()


def test_unwritable_outputs_are_refused_before_training(micro: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "model.pt"
    a_file.write_text("x")
    common = ["train", "--data", f"market1501:{micro}", "--arch", "resnet18", "--pretrained", "none", "--size", "64x32",
              "--p", "4", "--k", "2", "--epochs", "1", "--quiet"]
    result = runner.invoke(app, [*common, "--out", str(a_file)])
    assert result.exit_code == 1
    assert [line for line in result.output.splitlines() if line] == [
        f"error: {a_file}: --out needs a folder here; this is a file"
    ]
    result = runner.invoke(app, [*common, "--out", str(tmp_path / "m"), "--json", str(tmp_path)])
    assert result.exit_code == 1 and "--json needs a file name; this is a folder" in result.output
    assert not (tmp_path / "m").exists() and a_file.read_text() == "x"


def test_print_config_file_train_round_trip(micro: Path, tmp_path: Path) -> None:
    out = tmp_path / "m"
    printed = runner.invoke(app, [
        "train", "--print-config", "--data", f"market1501:{micro}", "--out", str(out), "--arch", "resnet18",
        "--pretrained", "none", "--size", "64x32", "--p", "4", "--k", "2", "--epochs", "1", "--threads", "2",
        "--loss-option", "margin=0.2",
    ])
    assert printed.exit_code == 0, printed.output
    assert not out.exists()  # printing trains nothing
    recipe = yaml.safe_load(printed.stdout)
    assert recipe["metric_options"] == {"mining": "hard", "margin": 0.2} and recipe["input_size"] == [64, 32]
    assert recipe["lr"] == TrainConfig().lr  # defaults included
    (tmp_path / "recipe.yaml").write_text(printed.stdout)
    again = runner.invoke(app, ["train", "--config", str(tmp_path / "recipe.yaml"), "--print-config"])
    assert again.stdout == printed.stdout
    trained = runner.invoke(app, ["train", "--config", str(tmp_path / "recipe.yaml"), "--quiet"])
    assert trained.exit_code == 0, trained.output
    assert (out / "config.yaml").read_text() == printed.stdout
    assert json.loads((out / "card.json").read_text())["training"]["metric_options"] == {"mining": "hard", "margin": 0.2}


def test_options_override_the_file(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text("epochs: 30\nlr: 0.01\nmetric_options: {margin: 0.5}\nsync_bn: true\n")
    result = runner.invoke(app, [
        "train", "--config", str(tmp_path / "r.yaml"), "--epochs", "2", "--loss-option", "mining=all", "--no-sync-bn", "--print-config",
    ])
    assert result.exit_code == 0, result.output
    recipe = yaml.safe_load(result.stdout)
    assert (recipe["epochs"], recipe["lr"], recipe["sync_bn"]) == (2, 0.01, False)
    assert recipe["metric_options"] == {"mining": "all", "margin": 0.5}
    assert recipe["architecture"] == TrainConfig().architecture


def test_demo_config_layers_over_the_demo_recipe(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text("epochs: 5\nlr: 0.001\n")
    result = runner.invoke(app, ["demo", "--config", str(tmp_path / "r.yaml"), "--epochs", "2", "--print-config"])
    assert result.exit_code == 0, result.output
    recipe = yaml.safe_load(result.stdout)
    demo = demo_config()
    assert (recipe["epochs"], recipe["lr"], recipe["name"], recipe["input_size"]) == (2, 0.001, demo.name, list(demo.input_size))


@pytest.mark.parametrize(
    "text,args,message",
    [
        ("lrr: 0.1\n", [], "{file}: unknown key 'lrr' (did you mean 'lr'?)"),
        ("epochs: ten\n", [], "{file}: epochs: input should be a valid integer"),
        ("momentum: 1.5\n", [], "{file}: momentum: input should be less than 1 (got 1.5)"),
        ("lr: 0.1\n", ["--lr", "-1"], "--lr: input should be greater than 0 (got -1.0)"),
        ("epochs: [\n", [], "{file}: not valid YAML (line"),
        ("", ["--size", "8x8"], "--size: input should be greater than or equal to 16 (got 8)"),
        ("", ["--loss-option", "margin=wide"], "--loss-option: triplet: option margin='wide': input should be a valid number"),
        ("", ["--milestones", "4,a"], "--milestones '4,a': expected comma-separated whole numbers"),
    ],
)
def test_bad_config_is_one_line(tmp_path: Path, text: str, args: list[str], message: str) -> None:
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(text)
    result = runner.invoke(app, ["train", "--config", str(recipe), "--out", str(tmp_path / "m"), "--quiet", *args])
    assert result.exit_code == 1
    assert result.output.strip() == "error: " + result.output.strip().removeprefix("error: ")
    assert message.format(file=recipe) in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_tensorboard_without_its_package_is_one_line(micro: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch.utils.tensorboard", raising=False)
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # what Python sees when it is not installed
    result = runner.invoke(app, [
        "train", "--data", f"market1501:{micro}", "--out", str(tmp_path / "m"), "--tensorboard", str(tmp_path / "tb"), "--quiet",
    ])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: --tensorboard {tmp_path / 'tb'}: writing TensorBoard files needs the tensorboard package, "
        'which is not installed: pip install "reid-toolkit[tensorboard]"'
    )
    assert not (tmp_path / "m").exists()


def test_printed_config_is_train_configs_defaults() -> None:
    result = runner.invoke(app, ["train", "--print-config"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout) == TrainConfig().to_recipe()


def test_a_changed_dataclass_default_reaches_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command passes only the options given, so a default changed in the dataclass
    is what the command uses; none is restated in the command."""

    @dataclasses.dataclass
    class Changed(TrainConfig):
        lr: float = 0.0123
        epochs: int = 7

    monkeypatch.setattr(reid.cli.train, "TrainConfig", Changed)
    result = runner.invoke(app, ["train", "--print-config", "--epochs", "3"])
    assert result.exit_code == 0, result.output
    recipe = yaml.safe_load(result.stdout)
    assert (recipe["lr"], recipe["epochs"]) == (0.0123, 3)
    assert {k: v for k, v in recipe.items() if k not in ("lr", "epochs")} == {
        k: v for k, v in TrainConfig().to_recipe().items() if k not in ("lr", "epochs")
    }


def test_help_shows_the_dataclass_defaults() -> None:
    result = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    # Help wraps between words: the text is compared with its line breaks as spaces.
    shown = " ".join(result.output.split())
    defaults = TrainConfig()
    for text in (f"(default: {defaults.lr})", f"(default: {defaults.epochs})", f"(default: {defaults.optimizer})",
                 "(default: {}x{})".format(*defaults.input_size), f"(default: {defaults.metric_loss})"):
        assert text in shown, text
    demo = runner.invoke(app, ["demo", "--help"], env={"COLUMNS": "400"})
    assert f"(default: {demo_config().epochs})" in " ".join(demo.output.split())
    # P and K by the spellings the errors use.
    assert re.search(r"-P, --p\b", shown) and re.search(r"-K, --k\b", shown), shown


def test_train_into_a_finished_model_is_one_line_and_overwrite_replaces_it(micro: Path, tmp_path: Path) -> None:
    args = ["train", "--data", f"market1501:{micro}", "--out", str(tmp_path / "m"), "--arch", "resnet18", "--pretrained", "none",
            "--size", "64x32", "--p", "4", "--k", "2", "--epochs", "1", "--threads", "2", "--quiet"]
    assert runner.invoke(app, args).exit_code == 0
    card = (tmp_path / "m" / "card.json").read_bytes()
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1 and len(refused.output.strip().splitlines()) == 1, refused.output
    assert "holds a finished model" in refused.output and "--overwrite" in refused.output
    assert (tmp_path / "m" / "card.json").read_bytes() == card
    replaced = runner.invoke(app, [*args, "--overwrite", "--seed", "3"])
    assert replaced.exit_code == 0, replaced.output
    assert (tmp_path / "m" / "card.json").read_bytes() != card


def test_kind_and_no_face_options_reach_the_recipe(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "--config", "configs/orl-faces.yaml", "--no-face", "whole", "--print-config"])
    assert result.exit_code == 0, result.output
    recipe = yaml.safe_load(result.stdout)
    assert (recipe["kind"], recipe["no_face"], recipe["input_size"]) == ("face", "whole", [112, 112])
    bad = runner.invoke(app, ["train", "--kind", "faces", "--print-config"])
    assert bad.exit_code != 0 and "--kind: input should be 'person' or 'face' (got 'faces')" in bad.output


def test_off_a_terminal_training_prints_one_plain_line_per_epoch(micro: Path, tmp_path: Path) -> None:
    # CliRunner's output is no terminal, as a pipe (| tee), nohup or CI.
    result = runner.invoke(app, [
        "train", "--data", f"market1501:{micro}", "--out", str(tmp_path / "m"), "--arch", "resnet18", "--pretrained", "none",
        "--size", "64x32", "--p", "4", "--k", "2", "--epochs", "2", "--eval-every", "2", "--threads", "2",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    epochs = [line for line in result.output.splitlines() if line.startswith("epoch ")]
    assert len(epochs) == 2, result.output
    pattern = r"epoch {}/2: loss \d+\.\d{{4}} \(ce \d+\.\d{{4}}, metric \d+\.\d{{4}}\), lr \d\.\d\de-\d\d, \d+ images/s, \d+ s"
    assert re.fullmatch(pattern.format(1) + r", ETA \d+ s", epochs[0]) and re.fullmatch(pattern.format(2), epochs[1]), epochs
    assert not any(c in result.output for c in "━│…"), result.output
    # The figures are named, written and laid out as eval lays them out: a metric a row.
    for label in ("Rank-1", "Rank-5", "Rank-10", "mAP", "mINP"):
        assert re.search(rf"^{label} +\d+\.\d\d%$", result.output, re.MULTILINE), result.output
    for label in ("queries evaluated", "gallery images", "same-camera filtering", "computed on", "held out from training"):
        assert re.search(rf"^{label} +\S", result.output, re.MULTILINE), result.output
    # Each embedding pass says what it is for, under the one word every command uses.
    assert re.search(r"^embedding to evaluate epoch 2 \d+/\d+", result.output, re.MULTILINE), result.output
    assert re.search(r"^embedding held-out identities to choose the threshold \d+/\d+", result.output, re.MULTILINE)
    assert not re.search(r"^embed ", result.output, re.MULTILINE)
def held_out_pairs(data: str) -> tuple[int, int, int]:
    """Counted here from the records: the query x gallery pairs a threshold is chosen on
    (genuine: one identity seen by two cameras; impostor: two identities, junk left out),
    and the identities they hold, none of them trained on."""
    from reid.data import load_dataset

    dataset = load_dataset(data)
    query = [r for r in dataset.query if r.pid >= 0]
    gallery = [r for r in dataset.gallery if r.pid >= 0]
    genuine = sum(1 for a in query for b in gallery if a.pid == b.pid and a.camid != b.camid)
    impostor = sum(1 for a in query for b in gallery if a.pid != b.pid)
    held = {r.pid for r in (*query, *gallery) if r.pid > 0}
    assert not held & {r.pid for r in dataset.train}
    return genuine, impostor, len(held)


def test_train_enrol_query_works_with_defaults(micro: Path, tmp_path: Path) -> None:
    import numpy as np

    from reid.decision import pair_distance
    from reid.gallery.calibration import MIN_ADMITTED
    from reid.models import load_encoder
    from reid.pipeline.embed import embed_paths

    data, out = f"market1501:{micro}", tmp_path / "m"
    result = runner.invoke(app, [
        "train", "--data", data, "--out", str(out), "--arch", "resnet18", "--pretrained", "none",
        "--size", "64x32", "--p", "4", "--k", "2", "--epochs", "1", "--threads", "2", "--quiet",
    ])
    assert result.exit_code == 0, result.output
    card = json.loads((out / "card.json").read_text())
    genuine, impostor, identities = held_out_pairs(data)
    calibration = card["metrics"]["calibration"]
    assert (calibration["num_genuine"], calibration["num_impostor"]) == (genuine, impostor)
    # Too few impostor pairs for the default 1e-3: the smallest rate they resolve, rounded up, and said so.
    rate = math.ceil(100 * MIN_ADMITTED / impostor) / 100
    assert calibration["target_far"] == pytest.approx(rate)
    assert card["threshold_source"].startswith(
        f"reid train: FAR <= {rate:g}, 0.001 asked: not resolved by {impostor:,} impostor pairs "
        f"on the query x gallery pairs of {data} ({identities} held-out identities"
    )
    assert f"{genuine:,} genuine, {impostor:,} impostor pairs" in card["threshold_source"]
    assert card["threshold"] == calibration["threshold"] and card["impostor_quantiles"]
    assert f"threshold {card['threshold']:.4f} on the card" in " ".join(result.output.split())
    # The rate the card states is what its threshold does on those pairs, measured here.
    from reid.data import load_dataset

    dataset = load_dataset(data)
    query = [r for r in dataset.query if r.pid >= 0]
    gallery = [r for r in dataset.gallery if r.pid >= 0]
    features = embed_paths(load_encoder(out), [r.path for r in (*query, *gallery)]).features
    left, right = zip(*[(i, len(query) + j) for i, a in enumerate(query) for j, b in enumerate(gallery) if a.pid != b.pid])
    distances = pair_distance(features[list(left)], features[list(right)])
    assert np.mean(distances <= card["threshold"]) == pytest.approx(calibration["far"], abs=1 / impostor)
    assert calibration["far"] <= rate
    # Enrol the set's gallery by its data spec and query its query images: no calibrate step.
    gallery_folder = tmp_path / "g"
    result = runner.invoke(app, ["enroll", data, "-m", str(out), "-g", str(gallery_folder)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, [
        "query", str(micro / "query"), "-m", str(out), "-g", str(gallery_folder), "--json", str(tmp_path / "q.json"),
    ])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "q.json").read_text())
    assert summary["threshold"] == card["threshold"] and summary["threshold_source"].startswith("model card (reid train: FAR")
    assert summary["frames"] == len(list((micro / "query").iterdir()))


def test_a_set_without_held_out_identities_gets_no_threshold_and_says_what_to_run(tmp_path: Path) -> None:
    import cv2
    import numpy as np

    for person in range(3):
        for shot in range(2):
            path = tmp_path / "people" / f"p{person}" / f"{shot}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(path), np.full((64, 32, 3), 60 * person + 20 * shot, np.uint8))
    out = tmp_path / "m"
    result = runner.invoke(app, [
        "train", "--data", f"folder:{tmp_path / 'people'}", "--out", str(out), "--arch", "resnet18", "--pretrained", "none",
        "--size", "64x32", "--p", "2", "--k", "2", "--epochs", "1", "--threads", "2", "--quiet",
    ])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "card.json").read_text())["threshold"] is None
    assert (
        f"holds no identities outside its training split, so no threshold was chosen; run 'reid calibrate --model {out} "
        "--data KIND:PATH'" in " ".join(result.output.split())
    )


def test_missing_data_is_named_before_any_download(tmp_path: Path) -> None:
    # The default network starts from resnet50's ImageNet weights, which a fresh machine
    # downloads: the data is checked first, so the line names it and not the network.
    missing = tmp_path / "nothing-here"
    result = runner.invoke(app, ["train", "--data", f"market1501:{missing}", "--out", str(tmp_path / "m"), "--quiet"])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {missing}: dataset folder not found"
    assert not (tmp_path / "m").exists()


def test_a_resumed_run_says_where_it_resumed_and_not_how_it_started(micro: Path, tmp_path: Path) -> None:
    out = tmp_path / "m"
    base = ["train", "--data", f"market1501:{micro}", "--out", str(out), "--arch", "resnet18", "--pretrained", "none",
            "--size", "64x32", "-P", "4", "-K", "2", "--eval-every", "0", "--threads", "2"]  # fmt: skip
    first = runner.invoke(app, [*base, "--epochs", "1"])
    assert first.exit_code == 0, first.output
    assert "random initialisation" in first.output and "resumed at" not in first.output
    again = runner.invoke(app, [*base, "--epochs", "2", "--resume"])
    assert again.exit_code == 0, again.output
    shown = " ".join(again.output.split())
    assert f"resumed at epoch 2 of 2 from {out / 'checkpoint.pt'}" in shown, again.output
    assert "random initialisation" not in shown


def test_an_interrupted_run_says_what_was_saved(tmp_path: Path) -> None:
    from reid.cli.train import RunState, interrupted_line

    config = TrainConfig(out=tmp_path / "m", epochs=5)
    checkpoint = tmp_path / "m" / "checkpoint.pt"
    assert interrupted_line(RunState(), config) == "interrupted before the first epoch ended; nothing was saved"
    run = RunState()
    run.epoch_done(2)
    assert interrupted_line(run, config) == (
        f"interrupted; {checkpoint} holds epoch 3 of 5: continue with the same command and --resume"
    )
    resumed = RunState(start_epoch=3)
    assert interrupted_line(resumed, dataclasses.replace(config, resume=True)) == (
        f"interrupted; no epoch finished in this run, {checkpoint} still holds epoch 3 of 5"
    )


def test_each_embedding_pass_of_a_run_is_labelled_by_what_it_is_for() -> None:
    from reid.cli.train import RunState
    from reid.engine import StepInfo

    run = RunState()
    assert run.embedding_purpose() == "embedding to evaluate the untrained encoder"  # reid demo, before training
    step = StepInfo(epoch=0, epochs=2, step=0, steps_per_epoch=1, loss=1.0, ce=0.5, metric=0.5, lr=1e-3, images_per_second=1.0)
    run.step(step)
    assert run.embedding_purpose() == "embedding to evaluate epoch 1"
    run.epoch_done(0)
    run.step(dataclasses.replace(step, epoch=1))
    run.epoch_done(1)
    assert run.embedding_purpose() == "embedding held-out identities to choose the threshold"
    assert run.embedding_purpose() == "embedding to evaluate the trained encoder"  # reid demo, after training
