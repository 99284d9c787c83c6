"""Packages import their names on first use (reid.lazy): every name a package states is
there, from the module it names, and importing a package loads none of its engine."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reid.lazy import stated_names

ROOT = Path(__file__).resolve().parents[1]
LAZY = (
    "reid.data", "reid.detect", "reid.engine", "reid.evaluation", "reid.gallery", "reid.losses", "reid.models",
    "reid.pipeline", "reid.serve", "reid.track",
)  # fmt: skip


@pytest.mark.parametrize("package", LAZY)
def test_every_stated_and_exported_name_is_there(package: str) -> None:
    module = importlib.import_module(package)
    names = stated_names(package, Path(module.__file__).read_text(encoding="utf-8"))
    assert names, "the package states its names in an `if TYPE_CHECKING:` block"
    for name, (source, attribute) in names.items():
        found = importlib.import_module(source)
        assert getattr(module, name) is (found if attribute is None else getattr(found, attribute)), name
    assert set(module.__all__) <= set(names) | set(vars(module)), set(module.__all__) - set(names)
    assert sorted(names) == dir(module)


def test_a_submodule_is_an_attribute_and_an_unknown_name_an_attribute_error() -> None:
    import reid.detect

    assert reid.detect.names is importlib.import_module("reid.detect.names")
    with pytest.raises(AttributeError, match="no_such_name"):
        reid.detect.no_such_name  # noqa: B018


def test_stated_names_reads_only_the_type_checking_block() -> None:
    source = (
        "from typing import TYPE_CHECKING\nfrom reid.errors import ReidError\n"
        "if TYPE_CHECKING:\n    from reid.p.base import Box as B, Point\n    from reid.p import sub\n"
    )
    assert stated_names("reid.p", source) == {"B": ("reid.p.base", "Box"), "Point": ("reid.p.base", "Point"), "sub": ("reid.p.sub", None)}


def test_importing_the_packages_loads_no_engine() -> None:
    heavy = ("torch", "torchvision", "cv2", "faiss", "onnxruntime", "openvino")
    probe = f"import {', '.join(LAZY)}, json, sys\nprint(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120, check=True)
    assert json.loads(done.stdout) == []
