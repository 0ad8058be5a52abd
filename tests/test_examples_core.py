"""The core examples run end to end with small sizes."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_quickstart_runs(backend: str) -> None:
    """examples/quickstart.py consumes every element exactly once on both backends."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py"), "--elements", "53", "--backend", backend],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "consumed 53 elements" in proc.stdout


def test_quickstart_main_returns_count() -> None:
    """The quickstart's main() returns the number of elements it consumed."""
    import anyio

    module = runpy.run_path(str(EXAMPLES / "quickstart.py"))
    assert anyio.run(module["main"], 20) == 20
