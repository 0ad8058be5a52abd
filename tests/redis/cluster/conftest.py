"""Fixtures for the tests over a real local Redis Cluster (``tests/redis_cluster_util.py``):
``redis_cluster`` (three primaries, for the session), ``failover_cluster`` (three
primaries with a replica each, for one test), and ``cluster_server``: a RedisServer
whose requests go through the cluster transports (``ClusterAsyncio`` on asyncio,
``RedisThreads`` over ``ClusterSync`` on trio), so the queues and tables of today run
unchanged, each under its one hash tag, over the cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

pytest.importorskip("redis", reason="aqueue[redis] is not installed")
pytest.importorskip("msgpack", reason="aqueue[redis] is not installed")

from redis_cluster_util import ClusterProc, failover_cluster, redis_cluster

from aqueue.redis._clients import RedisThreads
from aqueue.redis._cluster import ClusterAsyncio, ClusterSync
from aqueue.redis._server import RedisServer

__all__ = ["failover_cluster", "redis_cluster"]


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio
        return False
    return True


@asynccontextmanager
async def cluster_server(
    url: str, *, failover_timeout: float = 20.0, load_functions: bool = True, **kw: Any
) -> AsyncIterator[RedisServer]:
    """A RedisServer over the cluster at ``url`` (``connect()``'s arguments in ``kw``).
    Until ``connect(url, cluster=True)`` exists, the cluster transports are put in
    place of the single-server ones."""
    opts: dict[str, Any] = {"lease_time": 30.0, "wait_timeout": 0.2, "socket_timeout": 10.0}
    opts.update(kw)
    srv = RedisServer(
        url,
        load_functions=load_functions,
        max_connections=None,
        max_call_bytes=64 << 20,
        **opts,
    )
    cluster = {"failover_timeout": failover_timeout, "load_functions": load_functions}
    sync = await anyio.to_thread.run_sync(lambda: ClusterSync(url, **cluster))
    transport: Any = RedisThreads(sync)  # (trio: redis.asyncio is asyncio-only)
    try:
        await anyio.to_thread.run_sync(sync.start)
        if _on_asyncio():
            transport = ClusterAsyncio(url, **cluster)
            await transport.start()
        srv._sync, srv._transport = sync, transport
        try:
            yield srv
        finally:
            await transport.aclose()
    finally:
        sync.close()


@pytest.fixture
async def csrv(redis_cluster: ClusterProc) -> AsyncIterator[RedisServer]:
    """A RedisServer over the session's cluster."""
    async with cluster_server(redis_cluster.url) as srv:
        yield srv
