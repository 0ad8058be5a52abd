"""aqueue.Monitor over queues shared through a Redis server: sampled with
``await q.statistics()``, and a dead server never stalls sampling."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator

import anyio
import numpy as np
import pytest
from redis_util import RedisProc

import aqueue
import aqueue.redis
from aqueue import Coordinator, Monitor, MonitorReading, QueueRunner

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def more_samples(seen: list[MonitorReading], n: int) -> None:
    target = len(seen) + n
    with anyio.fail_after(10):
        while len(seen) < target:  # noqa: ASYNC110 - the monitor's callback appends
            await anyio.sleep(0.005)


async def test_monitor_samples_a_redis_queue(url: str, qname: str) -> None:
    """A runner's thread fills a shared queue while the body drains it: the monitor
    reads the server's figures from the baseline the coordinator read when it first saw
    the queue, so rate x interval sums to the elements moved."""
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.01, callback=seen.append)
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 8, np.int64, ())
        got = []
        async with Coordinator(monitor=monitor) as coord:
            coord.watch(q)
            await more_samples(seen, 1)  # (it waits for the baseline: read before any enqueue)
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
    assert shared.enqueue_rate[0] == 0.0
    moved = float(np.sum(shared.enqueue_rate * h.interval_s))
    assert math.isclose(moved, 60, rel_tol=1e-9)
    assert all(s.missing == () for s in seen)


def slow_items(n: int) -> Iterator[int]:
    """A producer slower than the body, so the body waits for input."""
    for i in range(n):
        time.sleep(0.002)
        yield i


@pytest.mark.parametrize("with_monitor", [False, True], ids=["alone", "with_monitor"])
async def test_report_gives_a_shared_queues_figures(
    url: str, qname: str, with_monitor: bool
) -> None:
    """coord.report() and coord.input_bound read a shared queue's statistics from its
    server (at first sight and when the body ends): the same row and input-bound line
    as for an in-process queue, and a Monitor's overall share is the same figure. While
    the body runs, the report says why the shared queue has no figures yet."""
    monitor = Monitor(interval=0.01, statistics_timeout=2.0) if with_monitor else None
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 64, np.int64, ())
        async with Coordinator(monitor=monitor) as coord:
            coord.start(QueueRunner(q, [slow_items(96)], name="fill"))
            during = coord.report().splitlines()
            assert coord.input_bound is None
            sizes = [len(b) async for b in q.batches(32)]
        assert sizes == [32, 32, 32]
    why = "its statistics are read from its server when the body ends"
    assert f"'{qname}' (shared): no figures: {why}" in during
    assert during[-1] == f"input-bound: n/a ('{qname}' is shared: {why})"
    lines = coord.report().splitlines()
    row = next(line for line in lines if line.startswith(f"'{qname}'"))
    assert row.split()[:6] == [f"'{qname}'", "(closed)", "(shared)", "0/64", "96", "96"]
    m = re.fullmatch(
        rf"input-bound: (\d+)% \(the body waited ([0-9.]+) s of ([0-9.]+) s on '{qname}'\)",
        lines[-1],
    )
    assert m is not None, lines[-1]
    assert coord.input_bound is not None
    assert float(m[2]) > 0
    assert lines[-1].startswith(f"input-bound: {coord.input_bound:.0%} (")
    if monitor is not None:
        h = monitor.history()
        ok = ~np.isnan(h.input_bound)
        overall = float((h.input_bound[ok] * h.interval_s[ok]).sum() / h.interval_s[ok].sum())
        assert overall == pytest.approx(coord.input_bound, abs=0.05)


async def test_a_dead_server_never_stalls_sampling(own_redis: RedisProc, qname: str) -> None:
    """The server killed while a coordinator watches its queue: samples go on, each
    naming the queue as missing, and the block ends without waiting on the server."""
    seen: list[MonitorReading] = []
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
