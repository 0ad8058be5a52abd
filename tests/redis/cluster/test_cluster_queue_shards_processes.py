"""A FIFO queue over the cluster's three primaries (``shards`` by default) shared by
processes (multiprocessing, spawn): four registered producer processes and two
consumer processes. Every element comes out exactly once, and the last producer's
end ends both consumers (one end of data across shards)."""

from __future__ import annotations

import multiprocessing
import uuid

import anyio
import anyio.to_thread
import pytest
import redis_workers
from redis_cluster_util import ClusterProc, cluster_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

CTX = multiprocessing.get_context("spawn")
COUNTS = (40, 60, 80, 100)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the processes are the point here


async def test_four_producers_two_consumers_exactly_once(redis_cluster: ClusterProc) -> None:
    name = f"qsp-{uuid.uuid4().hex[:10]}"
    out = CTX.Queue()
    async with cluster_server(redis_cluster.url, lease_time=2.0, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(name, 24, "int64", (2,))
        assert q.shards == 3  # one per primary, by default
        guard = await q.register_producer()  # (open until every producer has started)
        firsts = [i * 1000 for i in range(len(COUNTS))]
        procs = [
            CTX.Process(target=redis_workers.sharded_consumer, args=(redis_cluster.url, name, out))
            for _ in range(2)
        ]
        procs += [
            CTX.Process(
                target=redis_workers.sharded_producer,
                args=(redis_cluster.url, name, first, n),
            )
            for first, n in zip(firsts, COUNTS)
        ]
        for p in procs:
            p.start()
        for p in procs[2:]:
            await anyio.to_thread.run_sync(p.join, 90)
        await q.producer_done(guard)
        rows = [*await anyio.to_thread.run_sync(out.get, True, 60)]
        rows += await anyio.to_thread.run_sync(out.get, True, 60)
        for p in procs[:2]:
            await anyio.to_thread.run_sync(p.join, 30)
        assert [p.exitcode for p in procs] == [0] * len(procs)
    values = [v for v, _ in rows]
    expected = [first + i for first, n in zip(firsts, COUNTS) for i in range(n)]
    assert len(values) == len(set(values)), "an element came out twice"
    assert sorted(values) == expected, "an element was lost or foreign"
