"""Training configuration."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reid.errors import ConfigError


@dataclass
class TrainConfig:
    """Everything ``reid train`` can set; defaults are the BNNeck strong baseline (Luo et al. 2019)."""

    data: str = "synthetic"
    out: Path = Path("models/reid")
    name: str = ""
    architecture: str = "resnet50"
    pretrained: str | None = "imagenet"
    pooling: str = "avg"
    last_stride: int = 1
    embedding_dim: int | None = None
    input_size: tuple[int, int] = (256, 128)
    p: int = 16
    k: int = 4
    epochs: int = 60
    max_steps: int | None = None
    optimizer: str = "adam"
    lr: float = 3.5e-4
    weight_decay: float = 5e-4
    momentum: float = 0.9
    warmup_epochs: int = 10
    schedule: str = "step"
    milestones: tuple[int, ...] = (40, 70)
    gamma: float = 0.1
    grad_clip: float | None = None
    amp: bool = True
    seed: int = 0
    ce_weight: float = 1.0
    label_smoothing: float = 0.1
    metric_loss: str = "triplet"
    metric_options: dict[str, Any] = field(default_factory=lambda: {"mining": "hard", "margin": 0.3})
    metric_weight: float = 1.0
    eval_every: int = 0
    eval_batch_size: int = 128
    resume: bool = False
    device: str | None = None
    threads: int | None = None
    # Used only when torchrun starts several processes; see docs/scaling.md.
    sync_bn: bool = False
    gather_embeddings: bool = False

    def validate(self) -> None:
        if self.epochs < 1:
            raise ConfigError(f"--epochs must be at least 1 (got {self.epochs})")
        if self.optimizer not in ("adam", "adamw", "sgd"):
            raise ConfigError(f"--optimizer {self.optimizer!r}: choose adam, adamw or sgd")
        if self.schedule not in ("step", "cosine", "constant"):
            raise ConfigError(f"--schedule {self.schedule!r}: choose step, cosine or constant")
        if self.ce_weight < 0 or self.metric_weight < 0 or self.ce_weight + self.metric_weight == 0:
            raise ConfigError("loss weights must be >= 0 and not both 0 (--ce-weight, --metric-weight)")
        if self.lr <= 0:
            raise ConfigError(f"--lr must be positive (got {self.lr})")
        if len(self.input_size) != 2 or min(self.input_size) < 16:
            raise ConfigError(f"--size must be HxW with both at least 16 (got {self.input_size})")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["out"] = str(self.out)
        data["input_size"] = list(self.input_size)
        data["milestones"] = list(self.milestones)
        return data
