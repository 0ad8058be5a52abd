"""The package's own maps and layers: ``aqueue.redis``'s docstring names every file and
folder it is made of, each folder's ``__init__.py`` docstring names every file of the
folder (as each layer's map is checked in tests/test_imports.py), and imports point
down: the server on top, the products, the core; no product imports another."""

from __future__ import annotations

import importlib
import re
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


def _mapped(doc: str) -> list[str]:
    """The files and folders a docstring's table maps: the first column of its rows."""
    return sorted(re.findall(r"^``([^`]+)``\s{2,}", doc, flags=re.M))


def test_the_package_docstring_maps_its_files_and_folders() -> None:
    """The package docstring's table lists exactly the modules and folders of
    aqueue/redis: one added without a row, or a row left for one that went, fails."""
    names = _files(ROOT) + [f"{d}/" for d in FOLDERS]
    assert len(FOLDERS) >= 3
    assert _mapped(aqueue.redis.__doc__ or "") == sorted(names)


# Every private folder at any depth (``_core/_cluster`` too), as paths under ROOT.
PACKAGES = sorted(p.parent.relative_to(ROOT).as_posix() for p in ROOT.glob("_*/**/__init__.py"))


@pytest.mark.parametrize("folder", PACKAGES)
def test_each_folder_docstring_maps_its_files(folder: str) -> None:
    """A folder's docstring table lists exactly its files and folders: one added
    without a row, or a row left for one that went, fails."""
    path = ROOT / folder
    files = _files(path)
    assert len(files) >= 3
    entries = files + [f"{d.name}/" for d in path.iterdir() if (d / "__init__.py").exists()]
    module = importlib.import_module("aqueue.redis." + folder.replace("/", "."))
    assert _mapped(module.__doc__ or "") == sorted(entries)


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
