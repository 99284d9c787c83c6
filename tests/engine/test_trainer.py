"""Real, short training runs on a tiny synthetic set."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from reid.data import SyntheticConfig, generate_synthetic, load_dataset, read_image, relabel
from reid.data.sampler import PKSampler
from reid.data.transforms import AugmentConfig, augment
from reid.engine import TrainCallbacks, TrainConfig, TrainingDiverged, train
from reid.engine.demo import untrained_encoder
from reid.engine.config import CONFIG_FILE
from reid.engine.loading import load_images
from reid.engine.objective import TrainingObjective, build_metric
from reid.engine.optim import build_optimizer
from reid.engine.trainer import AUGMENT_SEED_STRIDE, CHECKPOINT_FILE, evaluate_dataset
from reid.errors import ConfigError, ModelError
from reid.models import load_encoder, load_model
from reid.models.network import ReidNet

TINY = SyntheticConfig(seed=11, train_ids=32, test_ids=32, cameras_per_id=(2, 3), images_per_camera=(2, 3), distractors=0, junk=0)


MICRO = SyntheticConfig(seed=12, train_ids=8, test_ids=4, cameras_per_id=(2, 2), images_per_camera=(2, 2), distractors=0, junk=0)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    return "market1501:" + str(generate_synthetic(tmp_path_factory.mktemp("tiny"), TINY))


@pytest.fixture(scope="module")
def micro_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """8 training identities x 4 images: enough for the mechanics, cheap to train on."""
    return "market1501:" + str(generate_synthetic(tmp_path_factory.mktemp("micro"), MICRO))


def tiny_config(data: str, out: Path, **changes: object) -> TrainConfig:
    config = TrainConfig(
        data=data, out=out, architecture="resnet18", pretrained=None, input_size=(64, 32),
        p=4, k=4, epochs=2, lr=1e-3, warmup_epochs=0, schedule="constant", threads=2,
    )
    return replace(config, **changes)


def test_training_lowers_loss_and_raises_rank1(tiny_data: str, tmp_path: Path) -> None:
    config = tiny_config(tiny_data, tmp_path / "m", epochs=15, lr=3e-3, schedule="cosine", warmup_epochs=1, eval_every=15)
    dataset = load_dataset(tiny_data)
    torch.manual_seed(config.seed)
    before = evaluate_dataset(untrained_encoder(config, dataset), dataset)
    losses: list[float] = []
    result = train(config, TrainCallbacks(on_step=lambda s: losses.append(s.loss)))
    after = result.history[-1]["eval"]
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    assert last < 0.8 * first, f"loss {first:.3f} -> {last:.3f}"
    assert after["rank1"] >= before.rank1 + 0.06, f"rank-1 {before.rank1:.3f} -> {after['rank1']:.3f}"
    assert after["mAP"] >= before.mAP + 0.05, f"mAP {before.mAP:.3f} -> {after['mAP']:.3f}"
    card = load_encoder(result.model_dir).card
    assert card.metrics["rank1"] == after["rank1"]
    assert card.num_classes == 32 and card.training_data["train_identities"] == 32


def test_resume_continues_from_checkpoint(micro_data: str, tmp_path: Path) -> None:
    full = train(tiny_config(micro_data, tmp_path / "full", epochs=2))
    part = tiny_config(micro_data, tmp_path / "part", epochs=1)
    train(part)
    assert (tmp_path / "part" / CHECKPOINT_FILE).is_file()
    resumed = train(replace(part, epochs=2, resume=True))
    assert [h["epoch"] for h in resumed.history] == [1, 2]
    a, _ = load_model(full.model_dir)
    b, _ = load_model(resumed.model_dir)
    for key, value in a.state_dict().items():
        assert torch.allclose(value.float(), b.state_dict()[key].float(), atol=1e-4), key


def test_a_finished_model_is_not_replaced_without_resume_or_overwrite(micro_data: str, tmp_path: Path) -> None:
    first = train(tiny_config(micro_data, tmp_path / "m", epochs=1))
    before = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    steps: list[object] = []
    for changes in ({}, {"epochs": 2, "seed": 5}):
        with pytest.raises(ConfigError, match=r"m: holds a finished model .*--resume, or pass --overwrite"):
            train(tiny_config(micro_data, tmp_path / "m", **changes), TrainCallbacks(on_step=steps.append))
    assert steps == [] and {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()} == before
    again = train(tiny_config(micro_data, tmp_path / "m", epochs=1, seed=5, overwrite=True))
    assert again.card.fingerprint != first.card.fingerprint
    assert load_model(tmp_path / "m")[1].fingerprint == again.card.fingerprint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"], "the old folder is gone once the new one is in place"


def test_resume_without_checkpoint_and_corrupt_checkpoint(micro_data: str, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no checkpoint to resume from"):
        train(tiny_config(micro_data, tmp_path / "m", resume=True))
    (tmp_path / "m").mkdir(exist_ok=True)
    (tmp_path / "m" / CHECKPOINT_FILE).write_bytes(b"broken")
    with pytest.raises(ModelError, match="checkpoint cannot be read"):
        train(tiny_config(micro_data, tmp_path / "m", resume=True))
    assert (tmp_path / "m" / CHECKPOINT_FILE).read_bytes() == b"broken"


def test_stale_temporary_checkpoints_are_removed_and_a_file_as_out_is_refused(micro_data: str, tmp_path: Path) -> None:
    out = tmp_path / "m"
    out.mkdir()
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = out / f".{CHECKPOINT_FILE}.tmp-{int(finished.stdout)}"
    stale.write_bytes(b"x" * 1000)
    # A temporary file of a process still running is its writer's, not a leftover.
    live = out / f".{CHECKPOINT_FILE}.tmp-{os.getppid()}"
    live.write_bytes(b"y")
    train(tiny_config(micro_data, out, epochs=1))
    assert not stale.exists() and live.exists()
    assert sorted(p.name for p in out.glob(".*.tmp-*")) == [live.name]

    a_file = tmp_path / "file.pt"
    a_file.write_text("x")
    steps: list[object] = []
    with pytest.raises(ConfigError, match=r"file.pt: --out needs a folder here; this is a file"):
        train(tiny_config(micro_data, a_file, epochs=1), TrainCallbacks(on_step=steps.append))
    with pytest.raises(ConfigError, match=r"file.pt: --out needs a folder here; this is a file"):
        train(tiny_config(micro_data, a_file / "m", epochs=1), TrainCallbacks(on_step=steps.append))
    assert steps == [] and a_file.read_text() == "x"


def test_resume_with_another_optimizer_is_refused(micro_data: str, tmp_path: Path) -> None:
    train(tiny_config(micro_data, tmp_path / "m", epochs=1))
    before = (tmp_path / "m" / CHECKPOINT_FILE).read_bytes()
    with pytest.raises(ModelError, match=r"config.yaml: the run to resume was started with optimizer='adam', this run has 'sgd'"):
        train(tiny_config(micro_data, tmp_path / "m", epochs=2, optimizer="sgd", resume=True))
    # A checkpoint without its config (written before configs were saved) is checked by its optimizer state.
    (tmp_path / "m" / CONFIG_FILE).unlink()
    with pytest.raises(ModelError, match="checkpoint was made with optimizer adam, not sgd"):
        train(tiny_config(micro_data, tmp_path / "m", epochs=2, optimizer="sgd", resume=True))
    assert (tmp_path / "m" / CHECKPOINT_FILE).read_bytes() == before


def test_divergence_is_a_clear_error_and_keeps_the_checkpoint(micro_data: str, tmp_path: Path) -> None:
    out = tmp_path / "m"
    train(tiny_config(micro_data, out, epochs=1))
    before = (out / CHECKPOINT_FILE).read_bytes()
    with pytest.raises(TrainingDiverged, match=r"loss became (nan|inf).*last good checkpoint"):
        train(tiny_config(micro_data, out, epochs=3, lr=1e30, resume=True))
    assert (out / CHECKPOINT_FILE).read_bytes() == before


def test_every_metric_loss_trains(micro_data: str, tmp_path: Path) -> None:
    for name, options in [
        ("triplet", {"mining": "hard", "soft": True}),
        ("contrastive", {"form": "hadsell"}),
        ("lifted", {}),
        ("centroid_triplet", {}),
        ("softtriple", {}),
    ]:
        result = train(tiny_config(micro_data, tmp_path / name, epochs=1, max_steps=2, metric_loss=name, metric_options=options))
        assert result.history[-1]["metric"] >= 0
        if name == "softtriple":
            assert len(result.history) == 1


def test_config_errors(tiny_data: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has 32 identities; P=40"):
        train(tiny_config(tiny_data, tmp_path / "m", p=40))
    with pytest.raises(ConfigError, match=r"^k: input should be greater than or equal to 1 \(got 0\)"):
        train(tiny_config(tiny_data, tmp_path / "m", k=0))
    with pytest.raises(ConfigError, match="^optimizer: input should be 'adam', 'adamw' or 'sgd'"):
        train(tiny_config(tiny_data, tmp_path / "m", optimizer="rmsprop"))
    with pytest.raises(ConfigError, match="^metric_loss: input should be 'triplet', .* \\(got 'arcface'\\)"):
        train(tiny_config(tiny_data, tmp_path / "m", metric_loss="arcface"))


def test_unreadable_training_image_is_skipped_and_counted(tmp_path: Path) -> None:
    root = generate_synthetic(tmp_path / "d", TINY)
    bad = next((root / "bounding_box_train").glob("0001_*.jpg"))
    bad.write_bytes(b"not a jpeg")
    result = train(tiny_config(f"market1501:{root}", tmp_path / "m", epochs=1, max_steps=1))
    assert [p for p, _ in result.skipped_images] == [bad]
    assert "not a readable image" in result.skipped_images[0][1]


def test_model_trained_without_cross_entropy_loads(micro_data: str, tmp_path: Path) -> None:
    """Without cross-entropy the network has no classifier, and its card must say so."""
    out = tmp_path / "metric-only"
    train(tiny_config(micro_data, out, epochs=1, max_steps=1, ce_weight=0.0))
    network, card = load_model(out)
    assert card.num_classes == 0 and network.classifier is None
    assert load_encoder(out).embed([np.zeros((64, 32, 3), dtype=np.uint8)]).shape == (1, network.embedding_dim)


# Two fixed 2-epoch runs on MICRO (2 steps an epoch), with the learning rate of each step
# worked out from the schedule's definition (reid.engine.optim): warm-up from a tenth over
# the first epoch, then cosine to a hundredth (0.1, 0.55, 1, 0.505 of 1e-3); step decay by
# 0.5 at epoch 1 (1e-2, 1e-2, 5e-3, 5e-3).
SEEDED_RUNS = {
    "adam-warmup-cosine-triplet": (
        {"lr": 1e-3, "warmup_epochs": 1, "schedule": "cosine"},
        [1e-4, 5.5e-4, 1e-3, 5.05e-4],
    ),
    "sgd-step-softtriple-clip": (
        {"optimizer": "sgd", "lr": 1e-2, "warmup_epochs": 0, "schedule": "step", "milestones": (1,), "gamma": 0.5,
         "grad_clip": 1.0, "metric_loss": "softtriple", "metric_options": {"centers_per_class": 2}},
        [1e-2, 1e-2, 5e-3, 5e-3],
    ),
}


def trainer_steps(config: TrainConfig) -> list[tuple[float, float, float, float]]:
    """(loss, CE, metric, learning rate) of every step of ``train(config)``; the thread count is put back."""
    steps: list[tuple[float, float, float, float]] = []
    threads = torch.get_num_threads()
    try:
        train(config, TrainCallbacks(on_step=lambda s: steps.append((s.loss, s.ce, s.metric, s.lr))))
    finally:
        torch.set_num_threads(threads)
    return steps


def reference_steps(config: TrainConfig, lrs: list[float]) -> list[tuple[float, float, float]]:
    """(loss, CE, metric) of every step of ``config``'s run, computed here from the parts the
    trainer promises to combine: the seed drawn by the network, then the metric loss's
    centers; P x K batches of the seeded sampler; each epoch's augmentation from the seed
    ``seed * AUGMENT_SEED_STRIDE + epoch``; ``lrs`` given step by step; ``ce_weight * CE +
    metric_weight * metric``; the gradient clipped to ``grad_clip`` before the step."""
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        torch.manual_seed(config.seed)
        dataset = load_dataset(config.data)
        images, kept, _, _ = load_images(dataset.train, tuple(config.input_size))
        labels_list, _ = relabel([dataset.train[i] for i in kept])
        labels = torch.tensor(labels_list)
        classes = int(labels.max()) + 1
        network = ReidNet(config.architecture, classes, config.embedding_dim, config.pooling, config.last_stride)
        metric = build_metric(config, classes, network.embedding_dim)
        objective = TrainingObjective(network, metric, config, use_amp=False)
        optimizer = build_optimizer(config, network, metric)
        sampler = PKSampler(labels_list, config.p, config.k, seed=config.seed)
        generator = torch.Generator()
        objective.train()
        steps: list[tuple[float, float, float]] = []
        for epoch in range(config.epochs):
            generator.manual_seed(config.seed * AUGMENT_SEED_STRIDE + epoch)
            sampler.set_epoch(epoch)
            for batch_indices in sampler:
                for group in optimizer.param_groups:
                    group["lr"] = group["base_lr"] * lrs[len(steps)] / config.lr
                index = torch.tensor(batch_indices)
                batch = augment(images[index], network.input_mean, network.input_std, AugmentConfig(), generator,
                                (0, len(batch_indices)))  # fmt: skip
                loss, ce, metric_value = objective(batch, labels[index])
                steps.append((loss.item(), ce.item(), metric_value.item()))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if config.grad_clip:
                    torch.nn.utils.clip_grad_norm_(network.parameters(), config.grad_clip)
                optimizer.step()
        return steps
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("run", list(SEEDED_RUNS))
def test_same_seed_gives_the_same_losses_as_the_reference_computed_here(
    micro_data: str, tmp_path: Path, run: str
) -> None:
    """The trainer's promise, checked on whatever machine runs it (float sums differ between
    CPUs and BLAS builds, so no loss recorded on another machine is compared): the same seed
    gives the same losses twice, another seed gives others, and each step's losses are those
    of the reference loop computed here, with the learning rates of the schedule's definition."""
    changes, lrs = SEEDED_RUNS[run]
    config = tiny_config(micro_data, tmp_path / "a", epochs=2, threads=1, device="cpu", **changes)
    first = trainer_steps(config)
    again = trainer_steps(replace(config, out=tmp_path / "b"))
    assert first == again, f"{run}: the same seed gave {first} then {again}"
    other = trainer_steps(replace(config, out=tmp_path / "c", seed=config.seed + 1))
    assert [s[0] for s in other] != [s[0] for s in first], f"{run}: another seed gave the same losses"
    assert [s[3] for s in first] == pytest.approx(lrs, rel=1e-12)
    reference = reference_steps(config, lrs)
    assert len(first) == len(reference) == 4
    for step, (got, want) in enumerate(zip(first, reference, strict=True)):
        # Same machine, same thread count, same operations: equal up to the last bits.
        assert got[:3] == pytest.approx(want, rel=1e-5), f"{run} step {step + 1}: {got[:3]} != {want}"
        assert got[0] == pytest.approx(config.ce_weight * got[1] + config.metric_weight * got[2], rel=1e-6)


def test_divergence_without_cross_entropy_is_caught(micro_data: str, tmp_path: Path) -> None:
    """Mining compares distances, and a NaN compares false, so a metric loss alone can stay
    finite on NaN features; the objective must still report the divergence."""
    with pytest.raises(TrainingDiverged, match=r"loss became nan at epoch 1 step 2"):
        train(tiny_config(micro_data, tmp_path / "m", epochs=1, lr=1e30, ce_weight=0.0, device="cpu"))


def identity_folder(source: str, root: Path, per_identity: int | None = None, split: bool = False) -> Path:
    """An identity folder (ROOT/<identity>/<image>) made of a Market-layout set's training
    images; with ``split``, ROOT/train, ROOT/query and ROOT/gallery of different identities."""
    records = load_dataset(source).train
    by_pid: dict[int, list[Path]] = {}
    for record in records:
        by_pid.setdefault(record.pid, []).append(record.path)
    for n, (pid, paths) in enumerate(sorted(by_pid.items())):
        part = ("train" if n < len(by_pid) // 2 else ("query" if n % 2 else "gallery")) if split else ""
        folder = root / part / f"person{pid}"
        folder.mkdir(parents=True)
        for i, path in enumerate(paths[:per_identity]):
            (folder / f"c{i % 2 + 1}_{i}.jpg").write_bytes(path.read_bytes())
    if split:
        # Query and gallery hold the same held-out identities.
        for folder in list((root / "query").iterdir()):
            twin = root / "gallery" / folder.name
            twin.mkdir()
            for image in list(folder.iterdir())[1:]:
                image.rename(twin / image.name)
    return root


def test_evaluation_on_the_training_images_is_refused(tiny_data: str, tmp_path: Path) -> None:
    plain = identity_folder(tiny_data, tmp_path / "plain")
    steps: list[object] = []
    with pytest.raises(ConfigError, match=r"^eval_every 1: the query and gallery of folder:.* hold 32 of its training identities"):
        train(tiny_config(f"folder:{plain}", tmp_path / "m", eval_every=1), TrainCallbacks(on_step=steps.append))
    assert steps == [] and not (tmp_path / "m").exists()
    market = load_dataset(tiny_data)
    leaky = replace(market, query=market.train[:5])
    assert leaky.evaluation_overlap()[0] > 0 and not leaky.evaluation_split()["held_out"]
    assert market.evaluation_overlap() == (0, 0)


def test_an_evaluation_during_training_says_what_it_was_computed_on(tiny_data: str, tmp_path: Path) -> None:
    split = identity_folder(tiny_data, tmp_path / "split", split=True)
    result = train(tiny_config(f"folder:{split}", tmp_path / "m", epochs=1, eval_every=1, p=4, k=2))
    computed_on = result.history[-1]["eval"]["computed_on"]
    assert computed_on["held_out"] is True and computed_on["dataset"] == "folder"
    assert computed_on["query_images"] > 0 and computed_on["identities"] == 16
    assert 0 < result.history[-1]["coverage"] <= 1


def test_a_metric_loss_on_identities_of_one_image_is_refused(tiny_data: str, tmp_path: Path) -> None:
    singles = identity_folder(tiny_data, tmp_path / "singles", per_identity=1)
    for loss, options in (("triplet", {"mining": "hard"}), ("contrastive", {"margin": 0.5})):
        with pytest.raises(ConfigError, match=rf"every one of its 32 training identities has one image, so the metric loss \({loss}\)"):
            train(tiny_config(f"folder:{singles}", tmp_path / "m", metric_loss=loss, metric_options=options))
    assert not (tmp_path / "m").exists()


def test_an_epochs_coverage_is_recorded(micro_data: str, tmp_path: Path) -> None:
    starts: list[dict] = []
    result = train(tiny_config(micro_data, tmp_path / "m", epochs=1, p=4, k=4), TrainCallbacks(on_start=starts.append))
    drawn, total = starts[0]["coverage"]
    assert total == 32 and 0 < drawn <= total
    assert result.history[0]["coverage"] == pytest.approx(drawn / total)


def test_a_face_folder_trains_on_aligned_chips_and_verify_cuts_the_same(orl_faces: Path, tmp_path: Path) -> None:
    import cv2

    from reid.detect import build_detector
    from reid.detect.align import align_face
    from reid.detect.base import largest_detection
    from reid.pipeline import photo_rule

    root = tmp_path / "faces"
    for subject in (2, 5, 7, 11):
        (root / f"s{subject}").mkdir(parents=True)
        for shot in range(1, 5):
            shutil.copyfile(orl_faces / f"s{subject}" / f"{shot}.pgm", root / f"s{subject}" / f"{shot}.pgm")
    blank = root / "s2" / "blank.png"
    cv2.imwrite(str(blank), np.full((112, 92, 3), 128, np.uint8))
    config = tiny_config(f"folder:{root}", tmp_path / "model", input_size=(64, 64), k=2, epochs=1, max_steps=2, kind="face")
    result = train(config)

    card = load_encoder(str(tmp_path / "model")).card
    assert card.kind == "face" and card.face_alignment == "5-point" and card.aligned_face_size == (64, 64)
    assert card.training_data["faces_not_found"] == 1 and card.training_data["no_face"] == "skip"
    assert [(path, reason) for path, reason in result.skipped_images if path == blank] == [(blank, f"{blank}: no face found")]

    encoder = load_encoder(str(tmp_path / "model"))
    # What verify, calibrate and eval do by default ("auto"): the card asks for aligned chips.
    rule = photo_rule(aligned_face_size=encoder.aligned_face_size)
    photo_path = root / "s5" / "3.pgm"
    photo = read_image(photo_path)
    best = largest_detection(build_detector("yunet", "face").detect(photo))
    assert best is not None
    np.testing.assert_array_equal(rule.apply(photo, photo_path).crops[0], align_face(photo, best.landmarks, (64, 64)))
