"""Shared fixtures and helpers for the aqueue test suite.

Two runners are used side by side:

- pytest-asyncio in strict mode (``@pytest.mark.asyncio``) for asyncio-only tests,
  including native asyncio cancellation (``task.cancel()``, ``asyncio.timeout``,
  ``asyncio.wait_for``);
- anyio's pytest plugin (``@pytest.mark.anyio``) for tests that must hold on both
  asyncio and trio. The ``anyio_backend`` fixture below is pinned to both backends so a
  missing trio fails loudly instead of silently shrinking the matrix.

The helpers the test modules share are in ``support.py`` (``from support import ...``).
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every anyio-marked test on asyncio and on trio (module scope, like anyio's own
    fixture, so module-scoped async fixtures keep working)."""
    return str(request.param)
