"""Shared fixtures for the aqueue test suite.

The folders mirror the package: ``queues/`` (aqueue/_queues: the queue classes, their
engine and storage, the contract suite run over every class), ``running/`` (QueueRunner,
Coordinator, Monitor), ``input/`` (the TF-style input functions), ``pipeline/``
(Pipeline, checkpoints, process maps), ``replay/``, ``redis/`` and ``testing/`` (the
public subpackages' namesakes), ``examples/`` (the example scripts, run as a user would),
and ``typing/`` (checked by mypy, never run). Package-wide tests stay at the top.

There are no ``__init__.py`` files: pytest puts each test file's folder, and this one's,
on ``sys.path``, so every test module imports the shared helpers with
``from support import ...`` (``support.py``, beside this file), and no two test files
may share a base name.

One async runner: anyio's pytest plugin (``@pytest.mark.anyio``), over asyncio and trio
through the ``anyio_backend`` fixture below. pytest-asyncio (strict mode,
``@pytest.mark.asyncio``) is kept only for tests whose subject is native asyncio
behaviour (``task.cancel()``, ``asyncio.timeout``, ``asyncio.wait_for``) or
pytest-asyncio itself; each says why in a comment.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every anyio-marked test on asyncio and on trio (module scope, like anyio's own
    fixture, so module-scoped async fixtures keep working)."""
    return str(request.param)
