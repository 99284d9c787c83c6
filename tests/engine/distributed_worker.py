"""One process of a test run under a hand-made torchrun environment.

``python distributed_worker.py CONFIG.json RESULT.pt`` trains with the TrainConfig fields in
CONFIG.json (the test sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT) and
saves what this process holds at the end: its parameters, buffers and history.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from reid.engine import TrainCallbacks, TrainConfig, train


def main(config_file: str, result_file: str) -> None:
    fields = json.loads(Path(config_file).read_text())
    fields["input_size"] = tuple(fields["input_size"])
    fields["milestones"] = tuple(fields["milestones"])
    losses: list[float] = []
    result = train(TrainConfig(**fields), TrainCallbacks(on_step=lambda step: losses.append(step.loss)))
    assert result.network is not None
    torch.save({
        "parameters": {name: p.detach().cpu() for name, p in result.network.named_parameters()},
        "buffers": {name: b.detach().cpu() for name, b in result.network.named_buffers()},
        "history": result.history,
        "losses": losses,
        "rank": result.rank,
        "world_size": result.world_size,
        "fingerprint": result.card.fingerprint,
    }, result_file)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
