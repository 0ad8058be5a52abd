"""Every module imports on its own, and the layers depend downwards only.

Two checks of the package's structure:

- *Imports alone.* Each module is imported in a fresh state (every ``aqueue`` entry
  cleared from ``sys.modules``), once as Python normally would (package ``__init__``
  files first) and once *isolated*: the enclosing packages are installed as empty
  stand-ins, so only the module itself and the modules it imports run, in the order
  it imports them. An import cycle that works only in the order the package
  ``__init__`` happens to use fails the isolated import. One subprocess per mode, both
  at once.
- *Layers point down.* Parsed with ``ast`` (relative imports resolved, imports under
  ``TYPE_CHECKING`` included): the layers, from the bottom, are the waiting kernel,
  queues, replay, running, input functions and pipeline, and each imports only the
  layers below it;
  no private layer imports the public package or its public subpackages.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import aqueue

ROOT = Path(aqueue.__file__).parent


def _discover() -> tuple[list[str], set[str]]:
    """All module names of the package, and which of them are packages."""
    names, packages = ["aqueue"], {"aqueue"}
    for info in pkgutil.walk_packages([str(ROOT)], prefix="aqueue.", onerror=lambda _: None):
        names.append(info.name)
        if info.ispkg:
            packages.add(info.name)
    if importlib.util.find_spec("redis") is None or importlib.util.find_spec("msgpack") is None:
        names = [n for n in names if n != "aqueue.redis" and not n.startswith("aqueue.redis.")]
    return sorted(names), packages


MODULES, PACKAGES = _discover()


def _source(name: str) -> Path:
    rel = Path(*name.split(".")[1:])
    return ROOT / rel / "__init__.py" if name in PACKAGES else (ROOT / rel).with_suffix(".py")


def _from_target(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` in ``package`` reads from, relative levels
    resolved."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def resolve_imports(
    source: str, name: str, is_package: bool, known: frozenset[str] | set[str] = frozenset()
) -> set[str]:
    """Every module name that ``source`` (module ``name``) imports, relative imports
    resolved. ``from X import y`` yields ``X.y`` when that is a ``known`` module, else
    ``X``."""
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _from_target(node, package)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
    return out


def _imports_of(name: str) -> set[str]:
    return resolve_imports(_source(name).read_text(), name, name in PACKAGES, set(MODULES))


def _within(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


# --------------------------------------------------------------------------------------
# Imports alone
# --------------------------------------------------------------------------------------

# Runs in a subprocess: argv[1] is the mode, argv[2] a JSON file naming the modules.
_IMPORTER = textwrap.dedent(
    """
    import importlib, importlib.util, json, os, sys, traceback

    mode = sys.argv[1]
    with open(sys.argv[2]) as f:
        job = json.load(f)
    root, packages, public_users = job["root"], set(job["packages"]), set(job["public_users"])

    def stand_in(pkg):
        path = os.path.join(os.path.dirname(root), *pkg.split("."))
        spec = importlib.util.spec_from_file_location(
            pkg, os.path.join(path, "__init__.py"), submodule_search_locations=[path]
        )
        module = importlib.util.module_from_spec(spec)  # not executed
        sys.modules[pkg] = module
        parent, _, child = pkg.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, module)

    failures = {}
    for name in job["modules"]:
        for key in [k for k in sys.modules if k == "aqueue" or k.startswith("aqueue.")]:
            del sys.modules[key]
        try:
            if mode == "isolated":
                if ".".join(name.split(".")[:2]) in public_users:
                    importlib.import_module("aqueue")  # it builds on the public package
                for pkg in sorted(packages, key=len):
                    if pkg != name and pkg not in sys.modules:
                        stand_in(pkg)
            importlib.import_module(name)
        except BaseException:
            failures[name] = traceback.format_exc(limit=-3)
    print(json.dumps(failures))
    """
)


def _env(pycache: Path, path: list[str]) -> dict[str, str]:
    """The subprocess environment: ``path`` to import from, and compiled modules cached
    outside the source tree (each module is imported many times; compiling it again
    every time would take most of the run)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONPYCACHEPREFIX=str(pycache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _public_users() -> list[str]:
    """Top-level subpackages some module of which imports the public package itself
    (``import aqueue``): their isolated imports load the real package first."""
    users = set()
    for name in MODULES:
        parts = name.split(".")
        if len(parts) > 1 and f"aqueue.{parts[1]}" in PACKAGES and "aqueue" in _imports_of(name):
            users.add(f"aqueue.{parts[1]}")
    return sorted(users)


@pytest.fixture(scope="module")
def import_failures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Import every module alone, in both modes (two subprocesses side by side)."""
    tmp = tmp_path_factory.mktemp("imports")
    job = tmp / "job.json"
    job.write_text(
        json.dumps(
            {
                "root": str(ROOT),
                "modules": MODULES,
                "packages": sorted(PACKAGES),
                "public_users": _public_users(),
            }
        )
    )
    env = _env(tmp / "pycache", [str(ROOT.parent), *sys.path])
    procs = {
        mode: subprocess.Popen(
            [sys.executable, "-c", _IMPORTER, mode, str(job)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for mode in ("normal", "isolated")
    }
    results = {}
    for mode, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results[mode] = json.loads(out.strip().splitlines()[-1])
    return results


def test_modules_were_discovered() -> None:
    """The discovery finds the layers' modules (so the checks below are not vacuous)."""
    for name in (
        "aqueue._queues._engine",
        "aqueue._running._runner",
        "aqueue._pipeline.run._stages",
    ):
        assert name in MODULES


@pytest.mark.parametrize("mode", ["normal", "isolated"])
def test_every_module_imports_alone(mode: str, import_failures: dict[str, dict[str, str]]) -> None:
    """Each module imports in a fresh state, with the package ``__init__`` files run
    first (normal) or with only the modules it imports itself (isolated)."""
    failures = import_failures[mode]
    assert not failures, "\n".join(f"{name}:\n{tb}" for name, tb in failures.items())


def test_isolated_import_catches_an_order_dependent_cycle(tmp_path: Path) -> None:
    """The isolated mode fails a cycle that the normal order hides: ``b`` imports a name
    from ``a`` at its top, and ``a`` imports ``b`` after defining that name."""
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("X = 1\nfrom .b import Y\n")
    (pkg / "b.py").write_text("from .a import X\nY = X + 1\n")
    job = tmp_path / "job.json"
    job.write_text(
        json.dumps(
            {
                "root": str(pkg),
                "modules": ["cyc.a", "cyc.b"],
                "packages": ["cyc"],
                "public_users": [],
            }
        )
    )
    script = _IMPORTER.replace('k == "aqueue" or k.startswith("aqueue.")', 'k.startswith("cyc")')
    results = {}
    for mode in ("normal", "isolated"):
        proc = subprocess.run(
            [sys.executable, "-c", script, mode, str(job)],
            capture_output=True,
            text=True,
            env=_env(tmp_path / "pycache", [str(tmp_path)]),
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        results[mode] = sorted(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert results == {"normal": [], "isolated": ["cyc.b"]}


# --------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------


def test_resolve_imports_handles_relative_and_absolute_forms() -> None:
    """The resolver turns each import form into the module names it may load."""
    source = textwrap.dedent(
        """
        import numpy as np
        from typing import TYPE_CHECKING
        from .._errors import QueueError
        from . import _engine
        from ._spec import ElementSpec
        if TYPE_CHECKING:
            from .._pipeline._stages import Box
        def late():
            from .. import elsewhere
        """
    )
    known = {"aqueue._queues._engine"}
    got = resolve_imports(source, "aqueue._queues._queue", is_package=False, known=known)
    assert got == {
        "numpy",
        "typing",
        "aqueue._errors",
        "aqueue._queues._engine",
        "aqueue._queues._spec",
        "aqueue._pipeline._stages",
        "aqueue",
    }
    as_package = resolve_imports("from ._x import y\n", "aqueue._queues", is_package=True)
    assert as_package == {"aqueue._queues._x"}


def test_layer_checks_see_real_imports() -> None:
    """The parsed imports of real modules include their known dependencies."""
    assert "aqueue._queues._protocol" in _imports_of("aqueue._running._runner")
    assert "aqueue._queues._engine" in _imports_of("aqueue._queues._queue")
    assert "aqueue._running._runner" in _imports_of("aqueue._input._functions")
    assert "aqueue._input._epochs" in _imports_of("aqueue._pipeline.run._sources")
    assert "aqueue._pipeline.flow._turns" in _imports_of("aqueue._pipeline.process._driver")


_FORBIDDEN = {
    "aqueue._waiting": (
        "aqueue._queues",
        "aqueue._replay",
        "aqueue._running",
        "aqueue._input",
        "aqueue._pipeline",
    ),
    "aqueue._queues": ("aqueue._replay", "aqueue._running", "aqueue._input", "aqueue._pipeline"),
    "aqueue._replay": ("aqueue._running", "aqueue._input", "aqueue._pipeline"),
    "aqueue._running": ("aqueue._input", "aqueue._pipeline"),
    "aqueue._input": ("aqueue._pipeline",),
}


@pytest.mark.parametrize("layer", sorted(_FORBIDDEN))
def test_layers_import_only_downwards(layer: str) -> None:
    """Each layer imports only the layers below it (waiting kernel < queues < replay <
    running < input functions < pipeline), type-only imports included."""
    modules = [n for n in MODULES if _within(n, layer)]
    assert len(modules) > 2
    bad = {
        name: sorted(t for t in _imports_of(name) if any(_within(t, f) for f in _FORBIDDEN[layer]))
        for name in modules
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_private_layers_do_not_import_the_public_package() -> None:
    """No module of a private layer imports the public package itself or a public
    subpackage: those sit on top of the layers."""
    private = [n for n in MODULES if n.startswith("aqueue._")]
    public_subpackages = [
        p for p in PACKAGES if p.count(".") == 1 and not p.split(".")[1].startswith("_")
    ]
    bad = {}
    for name in private:
        hits = sorted(
            t
            for t in _imports_of(name)
            if t == "aqueue" or any(_within(t, p) for p in public_subpackages)
        )
        if hits:
            bad[name] = hits
    assert bad == {}


# The pipeline's folders, from the bottom up: each imports only the ones before it.
_PIPELINE_FOLDERS = ("tune", "defs", "flow", "process", "run")


@pytest.mark.parametrize("folder", _PIPELINE_FOLDERS)
def test_pipeline_folders_import_only_downwards(folder: str) -> None:
    """Within the pipeline layer, defs < flow < process < run < ``_pipeline.py`` (the
    builder), type-only imports included: no folder imports one above it."""
    above = _PIPELINE_FOLDERS[_PIPELINE_FOLDERS.index(folder) + 1 :]
    forbidden = [f"aqueue._pipeline.{f}" for f in above] + ["aqueue._pipeline._pipeline"]
    modules = [n for n in MODULES if _within(n, f"aqueue._pipeline.{folder}")]
    assert len(modules) > 2
    bad = {
        name: sorted(t for t in _imports_of(name) if any(_within(t, f) for f in forbidden))
        for name in modules
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_modules_stay_short() -> None:
    """No module of aqueue (its layers, aqueue.redis, aqueue.testing) is past 450 lines
    unless its docstring says it is one concept (the house rule: 150-400 as a rule, 450
    at most)."""
    modules = [n for n in MODULES if _within(n, "aqueue")]
    assert len(modules) > 100
    long = {
        name: n
        for name in modules
        if (n := len(_source(name).read_text().splitlines())) > 450
        and "one concept"
        not in (ast.get_docstring(ast.parse(_source(name).read_text())) or "").lower()
    }
    assert long == {}


_MAPPED = sorted(p for p in PACKAGES if p.startswith("aqueue._"))


@pytest.mark.parametrize("package", _MAPPED)
def test_each_private_folder_docstring_maps_all_its_files(package: str) -> None:
    """A private folder's docstring (a layer's, or a folder inside one) is its map for
    the next engineer: it names every module of the folder and every folder in it, and
    its rows name nothing else (a file or folder added without a row fails, and so does
    a row left behind by one moved or removed)."""
    doc = importlib.import_module(package).__doc__ or ""
    here = ROOT.joinpath(*package.split(".")[1:])
    files = sorted(p.name for p in here.glob("_*.py") if p.name != "__init__.py")
    folders = sorted(f"{p.parent.name}/" for p in here.glob("*/__init__.py"))
    assert files or folders
    assert [f for f in files + folders if f"``{f}``" not in doc] == []
    # And nothing more: the map's rows (a line that starts with a file or folder name)
    # name only what is there (a file moved or removed without its row fails).
    rows = re.findall(r"^``(_\w+\.py|\w+/)``", doc, flags=re.M)
    assert sorted(rows) == sorted(files + folders)


def test_the_layers_and_their_folders_are_mapped() -> None:
    """Each layer is among the mapped folders, and so is each pipeline folder."""
    for layer in ("_queues", "_replay", "_running", "_input", "_pipeline"):
        assert f"aqueue.{layer}" in _MAPPED
    for folder in _PIPELINE_FOLDERS:
        assert f"aqueue._pipeline.{folder}" in _MAPPED


def _private_names_imported(name: str) -> list[str]:
    """``from M import _x`` in module ``name`` where ``_x`` is not a module of the package
    (a private module is fine to import; a private name of another module is not)."""
    tree = ast.parse(_source(name).read_text())
    package = name if name in PACKAGES else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = _from_target(node, package)
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and f"{target}.{alias.name}" not in MODULES:
                found.append(f"{target}.{alias.name} (line {node.lineno})")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    """Modules talk through what they declare (``__all__``, protocols), never through
    another module's private names."""
    assert _private_names_imported("aqueue._running._coordinator") == []
    bad = {n: hits for n in MODULES if (hits := _private_names_imported(n))}
    assert bad == {}
