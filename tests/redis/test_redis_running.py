"""Runners, coordinators and pipelines over queues shared through a Redis server.

QueueRunner, Coordinator and Pipeline work over the queue interface (``AsyncQueue``),
so they drive the Redis queues as they drive the in-process ones: producers register on
the server and the shared queue closes after the last producer of all processes has
ended; a coordinator's stop releases this process's producers without closing the
shared queue; a dead server ends a coordinator with the server's error.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import RedisProc, until

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_runner_feeds_a_redis_queue_from_threads_and_tasks(url: str, qname: str) -> None:
    """A QueueRunner with a thread producer (sync iterable) and a task producer (async
    iterable) fills a Redis queue; it closes after both ended, so the consumer's
    iteration ends after exactly the produced elements."""

    async def agen() -> Any:
        for i in range(100, 130):
            yield i

    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 4, np.int64, ())
        async with aqueue.Coordinator() as coord:
            coord.start(aqueue.QueueRunner(q, [iter(range(40)), agen()], name="fill"))
            got = [int(x) async for x in q]
        assert sorted(got) == [*range(40), *range(100, 130)]
        assert await q.is_closed()
        assert "'fill' 0/2 alive" in coord.report()
        assert "(shared)" in coord.report()


async def test_coordinator_stop_releases_producers_but_not_the_shared_queue(
    url: str, qname: str
) -> None:
    """request_stop() ends this process's producers, even one blocked on the full
    shared queue, yet the queue stays open while another process's producer is
    registered; it closes when that one ends."""
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 2, np.int64, ())
        elsewhere = await q.register_producer()  # a producer of another host

        async def forever() -> int:
            return 7

        async with aqueue.Coordinator(stop_grace_period=5.0) as coord:
            runner = aqueue.QueueRunner(q, [forever, iter(int, 1)], name="actor")
            coord.start(runner)

            async def full() -> bool:
                return await q.size() == 2

            await until(full)  # full: both producers blocked
            coord.request_stop()
            with anyio.fail_after(5):
                await runner.join()
        assert runner.exceptions_raised == []
        assert not await q.is_closed()
        assert int(await q.dequeue()) in (0, 7)  # what either producer had enqueued
        await q.producer_done(elsewhere)
        assert await q.is_closed()


async def test_dead_server_ends_the_coordinator_with_its_error(
    own_redis: RedisProc, qname: str
) -> None:
    """The server killed while a runner's producers wait on a full queue: leaving the
    coordinator raises the server's error (ServerConnectionError) within seconds."""
    async with aqueue.redis.connect(own_redis.url, wait_timeout=0.05, socket_timeout=2.0) as srv:
        q = await srv.fifo_queue(qname, 1, np.int64, ())

        async def one() -> int:
            return 1

        async def full() -> bool:
            return await q.size() == 1

        async def run() -> None:
            async with aqueue.Coordinator(stop_grace_period=1.0) as coord:
                coord.start(aqueue.QueueRunner(q, [one, iter(int, 1)]))
                await until(full)
                own_redis.kill()
                await anyio.sleep(30)  # the failure cancels this

        t0 = time.monotonic()
        with pytest.raises(aqueue.redis.ServerConnectionError):
            await run()
        assert time.monotonic() - t0 < 15


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_runners_in_two_actor_processes_close_the_queue_after_both(
    url: str, qname: str
) -> None:
    """Two actor processes each run a Coordinator and a QueueRunner (a game thread and
    an async producer) on one shared queue; the trainer here sees every value once, and
    OutOfRangeError only after both actors have finished."""
    from redis_workers import runner_actor

    ctx = multiprocessing.get_context("spawn")
    count = 150
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 8, np.int64, ())
        guard = await q.register_producer()  # keep it open until both actors registered
        ready = [ctx.Event(), ctx.Event()]
        actors = [
            ctx.Process(target=runner_actor, args=(url, qname, a, count, ready[a]))
            for a in range(2)
        ]
        for p in actors:
            p.start()
        try:
            with anyio.fail_after(30):
                while not all(e.is_set() for e in ready):  # noqa: ASYNC110 - other processes
                    await anyio.sleep(0.01)
            await q.producer_done(guard)
            got: list[int] = []
            with anyio.fail_after(30):
                async for x in q:
                    got.append(int(x))
        finally:
            for p in actors:
                p.join(10)
        assert all(p.exitcode == 0 for p in actors)
        want = [a * 1_000_000 + i for a in range(2) for i in range(count)]
        assert sorted(got) == want


async def test_pipeline_reads_a_redis_queue(url: str, qname: str) -> None:
    """Pipeline(q) over a Redis queue: a map and a batch after it see every element."""
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 16, np.int64, ())
        await q.enqueue_many(np.arange(10))
        await q.aclose()
        pipe = (
            aqueue.Pipeline(q).map(lambda x: int(x) * 10).batch(4, allow_smaller_final_batch=True)
        )
        got: list[int] = []
        async with pipe.open() as batches:
            async for b in batches:
                got.extend(int(v) for v in b)
        assert got == [x * 10 for x in range(10)]


def _function_calls(server: RedisProc) -> int:
    """FCALLs the server has run so far (INFO commandstats)."""
    with server.client() as c:
        stats = c.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{cmd}", {}).get("calls", 0)) for cmd in ("fcall", "fcall_ro")
    )


async def test_pipeline_takes_a_redis_source_in_bursts(
    url: str, redis_server: RedisProc, qname: str
) -> None:
    """Pipeline.from_queue over a Redis queue takes what is there at once
    (``dequeue_burst``: one take and one ack per burst), not one element per call:
    64 queued elements cost a handful of function calls, not two per element."""
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 64, np.int64, ())
        await q.enqueue_many(np.arange(64))
        await q.aclose()
        before = _function_calls(redis_server)
        got: list[int] = []
        async with aqueue.Pipeline.from_queue(q).batch(32).open() as batches:
            async for b in batches:
                assert len(b) == 32
                got.extend(int(v) for v in b)
        calls = _function_calls(redis_server) - before
    assert got == list(range(64))
    assert calls <= 10, f"{calls} function calls for 64 elements"


async def test_a_loader_pipeline_feeds_a_trainer_through_a_redis_queue(
    url: str, qname: str
) -> None:
    """A loader pipeline ends in to_queue(shared queue, enqueue_many=True) after a
    batch stage; a trainer pipeline reads the shared queue (Pipeline(q)) and sees every
    element once; the shared queue closes when the loader has finished."""
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        shared = await srv.fifo_queue(qname, 64, np.float32, (4,))
        loader = (
            aqueue.Pipeline(range(300))
            .map(lambda i: np.full(4, i, np.float32), concurrency=4)
            .batch(16, allow_smaller_final_batch=True)
            .to_queue(shared, enqueue_many=True)
        )
        trainer = aqueue.Pipeline(shared).batch(32, allow_smaller_final_batch=True)
        seen: list[int] = []

        async def train() -> None:
            async with trainer.open() as batches:
                async for b in batches:
                    assert b.shape[1:] == (4,)
                    seen.extend(int(row[0]) for row in b)

        async with anyio.create_task_group() as tg:
            tg.start_soon(train)
            await loader.run()
        assert sorted(seen) == list(range(300))
        assert await shared.is_closed()
