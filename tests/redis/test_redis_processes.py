"""Several processes on one queue (multiprocessing, spawn): conservation, a SIGKILLed
consumer's lease, cross-process last-producer close and a SIGKILLed producer."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import Counter
from typing import Any

import anyio
import numpy as np
import pytest
import redis_workers

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CTX = multiprocessing.get_context("spawn")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the processes are the point here; asyncio and trio are covered elsewhere


def start(target: Any, *args: Any) -> Any:
    p = CTX.Process(target=target, args=args, daemon=True)
    p.start()
    return p


@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
async def test_two_producers_two_consumers_conserve(url: str, qname: str, kind: str) -> None:
    """2 producer processes + 2 consumer processes: every element arrives exactly once,
    and the consumers end (OutOfRange) only after both producers are done."""
    out = CTX.Queue()
    async with aqueue.redis.connect(url, lease_time=1.0) as srv:
        q = await redis_workers._open(srv, kind, qname, 16)
        # Registered before any producer starts (as a runner does): a producer that
        # ends before another one registered would otherwise close the queue.
        guard = await q.register_producer()
        consumers = [start(redis_workers.consumer, url, kind, qname, out) for _ in range(2)]
        producers = [
            start(redis_workers.producer, url, kind, qname, i * 1000, 300, True) for i in range(2)
        ]
        for p in producers:
            await anyio.to_thread.run_sync(p.join, 40)
            assert p.exitcode == 0
        assert not await q.is_closed()
        await q.producer_done(guard)
    got: list[int] = []
    for _ in consumers:
        got += await anyio.to_thread.run_sync(out.get, True, 20)
    for p in consumers:
        await anyio.to_thread.run_sync(p.join, 10)
        assert p.exitcode == 0
    assert Counter(got) == Counter([*range(300), *range(1000, 1300)])


async def test_sigkilled_consumer_lease_comes_back(url: str, qname: str) -> None:
    """A consumer killed while holding a lease: after lease_time, any client's next
    call returns the elements, at the head and in order."""
    async with aqueue.redis.connect(url, lease_time=1.0, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 16, np.int64, (2,))
        await q.enqueue_many(np.stack([np.arange(5)] * 2, axis=1))
        ready = CTX.Queue()
        p = start(redis_workers.lease_holder, url, qname, ready)
        assert await anyio.to_thread.run_sync(ready.get, True, 20) == "taken"
        assert await q.size() == 2
        os.kill(p.pid, signal.SIGKILL)
        p.join(5)
        t0 = time.monotonic()
        with anyio.fail_after(5):
            batch = await q.dequeue_many(5)  # waits, then a retry reaps the lease
        assert batch[:, 0].tolist() == [0, 1, 2, 3, 4]
        assert time.monotonic() - t0 > 0.3  # (it did wait for the lease to expire)
        s = await q.statistics()
        assert (s.size, s.dequeued_total) == (0, 5)


async def test_last_producer_across_processes_closes(url: str, qname: str) -> None:
    """Two processes each register a producer; the consumer sees OutOfRange only after
    both ended, though each outlives the lease time (the heartbeat keeps them)."""
    async with aqueue.redis.connect(url, lease_time=1.0, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 16, np.int64, (2,))
        procs = [
            start(redis_workers.registered_producer, url, qname, 100.0 * (i + 1)) for i in range(2)
        ]
        got: list[int] = []
        t0 = time.monotonic()
        with anyio.fail_after(30):
            async for row in q:
                got.append(int(row[0]))
        assert sorted(got) == [100, 101, 102, 200, 201, 202]
        assert time.monotonic() - t0 > 1.4
        for p in procs:
            p.join(10)
            assert p.exitcode == 0


async def test_sigkilled_producer_registration_expires(url: str, qname: str) -> None:
    """A producer process killed -9: its registration expires after lease_time, and
    as none is left, the queue closes (the waiting consumer gets OutOfRange)."""
    async with aqueue.redis.connect(url, lease_time=1.0, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 16, np.int64, (2,))
        ready = CTX.Queue()
        p = start(redis_workers.registered_idler, url, qname, ready)
        assert await anyio.to_thread.run_sync(ready.get, True, 20) == "registered"
        await anyio.sleep(1.5)  # the heartbeat keeps it past the lease time
        assert not await q.is_closed()
        os.kill(p.pid, signal.SIGKILL)
        p.join(5)
        with anyio.fail_after(5), pytest.raises(aqueue.OutOfRangeError):
            await q.dequeue()
        assert await q.is_closed()
