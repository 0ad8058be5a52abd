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

import time
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest
from redis_cluster_util import ClusterProc, cluster_server

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]

FAILOVER_TIMEOUT = 6.0  # the fixture's node timeout (1 s) plus 5 s
HANG_GUARD = FAILOVER_TIMEOUT + 30.0  # (a hang guard for one call, not a speed check)
BATCH = 8


class Log:
    """What one worker saw: when each call returned, the errors with their time."""

    def __init__(self) -> None:
        self.returned: list[float] = []
        self.errors: list[tuple[float, BaseException]] = []

    def after(self, t: float) -> int:
        return sum(1 for r in self.returned if r > t)


async def _call(log: Log, fn: Any, *args: Any, guard: bool = True) -> Any:
    """One call (under the hang guard unless it may wait for data): its reply, or None
    once its error is logged."""
    try:
        with anyio.fail_after(HANG_GUARD if guard else None):
            reply = await fn(*args)
    except aqueue.redis.ServerConnectionError as exc:
        log.errors.append((time.monotonic(), exc))
        await anyio.sleep(0.05)  # (the slot map is read again meanwhile)
        return None
    log.returned.append(time.monotonic())
    return reply


async def _until(predicate: Callable[[], bool]) -> None:
    while not predicate():  # noqa: ASYNC110 - set by the workers' results
        await anyio.sleep(0.02)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # (the cluster transport's cancellation is tested elsewhere)


async def test_sharded_queue_survives_a_primary_killed(failover_cluster: ClusterProc) -> None:
    cluster = failover_cluster
    victim = cluster.primaries()[1]
    put, take, wait = Log(), Log(), Log()
    acked: list[tuple[float, np.ndarray]] = []  # (when, the batch) per enqueue returned
    got: list[int] = []
    kill_at: list[float] = []
    promoted_at: list[float] = []
    server = cluster_server(
        cluster.url, failover_timeout=FAILOVER_TIMEOUT, wait_timeout=0.5, lease_time=2.0
    )
    async with server as srv:
        q = await srv.fifo_queue("fq", 4096, np.int64, (), shards=3)
        empty = await srv.fifo_queue("fe", 64, np.int64, (), shards=3)

        async def producer(coord: aqueue.Coordinator) -> None:
            v = 0
            while not coord.should_stop():
                batch = np.arange(v, v + BATCH, dtype=np.int64)
                done = len(put.returned)
                await _call(put, q.enqueue_many, batch)
                if len(put.returned) > done:  # (acknowledged)
                    acked.append((put.returned[-1], batch))
                v += BATCH

        async def consumer(coord: aqueue.Coordinator) -> None:
            while not coord.should_stop():
                rows = await _call(take, q.dequeue_many, BATCH)
                if rows is not None:
                    got.extend(rows.tolist())

        async def waiter() -> None:
            rows = await _call(wait, empty.dequeue_many, 2, guard=False)
            if rows is not None:
                assert rows.tolist() == [-1, -2]

        with anyio.fail_after(4 * HANG_GUARD):
            async with aqueue.Coordinator(stop_grace_period=HANG_GUARD) as coord:
                coord.start_soon(producer, coord)
                coord.start_soon(consumer, coord)
                coord.start_soon(waiter)
                await _until(lambda: len(put.returned) >= 20 and len(take.returned) >= 10)
                while (await empty.statistics()).tasks_waiting_dequeue < 1:  # noqa: ASYNC110
                    await anyio.sleep(0.02)  # (the state lives on the server)
                kill_at.append(time.monotonic())
                await anyio.to_thread.run_sync(cluster.kill, victim)
                await anyio.to_thread.run_sync(cluster.wait_promoted, victim)
                promoted_at.append(time.monotonic())
                await _until(
                    lambda: min(put.after(promoted_at[0]), take.after(promoted_at[0])) >= 10
                )
                with anyio.fail_after(HANG_GUARD):
                    await empty.enqueue_many(np.array([-1, -2], dtype=np.int64))
                    await _until(lambda: bool(wait.returned or wait.errors))
                coord.request_stop()
        assert coord.exceptions == ()

        # One end of data across the shards, after the failover.
        await q.aclose()
        with anyio.fail_after(HANG_GUARD):
            while True:
                try:
                    got.extend((await q.dequeue_up_to(256)).tolist())
                except aqueue.OutOfRangeError:
                    break
        assert (await q.statistics()).size == 0

    for log in (put, take, wait):
        assert all(t > kill_at[0] for t, _ in log.errors)  # (no error before the kill)
    # Every element that arrived was sent (an unacknowledged enqueue, one that failed
    # with the kill, may have gone in: at most the batch in flight past the last one).
    sent = max(int(b[-1]) for _, b in acked) + 1
    assert all(0 <= v < sent + BATCH for v in got)  # (nothing foreign)
    first: dict[int, int] = {}
    for at, v in enumerate(got):
        first.setdefault(v, at)
    for _, batch in acked:  # one enqueue_many stays in order (first arrivals)
        arrived = [int(v) for v in batch if int(v) in first]
        assert sorted(arrived, key=first.__getitem__) == arrived, (batch, got)
    confirmed = np.concatenate([b for _, b in acked])
    lost = [int(v) for v in confirmed if int(v) not in first]
    twice = len(got) - len(first)
    print(
        f"queue failover: {len(confirmed)} enqueued and acknowledged, {len(lost)} lost, "
        f"{twice} came twice; errors: producer {len(put.errors)}, consumer "
        f"{len(take.errors)}, waiting consumer {len(wait.errors)} (returned: "
        f"{len(wait.returned)}); kill to promotion {promoted_at[0] - kill_at[0]:.1f} s"
    )
