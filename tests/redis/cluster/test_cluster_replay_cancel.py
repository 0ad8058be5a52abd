"""A table's inserts and samples cancelled or timed out while they wait, over the
cluster: the bodies of ``tests/redis/test_redis_replay_cancel.py`` (anyio scopes on
asyncio and trio, native asyncio cancellation), with ``srv`` a RedisServer over the
session's cluster; the table's whole state is read from every primary (its keys are
on the one serving its hash tag) and must not change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis_cluster_util import AllNodes, ClusterProc, OneShard, cluster_server
from test_redis_replay_cancel import (
    test_cancelled_or_timed_out_while_waiting_changes_nothing,
    test_native_asyncio_cancellation_changes_nothing,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

__all__ = [
    "test_cancelled_or_timed_out_while_waiting_changes_nothing",
    "test_native_asyncio_cancellation_changes_nothing",
]


@pytest.fixture
async def srv(redis_cluster: ClusterProc) -> AsyncIterator[Any]:
    async with cluster_server(redis_cluster.url, lease_time=2.0, wait_timeout=0.1) as server:
        yield OneShard(server)


@pytest.fixture
def redis_server(redis_cluster: ClusterProc) -> AllNodes:
    return AllNodes(redis_cluster)
