"""Reading checkpoint files: bounded, ``weights_only=True`` (a pickled whole model is
refused with one line, never unpickled), unwrapped.

A bare state_dict; one wrapped as ``{"state_dict": ...}`` or ``{"model": ...}``;
``module.`` prefixes from DataParallel. What the names mean, and where each tensor goes in
a :class:`~reid.models.network.ReidNet`, is the business of :mod:`reid.models.formats`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from reid.errors import ConfigError, ModelError
from reid.paths import check_archive


# Bounds of a checkpoint file, checked before it is unpacked: a ResNet-152 with its
# optimizer state is under 1 GB and 3,000 tensors; a state_dict of any network here has
# fewer than 5,000 entries.
MAX_CHECKPOINT_BYTES = 4 << 30
MAX_CHECKPOINT_MEMBERS = 50_000
MAX_STATE_KEYS = 20_000


def load_checkpoint_file(path: Path, what: str = "checkpoint", unreadable: str = "not a PyTorch checkpoint") -> Any:
    """What ``torch.load`` reads from ``path`` (``weights_only=True``: tensors and plain
    values, never pickled code), after the file's size, its unpacked size and its number
    of entries are checked (:func:`reid.paths.check_archive`).

    Raises:
        ModelError: the file is too large, unpacks too large, or is not a readable
            checkpoint; one line naming it.
    """
    path = Path(path)
    try:
        check_archive(path, MAX_CHECKPOINT_BYTES, MAX_CHECKPOINT_MEMBERS, what)
    except ConfigError as exc:
        raise ModelError(str(exc)) from None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise _unreadable(path, exc, unreadable) from None


def check_tensors(state: dict[str, Any], path: Path) -> dict[str, torch.Tensor]:
    """``state``'s entries when they are a state_dict one can compute with: at most
    :data:`MAX_STATE_KEYS` keys, every value a dense tensor with storage (not meta, not
    sparse or quantized), not complex (copied into float weights, its imaginary part would
    be dropped).

    Raises:
        ModelError: naming the file and the first entry that is not.
    """
    if len(state) > MAX_STATE_KEYS:
        raise ModelError(f"{path}: {len(state):,} entries, more than the {MAX_STATE_KEYS:,} a network's state_dict may have")
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            continue
        if value.is_meta or value.layout != torch.strided or value.is_quantized:
            kind = "a meta tensor (no values)" if value.is_meta else f"a {value.layout} tensor"
            raise ModelError(f"{path}: {key} is {kind}; a checkpoint holds dense tensors")
        if value.is_complex():
            raise ModelError(f"{path}: {key} holds {value.dtype} values; weights are real numbers")
    return state


def read_state(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint file, unwrapped and without ``module.`` prefixes.

    Raises ModelError (one line naming the file) for a missing file, a pickled whole
    model, a file that is not a PyTorch checkpoint, or one that holds no tensors.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: checkpoint file not found")
    loaded = load_checkpoint_file(path)
    state = loaded
    for wrapper in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    if not isinstance(state, dict) or not state:
        raise ModelError(f"{path}: holds {type(loaded).__name__ if not isinstance(loaded, dict) else 'no weights'}, not a state_dict")
    tensors = {str(k): v for k, v in check_tensors(state, path).items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise ModelError(f"{path}: a dict of {len(state)} entries without any tensor; not a state_dict")
    if all(k.startswith("module.") for k in tensors):
        tensors = {k.removeprefix("module."): v for k, v in tensors.items()}
    return tensors


def _unreadable(path: Path, exc: Exception, what: str = "not a PyTorch checkpoint") -> ModelError:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    pickled = re.search(r"GLOBAL ([\w.]+)", text)
    if pickled:
        return ModelError(
            f"{path}: a pickled whole model ({pickled.group(1)}), not weights; load it in its own code "
            "and save model.state_dict() instead"
        )
    return ModelError(f"{path}: {what} ({exc.__class__.__name__})")
