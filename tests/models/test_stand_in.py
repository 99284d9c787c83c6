"""The untrained stand-in model every demo and test helper builds."""

from __future__ import annotations

from pathlib import Path

import torch

from reid.models import load_encoder, stand_in_model


def test_stand_in_models_are_seeded_and_leave_the_random_state_alone(tmp_path: Path) -> None:
    options = {"embedding_dim": 32, "input_size": (64, 64)}
    state = torch.random.get_rng_state()
    folders = [stand_in_model(tmp_path / name, "face", seed=seed, **options) for name, seed in zip("abc", (1, 1, 2))]
    assert torch.equal(torch.random.get_rng_state(), state)
    first, again, other = (load_encoder(folder) for folder in folders)
    assert first.card.kind == "face" and first.card.input_size == (64, 64) and first.dim == 32
    assert first.fingerprint == again.fingerprint != other.fingerprint
