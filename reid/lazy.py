"""Packages whose names are imported on first use: ``from reid.detect import Box`` imports
:mod:`reid.detect.base` then, and importing :mod:`reid.detect.names` (no OpenCV) does not
import the detectors (OpenCV), so that a command's help loads no engine.

A package states its names once, as the imports of an ``if TYPE_CHECKING:`` block (which
type checkers read); :func:`lazy_names` reads that block from the package's source and
returns the ``__getattr__`` and ``__dir__`` that import each name when it is first asked for.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def stated_names(package: str, source: str) -> dict[str, tuple[str, str | None]]:
    """The names the ``if TYPE_CHECKING:`` blocks of ``source`` (package ``package``'s
    ``__init__``) import, each as (module, attribute): ``from reid.detect.base import Box``
    gives ``{"Box": ("reid.detect.base", "Box")}``, ``from reid.gallery import thumbnails``
    ``{"thumbnails": ("reid.gallery.thumbnails", None)}`` (a module)."""
    names: dict[str, tuple[str, str | None]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom) or statement.module is None:
                continue
            for alias in statement.names:
                if statement.module == package:
                    names[alias.asname or alias.name] = (f"{package}.{alias.name}", None)
                else:
                    names[alias.asname or alias.name] = (statement.module, alias.name)
    return names


class LazyPackage(types.ModuleType):
    """A package whose stated names win over its submodules of the same name: importing
    ``reid.pipeline.enrol`` (the module) leaves ``reid.pipeline.enrol`` the function the
    package states, as the eager ``from reid.pipeline.enrol import enrol`` did."""

    _stated: dict[str, tuple[str, str | None]]

    def __setattr__(self, name: str, value: Any) -> None:
        stated = self.__dict__.get("_stated", {})
        if isinstance(value, types.ModuleType) and stated.get(name, ("", None))[1] is not None:
            return
        super().__setattr__(name, value)


def lazy_names(package: str, init_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of package ``package`` (its ``__name__``),
    whose ``__init__`` is ``init_file`` (its ``__file__``): a name of its ``TYPE_CHECKING``
    imports (:func:`stated_names`) is imported when first asked for, as is a submodule.
    The package becomes a :class:`LazyPackage`."""
    names = stated_names(package, Path(init_file).read_text(encoding="utf-8"))
    module = sys.modules[package]
    module._stated = names
    module.__class__ = LazyPackage

    def __getattr__(name: str) -> Any:
        if name in names:
            source, attribute = names[name]
            found = importlib.import_module(source)
            value = found if attribute is None else getattr(found, attribute)
        elif importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # Kept, so that the next look-up is an attribute's.
        vars(module)[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
