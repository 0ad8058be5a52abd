"""Random cancellations over a queue of three shards never lose or duplicate an
element: the bodies of ``test_redis_cancellation.py`` (anyio cancel scopes on asyncio
and trio, native ``task.cancel()`` and ``asyncio.timeout``; counts of 0, 1 and the
capacity; batches of 0..4; dequeues larger than the capacity), with every queue opened
with ``shards=3``, on one server and on the local cluster (three primaries). The
payload keys of every shard are checked empty at the end."""

from __future__ import annotations

from typing import Any

import pytest
import test_redis_cancellation as bodies
from shards_util import ShardedServer, shard_payload_keys
from test_redis_cancellation import (
    test_random_native_asyncio_cancellations,
    test_random_scope_cancellations,
)

import aqueue.redis

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("payload_storage")]

__all__ = ["test_random_native_asyncio_cancellations", "test_random_scope_cancellations"]


@pytest.fixture(params=["server", "cluster"])
def where(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url(where: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``aqueue.redis.connect`` opens the bodies' queues with three shards."""
    connect = aqueue.redis.connect
    if where == "cluster":
        from redis_cluster_util import cluster_server

        connect = cluster_server
        url = str(request.getfixturevalue("redis_cluster").url)
    else:
        url = str(request.getfixturevalue("redis_server").url)  # (the one server)

    def sharded(url: str, **kw: Any) -> Any:
        return _Block(connect(url, **kw))

    monkeypatch.setattr(aqueue.redis, "connect", sharded)
    monkeypatch.setattr(bodies, "payload_keys", shard_payload_keys)
    return url


@pytest.fixture
def redis_server(where: str, request: pytest.FixtureRequest, redis_server: Any) -> Any:
    """Where the bodies read the payload keys: the server, or every cluster node."""
    if where == "cluster":
        from redis_cluster_util import AllNodes

        return AllNodes(request.getfixturevalue("redis_cluster"))
    return redis_server


@pytest.fixture(autouse=True)
def _enough_waiting_puts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scope body requires more than 5 cancelled puts, and puts wait less often on
    a shuffle queue over shards (each shard keeps its part of min_after_dequeue), so
    that count is luck there: the shuffle case requires none (its puts are the FIFO
    case's, one ShardedPutOp for both) and is run for its takes, cancelled by scopes
    on asyncio and trio."""
    spec = getattr(request.node, "callspec", None)
    scope_body = request.node.name.startswith("test_random_scope_cancellations")
    if scope_body and spec is not None and spec.params.get("kind") == "shuffle":
        monkeypatch.setattr(bodies, "MIN_PUT_CANCELS", -1)


class _Block:
    """``async with connect(...) as srv``, with ``srv`` opening queues of 3 shards."""

    def __init__(self, server: Any) -> None:
        self._server = server

    async def __aenter__(self) -> ShardedServer:
        return ShardedServer(await self._server.__aenter__(), 3)

    async def __aexit__(self, *exc: Any) -> None:
        await self._server.__aexit__(*exc)
