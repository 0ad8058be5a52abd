"""The pure parts of the replay layer (settings, limiter, sum-tree, batch-repeat and log
arithmetic, argument checks, result records, the snapshot record and its file form, the table
protocols) import nothing of the in-process engine, so another backend can build on
them alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import aqueue

LAYER = Path(aqueue.__file__).parent / "_replay"
PURE = [
    "_selectors",
    "_limiter",
    "_sumtree",
    "_repeats",
    "_logs",
    "_checks",
    "_results",
    "_snapshot",
    "_protocol",
]
ENGINE = {
    "_store",
    "_ordered",
    "_selection",
    "_core",
    "_engine",
    "_ops",
    "_views",
    "_sampling",
    "_table",
}


def _replay_imports(module: str) -> set[str]:
    tree = ast.parse((LAYER / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_do_not_import_the_engine(module: str) -> None:
    """Each pure module imports only other pure modules of the layer."""
    assert _replay_imports(module) & ENGINE == set()


def test_the_lists_cover_the_layer() -> None:
    """Every module of the layer is classified (a new one must be placed here)."""
    modules = {p.stem for p in LAYER.glob("_*.py") if p.name != "__init__.py"}
    assert modules == set(PURE) | ENGINE
