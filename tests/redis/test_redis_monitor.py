"""aqueue.Monitor over queues shared through a Redis server: sampled with
``await q.statistics()``, and a dead server never stalls sampling."""

from __future__ import annotations

import math
import time

import anyio
import numpy as np
import pytest
from redis_util import RedisProc

import aqueue
import aqueue.redis
from aqueue import Coordinator, Monitor, MonitorSample, QueueRunner

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def more_samples(seen: list[MonitorSample], n: int) -> None:
    target = len(seen) + n
    with anyio.fail_after(10):
        while len(seen) < target:  # noqa: ASYNC110 - the monitor's callback appends
            await anyio.sleep(0.005)


async def test_monitor_samples_a_redis_queue(url: str, qname: str) -> None:
    """A runner's thread fills a shared queue while the body drains it: the monitor
    reads the server's figures; after the baseline reading, rate x interval sums to the
    elements moved."""
    seen: list[MonitorSample] = []
    monitor = Monitor(interval=0.01, callback=seen.append)
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 8, np.int64, ())
        got = []
        async with Coordinator(monitor=monitor) as coord:
            coord.start(QueueRunner(q, [iter(range(60))], name="fill"))
            async for x in q:
                got.append(int(x))
                if len(got) % 20 == 0:
                    await more_samples(seen, 1)
        assert sorted(got) == list(range(60))
    h = monitor.history()
    shared = h.queues[qname]
    assert shared.shared
    assert shared.is_input
    assert np.all(shared.capacity == 8)
    assert np.all((shared.fraction_full >= 0) & (shared.fraction_full <= 1))
    assert shared.enqueued_total[-1] == 60
    assert shared.dequeued_total[-1] == 60
    assert np.isnan(shared.enqueue_rate[0])
    read = ~np.isnan(shared.enqueue_rate)
    moved = float(np.sum(shared.enqueue_rate[read] * h.interval_s[read]))
    assert math.isclose(moved, 60 - shared.enqueued_total[0], rel_tol=1e-9)
    assert all(s.missing == () for s in seen)


async def test_a_dead_server_never_stalls_sampling(own_redis: RedisProc, qname: str) -> None:
    """The server killed while a coordinator watches its queue: samples go on, each
    naming the queue as missing, and the block ends without waiting on the server."""
    seen: list[MonitorSample] = []
    monitor = Monitor(interval=0.01, statistics_timeout=0.05, callback=seen.append)
    async with aqueue.redis.connect(own_redis.url, wait_timeout=0.05, socket_timeout=2.0) as srv:
        q = await srv.fifo_queue(qname, 4, np.int64, ())
        async with Coordinator(monitor=monitor) as coord:
            coord.watch(q)
            await more_samples(seen, 2)
            own_redis.kill()
            t0 = time.monotonic()
            await more_samples(seen, 3)
        assert time.monotonic() - t0 < 15
    assert seen[0].missing == ()
    assert qname in seen[0].queues
    assert seen[-1].missing == (qname,)
    assert qname not in seen[-1].queues
    assert seen[-1].final
