"""A 3-shard FIFO queue while a primary is SIGKILLed: the failover cluster's three
primaries (a replica each) serve one shard each. A producer (``enqueue_many`` of
numbered batches) and a consumer (``dequeue_many``) run under a Coordinator, and a
second consumer waits on another 3-shard queue that is empty. One primary is killed.

Each call either returns (before the kill, or once the replica serves the slots) or
raises ServerConnectionError, and none outlives the hang guard; the producer and the
consumer both go on after the promotion; the waiting consumer returns once elements
come or fails with ServerConnectionError; the Coordinator's block ends cleanly. Then
one end of data still holds across the shards: ``close()`` reaches every shard, the
promoted one included, and the consumer drains what is left and gets OutOfRangeError.

What can be lost or come twice: Redis replicates asynchronously, so an enqueue the
victim acknowledged but had not yet sent to its replica is gone after the promotion,
and a dequeue it acknowledged may come back once its lease expires. The test counts
both and prints them; every element that arrives was sent, and the elements of one
``enqueue_many`` arrive in order (duplicates aside).
"""

from __future__ import annotations

import anyio
import numpy as np
import pytest
from failover_util import FAILOVER_TIMEOUT, HANG_GUARD, Log, call, kill_and_promote, until
from redis_cluster_util import ClusterProc, cluster_server

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]

BATCH = 8


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # (the cluster transport's cancellation is tested elsewhere)


async def test_sharded_queue_survives_a_primary_killed(failover_cluster: ClusterProc) -> None:
    cluster = failover_cluster
    victim = cluster.primaries()[1]
    put, take, wait = Log(), Log(), Log()
    got: list[int] = []
    server = cluster_server(
        cluster.url, failover_timeout=FAILOVER_TIMEOUT, wait_timeout=0.5, lease_time=2.0
    )
    async with server as srv:
        # (Room for what the producer sends while a consumer waits out the failover: a
        # full queue splits a batch no shard has room for, in runs whose order across
        # shards is not kept, and the order check below is for batches kept whole.)
        q = await srv.fifo_queue("fq", 1 << 16, np.int64, (), shards=3)
        empty = await srv.fifo_queue("fe", 64, np.int64, (), shards=3)

        async def producer(coord: aqueue.Coordinator) -> None:
            v = 0
            while not coord.should_stop():
                batch = np.arange(v, v + BATCH, dtype=np.int64)
                done = len(put.returned)
                await call(put, q.enqueue_many, batch)
                if len(put.returned) > done:  # (acknowledged)
                    put.acked.append((put.returned[-1], batch))
                v += BATCH

        async def consumer(coord: aqueue.Coordinator) -> None:
            while not coord.should_stop():
                rows = await call(take, q.dequeue_many, BATCH)
                if rows is not None:
                    got.extend(rows.tolist())

        async def waiter() -> None:
            rows = await call(wait, empty.dequeue_many, 2, guard=False)
            if rows is not None:
                assert rows.tolist() == [-1, -2]

        with anyio.fail_after(4 * HANG_GUARD):
            async with aqueue.Coordinator(stop_grace_period=HANG_GUARD) as coord:
                coord.start_soon(producer, coord)
                coord.start_soon(consumer, coord)
                coord.start_soon(waiter)
                await until(lambda: len(put.returned) >= 20 and len(take.returned) >= 10)
                while (await empty.statistics()).tasks_waiting_dequeue < 1:  # noqa: ASYNC110
                    await anyio.sleep(0.02)  # (the state lives on the server)
                kill_at, promoted_at = await kill_and_promote(cluster, victim, [put, take])
                with anyio.fail_after(HANG_GUARD):
                    await empty.enqueue_many(np.array([-1, -2], dtype=np.int64))
                    await until(lambda: bool(wait.returned or wait.errors))
                coord.request_stop()
        assert coord.exceptions == ()

        # One end of data across the shards, after the failover (a call that meets a
        # connection the kill broke raises ServerConnectionError, and is made again).
        end = Log()
        with anyio.fail_after(HANG_GUARD):
            while not end.returned:
                await call(end, q.aclose)
            while True:
                try:
                    rows = await call(end, q.dequeue_up_to, 256)
                except aqueue.OutOfRangeError:
                    break
                if rows is not None:
                    got.extend(rows.tolist())
        assert (await q.statistics()).size == 0

    for log in (put, take, wait, end):
        assert all(t > kill_at for t, _ in log.errors)  # (no error before the kill)
    # Every element that arrived was sent (an unacknowledged enqueue, one that failed
    # with the kill, may have gone in: at most the batch in flight past the last one).
    sent = max(int(b[-1]) for _, b in put.acked) + 1
    assert all(0 <= v < sent + BATCH for v in got)  # (nothing foreign)
    first: dict[int, int] = {}
    for at, v in enumerate(got):
        first.setdefault(v, at)
    for _, batch in put.acked:  # one enqueue_many stays in order (first arrivals)
        arrived = [int(v) for v in batch if int(v) in first]
        assert sorted(arrived, key=first.__getitem__) == arrived, (batch, got)
    confirmed = np.concatenate([b for _, b in put.acked])
    lost = [int(v) for v in confirmed if int(v) not in first]
    twice = len(got) - len(first)
    print(
        f"queue failover: {len(confirmed)} enqueued and acknowledged, {len(lost)} lost, "
        f"{twice} came twice; errors: producer {len(put.errors)}, consumer "
        f"{len(take.errors)}, waiting consumer {len(wait.errors)} (returned: "
        f"{len(wait.returned)}), drain {len(end.errors)}; kill to promotion "
        f"{promoted_at - kill_at:.1f} s"
    )
