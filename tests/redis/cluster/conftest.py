"""Fixtures for the tests over a real local Redis Cluster: ``csrv``, a RedisServer over
the session's cluster (``redis_cluster`` and ``failover_cluster`` are in
``tests/conftest.py``, the helpers in ``tests/redis_cluster_util.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("redis", reason="aqueue[redis] is not installed")
pytest.importorskip("msgpack", reason="aqueue[redis] is not installed")

from redis_cluster_util import ClusterProc, cluster_server

from aqueue.redis._server import RedisServer


@pytest.fixture
async def csrv(redis_cluster: ClusterProc) -> AsyncIterator[RedisServer]:
    """A RedisServer over the session's cluster."""
    async with cluster_server(redis_cluster.url) as srv:
        yield srv
