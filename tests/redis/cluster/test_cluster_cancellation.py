"""Random cancellations over the cluster never lose or duplicate an element: the bodies
of ``tests/redis/test_redis_cancellation.py`` (anyio cancel scopes on asyncio and trio,
native ``task.cancel()`` and ``asyncio.timeout``), with ``aqueue.redis.connect`` giving a
RedisServer over the session's cluster (until ``connect(url, cluster=True)`` exists),
so cancellations land during the cluster transports' calls, pipelines and waits."""

from __future__ import annotations

import pytest
from redis_cluster_util import AllNodes, ClusterProc, OneShardBlock, cluster_server
from test_redis_cancellation import (
    test_random_native_asyncio_cancellations,
    test_random_scope_cancellations,
)

import aqueue.redis

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("payload_storage")]

__all__ = ["test_random_native_asyncio_cancellations", "test_random_scope_cancellations"]


@pytest.fixture
def url(redis_cluster: ClusterProc, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(
        aqueue.redis, "connect", lambda url, **kw: OneShardBlock(cluster_server(url, **kw))
    )
    return redis_cluster.url


@pytest.fixture
def redis_server(redis_cluster: ClusterProc) -> AllNodes:
    return AllNodes(redis_cluster)


@pytest.fixture
def payload_storage(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every payload under its own key: the staged enqueues and fetching takes are the
    request shapes the cluster sends differently (plain pipelines, no MULTI)."""
    from aqueue.redis._core import _shared

    monkeypatch.setattr(_shared, "INLINE_MAX", 0)
    return "keys"
