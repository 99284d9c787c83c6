"""What the app tests share: the public-import check and a tiny model."""

from __future__ import annotations

import ast
import importlib
import zlib
from pathlib import Path

from reid.models import stand_in_model

ROOT = Path(__file__).resolve().parents[2]


def reid_imports(app_folder: Path) -> list[tuple[str, str, str]]:
    """Every (file, module, name) an app imports from reid, by parsing its source."""
    found = []
    for path in sorted(app_folder.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "reid":
                found += [(path.name, node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(path.name, a.name, "") for a in node.names if a.name.split(".")[0] == "reid"]
    return found


def private_imports(app_folder: Path) -> list[str]:
    """Imports that reach past reid's public surface: anything but a name in the ``__all__``
    of ``reid`` itself or of one of its subpackages (``reid.data``, ``reid.models``, ...)."""
    problems = []
    for file, module, name in reid_imports(app_folder):
        parts = module.split(".")
        package = ROOT.joinpath(*parts)
        if not name:
            problems.append(f"{file}: 'import {module}' (import names from a reid subpackage instead)")
        elif len(parts) > 2 or not (package / "__init__.py").is_file():
            problems.append(f"{file}: {module} is not reid or one of its subpackages")
        elif name not in getattr(importlib.import_module(module), "__all__", ()):
            problems.append(f"{file}: {name} is not exported by {module}.__all__")
    return problems


def tiny_model(folder: Path, kind: str = "person", threshold: float | None = None) -> Path:
    """A ResNet-18 with random weights and a 64-d embedding, written as a model folder;
    models in different folders differ (their weights are seeded by the folder)."""
    size = (64, 32) if kind == "person" else (64, 64)
    seed = zlib.crc32(str(folder).encode())
    return stand_in_model(
        folder, kind, name=f"tiny-{kind}", embedding_dim=64, input_size=size, threshold=threshold, seed=seed
    )
