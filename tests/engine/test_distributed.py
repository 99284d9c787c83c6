"""Training in several processes: real gloo process groups on CPU.

Each run starts its processes with a hand-made torchrun environment (the worker script
beside this file) and, to show that only rank 0 writes, runs every rank in its own working
folder with a relative ``--out``.  The single-process reference trains on the same global
batches; its BatchNorm layers normalize each process's share of the batch separately,
because that is what unsynchronized BatchNorm does in each process (SyncBatchNorm, which
would make the two identical, has no CPU implementation in PyTorch).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import reid.engine.trainer as trainer_module
from reid.data import SyntheticConfig, generate_synthetic, load_dataset, relabel
from reid.data.sampler import PKSampler
from reid.engine import TrainConfig, train
from reid.engine.distributed import DistributedContext, distributed_session, plan_context, read_launch
from reid.engine.trainer import CHECKPOINT_FILE
from reid.errors import ConfigError
from reid.models.network import ReidNet

WORKER = Path(__file__).with_name("distributed_worker.py")
ROOT = Path(__file__).resolve().parents[2]
MICRO = SyntheticConfig(seed=12, train_ids=8, test_ids=4, cameras_per_id=(2, 2), images_per_camera=(2, 2), distractors=0, junk=0)
# Measured on this set (4 steps, SGD, lr 1e-4): the distance between the two-process and the
# one-process weights is 0.04% (cross-entropy only), 0.15% (with the gathered triplet) and
# 1.7% (gathered triplet alone, where float rounding flips one mined triplet) of how far
# training moved them; leaving out the gather (a different loss) gives 84%, a reference with
# BatchNorm over the whole global batch 125%.  SGD rather than Adam: Adam's normalized step
# turns rounding noise in near-zero gradients into full-size steps.
RELATIVE_TOLERANCE = 0.05


@pytest.fixture(scope="module")
def micro_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """8 training identities x 4 images: with P=2 x K=2 on each of 2 processes, 4 steps an epoch."""
    return "market1501:" + str(generate_synthetic(tmp_path_factory.mktemp("micro"), MICRO))


def base_config(data: str, **changes: Any) -> TrainConfig:
    config = TrainConfig(
        data=data, out=Path("run"), architecture="resnet18", pretrained=None, input_size=(64, 32),
        p=2, k=2, epochs=1, optimizer="sgd", lr=1e-4, warmup_epochs=0, schedule="constant", threads=1,
    )
    return replace(config, **changes)


def steps_in_epoch(data: str, p: int, k: int, epoch: int) -> int:
    """Global steps of one epoch; the count varies a little from epoch to epoch."""
    labels, _ = relabel(load_dataset(data).train)
    sampler = PKSampler(labels, p, k)
    sampler.set_epoch(epoch)
    return len(sampler)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_processes(config: TrainConfig, world_size: int, where: Path) -> list[dict[str, Any]]:
    """Train ``config`` in ``world_size`` processes, rank r in ``where/rank{r}``; what each holds at the end."""
    where.mkdir(parents=True, exist_ok=True)
    config_file = where / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    port = free_port()
    processes = []
    for rank in range(world_size):
        folder = where / f"rank{rank}"
        folder.mkdir(exist_ok=True)
        env = {
            **os.environ, "RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        log = open(where / f"rank{rank}.log", "w")
        processes.append((subprocess.Popen(
            [sys.executable, str(WORKER), str(config_file), str(where / f"result{rank}.pt")],
            cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
        ), log))
    try:
        codes = [process.wait(timeout=600) for process, _ in processes]
    finally:
        for process, log in processes:
            if process.poll() is None:
                process.kill()
            log.close()
    logs = "\n".join((where / f"rank{r}.log").read_text()[-3000:] for r in range(world_size))
    assert codes == [0] * world_size, logs
    return [torch.load(where / f"result{rank}.pt", weights_only=False) for rank in range(world_size)]


class _PerProcessBatchNorm:
    """Mixed into a BatchNorm class: in training, each of ``chunks`` equal parts of the batch
    is normalized over itself, as each DDP process's own BatchNorm does with its share."""

    chunks = 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return super().forward(x)  # type: ignore[misc]
        return torch.cat([super(_PerProcessBatchNorm, self).forward(part) for part in x.chunk(self.chunks)])  # type: ignore[misc]


def per_process_bn_network(*args: Any, **kwargs: Any) -> ReidNet:
    network = ReidNet(*args, **kwargs)
    for module in network.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            # Swapping the class keeps the parameters, buffers and state_dict keys as they are.
            module.__class__ = type(f"PerProcess{type(module).__name__}", (_PerProcessBatchNorm, type(module)), {})
    return network


def reference_run(config: TrainConfig, out: Path, world_size: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, torch.Tensor]:
    """One process trained on the global batches (P = world_size * P), its BatchNorm per share."""
    with monkeypatch.context() as patch:
        patch.setattr(trainer_module, "ReidNet", per_process_bn_network)
        result = train(replace(config, p=config.p * world_size, out=out, threads=2))
    assert result.network is not None
    return {name: p.detach() for name, p in result.network.named_parameters()}


def initial_parameters(config: TrainConfig, num_classes: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(config.seed)
    network = ReidNet(config.architecture, num_classes=num_classes if config.ce_weight > 0 else 0)
    return {name: p.detach() for name, p in network.named_parameters()}


def relative_distance(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], start: dict[str, torch.Tensor]) -> float:
    """|a - b| / |b - start| over all parameters together."""
    gap = torch.cat([(a[k] - b[k]).flatten() for k in b]).norm()
    moved = torch.cat([(b[k] - start[k]).flatten() for k in b]).norm()
    return float(gap / moved)


def test_two_processes_match_one_process_on_the_global_batch(micro_data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = base_config(micro_data, gather_embeddings=True)
    ranks = run_processes(config, 2, tmp_path / "ddp")

    zero, one = ranks
    assert zero["parameters"].keys() == one["parameters"].keys()
    for name, value in zero["parameters"].items():
        assert torch.equal(value, one["parameters"][name]), f"{name} differs between the ranks"
    timing = "images_per_second"
    assert [{k: v for k, v in h.items() if k != timing} for h in zero["history"]] == [
        {k: v for k, v in h.items() if k != timing} for h in one["history"]
    ], "every rank reports the loss averaged over the processes"
    assert zero["fingerprint"] == one["fingerprint"]
    assert [h["world_size"] for h in zero["history"]] == [2]
    assert len(zero["losses"]) == 4 and one["losses"] == [], "only rank 0 reports progress"

    written = tmp_path / "ddp" / "rank0" / "run"
    assert {p.name for p in written.iterdir()} >= {"weights.pt", "card.json", CHECKPOINT_FILE}
    assert list((tmp_path / "ddp" / "rank1").iterdir()) == [], "rank 1 must not write files"
    saved = torch.load(written / "weights.pt", weights_only=True)
    assert all(torch.equal(saved[k], v) for k, v in zero["parameters"].items())
    checkpoint = torch.load(written / CHECKPOINT_FILE, weights_only=True)
    assert not any(k.startswith("module.") for k in checkpoint["model"]), "the checkpoint holds the unwrapped network"
    assert checkpoint["world_size"] == 2 and checkpoint["global_step"] == 4

    reference = reference_run(config, tmp_path / "one", 2, monkeypatch)
    start = initial_parameters(config, num_classes=8)
    assert relative_distance(zero["parameters"], reference, start) < RELATIVE_TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("changes", [
    {"metric_weight": 0.0},
    {"ce_weight": 0.0, "gather_embeddings": True},
], ids=["cross-entropy only", "triplet only, gathered"])
def test_other_objectives_match_one_process(micro_data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any]) -> None:
    config = base_config(micro_data, **changes)
    zero, one = run_processes(config, 2, tmp_path / "ddp")
    assert all(torch.equal(v, one["parameters"][k]) for k, v in zero["parameters"].items())
    reference = reference_run(config, tmp_path / "one", 2, monkeypatch)
    start = initial_parameters(config, num_classes=8)
    assert relative_distance(zero["parameters"], reference, start) < RELATIVE_TOLERANCE


@pytest.mark.slow
def test_without_gather_the_metric_loss_sees_only_the_local_batch(micro_data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = base_config(micro_data)
    zero, one = run_processes(config, 2, tmp_path / "ddp")
    assert all(torch.equal(v, one["parameters"][k]) for k, v in zero["parameters"].items())
    reference = reference_run(config, tmp_path / "one", 2, monkeypatch)
    start = initial_parameters(config, num_classes=8)
    assert relative_distance(zero["parameters"], reference, start) > 10 * RELATIVE_TOLERANCE


@pytest.mark.slow
def test_resume_with_fewer_processes(micro_data: str, tmp_path: Path) -> None:
    first = base_config(micro_data, epochs=1)
    run_processes(first, 2, tmp_path / "ddp")
    out = tmp_path / "ddp" / "rank0" / "run"
    # Twice the P in one process keeps the global batch, so the second epoch's data are the same.
    resumed = train(replace(first, out=out, p=4, epochs=2, resume=True, threads=2))
    assert [h["epoch"] for h in resumed.history] == [1, 2]
    assert [h["world_size"] for h in resumed.history] == [2, 1]
    checkpoint = torch.load(out / CHECKPOINT_FILE, weights_only=True)
    steps = steps_in_epoch(micro_data, 4, 2, 0) + steps_in_epoch(micro_data, 4, 2, 1)
    assert checkpoint["epoch"] == 1 and checkpoint["world_size"] == 1 and checkpoint["global_step"] == steps


@pytest.mark.slow
def test_resume_with_more_processes(micro_data: str, tmp_path: Path) -> None:
    out = tmp_path / "ddp" / "rank0" / "run"
    train(base_config(micro_data, out=out, p=4, epochs=1, threads=2))
    before = torch.load(out / CHECKPOINT_FILE, weights_only=True)
    # Rank 1's folder has no checkpoint: it resumes from the copy rank 0 sends.
    zero, one = run_processes(base_config(micro_data, epochs=2, resume=True), 2, tmp_path / "ddp")
    assert [h["epoch"] for h in zero["history"]] == [1, 2] == [h["epoch"] for h in one["history"]]
    assert [h["world_size"] for h in zero["history"]] == [1, 2]
    assert all(torch.equal(v, one["parameters"][k]) for k, v in zero["parameters"].items())
    assert any(not torch.equal(v, before["model"][k]) for k, v in zero["parameters"].items())
    assert list((tmp_path / "ddp" / "rank1").iterdir()) == []
    after = torch.load(out / CHECKPOINT_FILE, weights_only=True)
    steps = steps_in_epoch(micro_data, 4, 2, 0) + steps_in_epoch(micro_data, 4, 2, 1)
    assert after["epoch"] == 1 and after["world_size"] == 2 and after["global_step"] == steps


@pytest.mark.slow
def test_torchrun_runs_the_train_command(micro_data: str, tmp_path: Path) -> None:
    out, summary = tmp_path / "m", tmp_path / "train.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    completed = subprocess.run([
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        "-m", "reid", "train", "--data", micro_data, "--out", str(out), "--arch", "resnet18", "--pretrained", "none",
        "--size", "64x32", "-P", "2", "--k", "2", "--epochs", "1", "--threads", "1", "--gather-embeddings",
        "--eval-every", "1", "--json", str(summary),
    ], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-3000:]
    assert output.count("model written to") == 1, output[-3000:]
    assert "in 2 processes (gloo, 8 images per step)" in output
    report = json.loads(summary.read_text())
    assert report["world_size"] == 2 and report["history"][0]["world_size"] == 2
    assert "eval" in report["history"][0]
    card = json.loads((out / "card.json").read_text())
    assert card["training"]["gather_embeddings"] is True and card["fingerprint"] == report["fingerprint"]


@pytest.mark.slow
def test_errors_under_torchrun_fail_every_process_alike(micro_data: str, tmp_path: Path) -> None:
    """A bad data path fails on rank 0 and stops rank 1 with the same message instead of a hang."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    port = free_port()
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "reid", "train", "--data", f"market1501:{tmp_path / 'missing'}", "--out", "run",
             "--arch", "resnet18", "--pretrained", "none", "--quiet"],
            cwd=tmp_path, env={**env, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for rank in range(2)
    ]
    try:
        outputs = [process.communicate(timeout=300)[0] for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert [process.returncode for process in processes] == [1, 1], outputs
    for output in outputs:
        assert "dataset folder not found" in output and len(output.strip().splitlines()) == 1, output


def test_launch_environment() -> None:
    assert read_launch({}) == read_launch({"WORLD_SIZE": "1"})
    launch = read_launch({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
    assert (launch.rank, launch.world_size, launch.local_rank) == (3, 4, 1)
    with pytest.raises(ConfigError, match="RANK=4, LOCAL_RANK=0 and WORLD_SIZE=4 do not fit together"):
        read_launch({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(ConfigError, match="WORLD_SIZE='two' is not an integer"):
        read_launch({"WORLD_SIZE": "two"})


def test_one_process_has_no_process_group() -> None:
    with distributed_session("cpu", sync_bn=True, env={}) as context:
        assert context == DistributedContext(device=torch.device("cpu"))
        assert not torch.distributed.is_initialized()
        assert context.broadcast({"a": 1}) == {"a": 1} and context.gather_objects(2) == [2]
        assert torch.equal(context.mean(torch.tensor([1.0, 2.0])), torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("device,sync_bn,env,message", [
    ("cpu", True, {}, "^sync_bn needs CUDA: PyTorch's SyncBatchNorm does not run on CPU"),
    ("cpu", False, {"MASTER_ADDR": ""}, "MASTER_ADDR not set; start several processes with torchrun"),
    ("cuda:1", False, {}, "^device cuda:1: under torchrun each process uses cuda:LOCAL_RANK; give cuda"),
    ("mps", False, {}, "runs on cpu (gloo) or cuda (nccl)"),
])
def test_distributed_configuration_errors(device: str, sync_bn: bool, env: dict[str, str], message: str) -> None:
    launch = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", **env}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_context(device, sync_bn, launch)


def test_gloo_context_for_cpu() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    context = plan_context("cpu", env=env)
    assert (context.rank, context.world_size, context.backend, context.device) == (1, 2, "gloo", torch.device("cpu"))
    assert context.distributed and not context.is_main
