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

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every anyio-marked test on asyncio and on trio (module scope, like anyio's own
    fixture, so module-scoped async fixtures keep working)."""
    return str(request.param)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local Redis Cluster of three primaries for the session, shared by the Redis and
    replay tests (see ``redis_cluster_util.py``; skipped, or failed under CI=true, when
    redis-server or redis-cli is missing)."""
    pytest.importorskip("redis", reason="aqueue[redis] is not installed")
    from redis_cluster_util import SESSION_NODE_TIMEOUT_MS, start_cluster, stop_cluster

    folder = tmp_path_factory.mktemp("cluster")
    cluster = start_cluster(folder, node_timeout_ms=SESSION_NODE_TIMEOUT_MS)
    yield cluster
    stop_cluster(cluster)


@pytest.fixture
def failover_cluster(tmp_path: Path) -> Iterator[Any]:
    """Three primaries with one replica each and a short node timeout, for one test
    that kills nodes."""
    pytest.importorskip("redis", reason="aqueue[redis] is not installed")
    from redis_cluster_util import FAILOVER_NODE_TIMEOUT_MS, start_cluster, stop_cluster

    cluster = start_cluster(tmp_path, replicas=1, node_timeout_ms=FAILOVER_NODE_TIMEOUT_MS)
    yield cluster
    stop_cluster(cluster)
