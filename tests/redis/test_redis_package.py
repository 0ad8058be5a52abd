"""The package's own maps and layers: ``aqueue.redis``'s docstring names every file and
folder it is made of, each folder's ``__init__.py`` docstring names every file of the
folder (as each layer's map is checked in tests/test_imports.py), and imports point
down: the server on top, the products, the core; no product imports another."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from test_imports import MODULES, resolve_imports

import aqueue.redis

ROOT = Path(aqueue.redis.__file__).parent
FOLDERS = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def _files(folder: Path) -> list[str]:
    """The modules and Lua files of ``folder`` (its ``__init__.py`` aside)."""
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.name.startswith("_") and p.suffix in (".py", ".lua") and p.name != "__init__.py"
    )


def test_the_package_docstring_maps_its_files_and_folders() -> None:
    """A module or folder added to aqueue/redis without a line in the package
    docstring's table fails."""
    doc = aqueue.redis.__doc__ or ""
    names = _files(ROOT) + [f"{d}/" for d in FOLDERS]
    assert len(FOLDERS) >= 3
    assert [n for n in names if f"``{n}``" not in doc] == []


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_folder_docstring_maps_its_files(folder: str) -> None:
    """A file added to a folder of aqueue/redis without a line in that folder's map
    fails."""
    doc = importlib.import_module(f"aqueue.redis.{folder}").__doc__ or ""
    files = _files(ROOT / folder)
    assert len(files) >= 3
    assert [f for f in files if f"``{f}``" not in doc] == []


def _imports(module: str) -> set[str]:
    path = ROOT.parent.parent / Path(*module.split("."))
    is_package = path.is_dir()
    source = (path / "__init__.py" if is_package else path.with_suffix(".py")).read_text()
    return resolve_imports(source, module, is_package, set(MODULES))


PRODUCTS = [f for f in FOLDERS if f != "_core"]
_BELOW = {"_core": [*PRODUCTS, "_server"], **{p: [*PRODUCTS, "_server"] for p in PRODUCTS}}


@pytest.mark.parametrize("folder", FOLDERS)
def test_imports_point_down(folder: str) -> None:
    """The core imports no product and not the server; a product imports no other
    product and not the server (type-only imports included)."""
    modules = [m for m in MODULES if m.startswith(f"aqueue.redis.{folder}.")]
    assert len(modules) >= 3
    banned = [f"aqueue.redis.{x}" for x in _BELOW[folder] if x != folder]
    bad = {
        m: sorted(t for t in _imports(m) if any(t == b or t.startswith(b + ".") for b in banned))
        for m in modules
    }
    assert {m: v for m, v in bad.items() if v} == {}
