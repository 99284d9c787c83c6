"""Training in several processes under PyTorch's own launcher (``torchrun``).

``torchrun`` starts one process per device and tells each who it is through the
environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``).
:func:`distributed_session` reads that, joins the process group (gloo on CPU, nccl on
CUDA with each process on ``cuda:LOCAL_RANK``) and leaves it again however training ends.
Without those variables, or with ``WORLD_SIZE=1``, there is no process group at all and
training runs exactly as in a single process.

:func:`gather_rows` puts the embeddings of every process into one global batch for losses
that mine inside a batch, and sends the gradient of each process's loss back to the rows
that process computed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from reid.errors import ConfigError, ConfigValueError, DataError, ReidError
from reid.models.folder import check_device, default_device, parse_device

T = TypeVar("T")

LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


@dataclass(frozen=True)
class Launch:
    """Who this process is, as the launcher's environment says."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0


def read_launch(env: Mapping[str, str] | None = None) -> Launch:
    """This process's rank, world size and rank on its machine from ``torchrun``'s variables."""
    env = os.environ if env is None else env
    if "WORLD_SIZE" not in env:
        return Launch()
    values = {}
    for name in LAUNCH_VARIABLES:
        text = env.get(name, "0")
        try:
            values[name] = int(text)
        except ValueError:
            raise ConfigError(f"environment variable {name}={text!r} is not an integer; start several processes with torchrun") from None
    launch = Launch(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"])
    if launch.world_size < 1 or not 0 <= launch.rank < launch.world_size or launch.local_rank < 0:
        raise ConfigError(
            f"RANK={launch.rank}, LOCAL_RANK={launch.local_rank} and WORLD_SIZE={launch.world_size} do not fit together"
        )
    return launch


def is_main_process(env: Mapping[str, str] | None = None) -> bool:
    """Whether this is rank 0, the process that prints and writes files."""
    return read_launch(env).rank == 0


@dataclass
class DistributedContext:
    """This process's place in a training run; one process and no group when ``world_size`` is 1."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    backend: str | None = None

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.distributed:
            if self.device.type == "cuda":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()

    def broadcast(self, value: T) -> T:
        """Rank 0's ``value`` on every process."""
        if not self.distributed:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0, device=self.device if self.backend == "nccl" else None)
        return box[0]

    def gather_objects(self, value: T) -> list[T]:
        """Every process's ``value``, in rank order."""
        if not self.distributed:
            return [value]
        values: list[Any] = [None] * self.world_size
        dist.all_gather_object(values, value)
        return values

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """The element-wise mean of ``values`` over the processes (detached)."""
        if not self.distributed:
            return values.detach()
        total = values.detach().clone()
        dist.all_reduce(total)
        return total / self.world_size

    def rank_zero_first(self, load: Callable[[], T]) -> T:
        """Run ``load`` on rank 0, then on the first process of every other machine, then on
        the rest, so that data written on first use (the synthetic set) is written by one
        process per file system while the others wait; an error on rank 0 stops every process."""
        if not self.distributed:
            return load()
        result: Any = None
        error: Exception | None = None
        if self.is_main:
            try:
                result = load()
            except ReidError as exc:
                error = exc
        error = self.broadcast(error)
        if error is not None:
            raise error
        if not self.is_main and self.local_rank == 0:
            result = load()
        self.barrier()
        if self.local_rank != 0:
            result = load()
        return result

    def check_same(self, value: Any, what: str) -> None:
        """Raise DataError unless every process holds the same ``value``."""
        values = self.gather_objects(value)
        if any(v != values[0] for v in values):
            raise DataError(
                f"{what} differs between processes ({', '.join(map(str, values))} by rank); "
                "every machine needs the same data set at the same path"
            )


def _device(requested: str | None, launch: Launch) -> torch.device:
    name = requested or default_device()
    device = parse_device(name)
    if launch.world_size == 1 or device.type == "cpu":
        return check_device(name)
    if device.type != "cuda":
        raise ConfigValueError("device", f"{name}: training in several processes runs on cpu (gloo) or cuda (nccl)", sep=" ")
    if device.index is not None:
        raise ConfigValueError(
            "device", f"{name}: under torchrun each process uses cuda:LOCAL_RANK; give cuda or leave it out", sep=" "
        )
    check_device(name)
    if launch.local_rank >= torch.cuda.device_count():
        raise ConfigError(
            f"LOCAL_RANK={launch.local_rank} but this machine has {torch.cuda.device_count()} CUDA devices; "
            "--nproc_per_node must not exceed the GPUs per machine"
        )
    return torch.device("cuda", launch.local_rank)


def plan_context(device: str | None, sync_bn: bool = False, env: Mapping[str, str] | None = None) -> DistributedContext:
    """The context the launcher's environment asks for, checked but not yet joined."""
    launch = read_launch(env)
    chosen = _device(device, launch)
    if launch.world_size == 1:
        return DistributedContext(device=chosen)
    env = os.environ if env is None else env
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not env.get(name)]
    if missing:
        raise ConfigError(f"WORLD_SIZE={launch.world_size} but {' and '.join(missing)} not set; start several processes with torchrun")
    if not dist.is_available():
        raise ConfigError("this PyTorch build has no torch.distributed; train in one process")
    if sync_bn and chosen.type != "cuda":
        raise ConfigValueError(
            "sync_bn",
            "needs CUDA: PyTorch's SyncBatchNorm does not run on CPU; "
            "leave it out and each process normalizes over its own P x K batch",
            sep=" ",
        )
    backend = "nccl" if chosen.type == "cuda" else "gloo"
    return DistributedContext(launch.rank, launch.world_size, launch.local_rank, chosen, backend)


@contextlib.contextmanager
def distributed_session(
    device: str | None, sync_bn: bool = False, env: Mapping[str, str] | None = None
) -> Iterator[DistributedContext]:
    """Join the process group the launcher set up, and leave it on exit or error.

    A process group the caller has already initialized is used as it is and left alone.
    """
    if dist.is_available() and dist.is_initialized():
        launch = read_launch(env)
        world_size = dist.get_world_size()
        chosen = _device(device, Launch(dist.get_rank(), world_size, launch.local_rank))
        if sync_bn and world_size > 1 and chosen.type != "cuda":
            raise ConfigValueError("sync_bn", "needs CUDA: PyTorch's SyncBatchNorm does not run on CPU", sep=" ")
        yield DistributedContext(dist.get_rank(), world_size, launch.local_rank, chosen, str(dist.get_backend()))
        return
    context = plan_context(device, sync_bn, env)
    if not context.distributed:
        yield context
        return
    if context.device.type == "cuda":
        torch.cuda.set_device(context.device)
    dist.init_process_group(
        context.backend, init_method="env://", rank=context.rank, world_size=context.world_size,
    )
    try:
        yield context
    finally:
        dist.destroy_process_group()


class _GatherRows(torch.autograd.Function):
    """All-gather along the first dimension whose backward sums, over the processes, the
    gradient each one's loss sends to this process's rows."""

    @staticmethod
    def forward(ctx: Any, local: torch.Tensor) -> torch.Tensor:
        ctx.rank, ctx.rows = dist.get_rank(), local.shape[0]
        parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, local.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        # Every process's loss depends on every process's rows, so each row's gradient is
        # the sum over processes; the clone keeps autograd's buffer untouched.
        total = grad.contiguous().clone()
        dist.all_reduce(total)
        return total[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def gather_rows(local: torch.Tensor) -> torch.Tensor:
    """The rows of every process, in rank order (every process must pass as many rows).

    Differentiable for float tensors: the gradient of each process's loss with respect to
    any row flows back to the process that computed that row.  When every process computes
    the same loss L on the gathered rows, this process's rows receive ``world_size * dL/drow``
    and DistributedDataParallel's mean over processes turns that into exactly ``dL/dθ``, the
    gradient one process would compute on the whole batch.
    """
    if local.is_floating_point():
        return _GatherRows.apply(local)
    parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, local.contiguous())
    return torch.cat(parts)
