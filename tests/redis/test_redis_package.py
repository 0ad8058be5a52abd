"""The package's own map: ``aqueue.redis``'s docstring names every file it is made of."""

from __future__ import annotations

from pathlib import Path

import aqueue.redis


def test_docstring_maps_every_file() -> None:
    """A module or Lua file added to aqueue/redis without a line in the package
    docstring's table fails (as each layer's map is checked in tests/test_imports.py)."""
    doc = aqueue.redis.__doc__ or ""
    folder = Path(aqueue.redis.__file__).parent
    files = sorted(
        p.name
        for p in folder.iterdir()
        if p.name.startswith("_") and p.suffix in (".py", ".lua") and p.name != "__init__.py"
    )
    assert len(files) > 10
    assert [f for f in files if f"``{f}``" not in doc] == []
