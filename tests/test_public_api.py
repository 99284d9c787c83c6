"""The public API documents itself: every export says what it is, losses cite their paper
and say what they raise."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from reid.losses.registry import LOSS_NAMES, _LOSSES

PACKAGES = ("reid", "reid.losses", "reid.engine", "reid.evaluation", "reid.models", "reid.data", "reid.serve")


def exports(package: str) -> list[tuple[str, object]]:
    module = importlib.import_module(package)
    return [(name, getattr(module, name)) for name in module.__all__]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_class_and_function_has_a_docstring(package: str) -> None:
    missing = [
        name for name, obj in exports(package)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and not (obj.__doc__ or "").strip()
    ]
    assert missing == [], f"{package}: no docstring for {', '.join(missing)}"


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_every_loss_cites_its_paper_and_its_errors(name: str) -> None:
    doc = inspect.getdoc(_LOSSES[name]) or ""
    assert re.search(r"\b(19|20)\d\d\b", doc), f"{name}: no paper year"
    assert "(N, D)" in doc and "(N,)" in doc, f"{name}: no input shapes"
    assert "Raises:" in doc and "ConfigError" in doc and "BatchError" in doc, f"{name}: errors not named"
