"""What a model folder says about its training: card, recipe, history, figures, curves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reid.engine.config import CONFIG_FILE, TrainConfig, resolve_config
from reid.engine.history import CURVES_FILE, HISTORY_FILE, check_history, read_history, write_curves
from reid.errors import ModelError
from reid.models.card import CARD_FILE, ModelCard, load_card
from reid.models.folder import resolve_model_path


@dataclass
class ModelReport:
    """A model folder's training record.

    ``card`` is None while a run has not finished; ``recipe`` (from ``config.yaml``) is
    None for a model trained before recipes were saved; ``history`` comes from
    ``history.jsonl`` or, for such older models, from the card. ``curves_written`` says
    whether ``curves`` was drawn just now.
    """

    folder: Path
    card: ModelCard | None
    recipe: TrainConfig | None
    history: list[dict[str, Any]] = field(default_factory=list)
    curves: Path | None = None
    curves_written: bool = False

    @property
    def last_epoch(self) -> dict[str, Any] | None:
        return self.history[-1] if self.history else None

    @property
    def metrics(self) -> dict[str, Any]:
        """The latest ranking figures: the card's (they include an evaluation made after
        training, as the demo's), else the last evaluated epoch's; fractions 0..1."""
        if self.card is not None and self.card.metrics:
            return dict(self.card.metrics)
        return next((dict(entry["eval"]) for entry in reversed(self.history) if "eval" in entry), {})

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "card": None if self.card is None else self.card.to_dict(),
            "recipe": None if self.recipe is None else self.recipe.to_recipe(),
            "epochs_recorded": len(self.history),
            "last_epoch": self.last_epoch,
            "metrics": self.metrics,
            "curves": None if self.curves is None else str(self.curves),
            "curves_written": self.curves_written,
        }


def model_report(spec: str | Path) -> ModelReport:
    """Read the training record of a model folder (by path or by name under ``models/``)
    and draw ``curves.png`` when it is missing and there is a history to draw.

    Raises:
        ModelError: no such folder, or it holds none of card.json, config.yaml and
            history.jsonl, or one of them cannot be read; one line naming the file.
        ConfigError: config.yaml holds an unknown key or a bad value.
    """
    folder = resolve_model_path(spec)
    if not folder.is_dir():
        raise ModelError(f"{spec}: no such model folder")
    present = {name: (folder / name).is_file() for name in (CARD_FILE, CONFIG_FILE, HISTORY_FILE)}
    if not any(present.values()):
        raise ModelError(f"{folder}: not a model folder (no {CARD_FILE}, {CONFIG_FILE} or {HISTORY_FILE})")
    card = load_card(folder) if present[CARD_FILE] else None
    recipe = resolve_config(TrainConfig(), folder / CONFIG_FILE) if present[CONFIG_FILE] else None
    if present[HISTORY_FILE]:
        history = read_history(folder)
    else:
        history = check_history(card.training.get("history", []), str(folder / CARD_FILE)) if card is not None else []
    curves = folder / CURVES_FILE
    written = False
    if not curves.is_file() and history:
        write_curves(folder, history, card.name if card is not None else "")
        written = True
    return ModelReport(folder, card, recipe, history, curves if curves.is_file() else None, written)
