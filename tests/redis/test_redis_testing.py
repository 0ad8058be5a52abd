"""aqueue.testing over a Redis queue: drain takes its elements (as a list or stacked
with the queue's declared spec); stall_guard, which watches in-process queues only,
still turns a hang on a Redis queue into StallError, saying it sees no waiter."""

from __future__ import annotations

import anyio
import numpy as np
import pytest

import aqueue.redis
from aqueue.testing import StallError, drain, stall_guard

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_drain_and_stall_guard_on_a_redis_queue(url: str, qname: str) -> None:
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 8, np.float32, (2,))
        await q.enqueue_many(np.arange(8, dtype=np.float32).reshape(4, 2))
        await q.aclose()
        got = [x.tolist() for x in await drain(q, timeout=30)]
        assert got == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
        other = await srv.fifo_queue(f"{qname}-2", 8, np.float32, (2,))
        await other.enqueue_many(np.ones((3, 2), dtype=np.float32))
        await other.aclose()
        batch = await drain(other, stack=True, timeout=30)
        assert (batch.shape, batch.dtype) == ((3, 2), np.float32)
        empty = await srv.fifo_queue(f"{qname}-3", 8, np.float32, (2,))
        with anyio.fail_after(30), pytest.raises(StallError) as info:
            async with stall_guard(0.3):
                await empty.dequeue()
        assert "no in-process queue has a task or thread waiting on it" in str(info.value)
        assert "queues of aqueue.redis are not watched" in str(info.value)


async def test_the_leak_check_names_a_thread_blocked_on_a_redis_queue(url: str, qname: str) -> None:
    """What ``aqueue_leak_check`` reads: a thread left blocked in the Redis thread view's
    enqueue on a full queue is named with its call and queue, and releasing it ends the
    call with QueueClosedError (this process's producers only: the shared queue stays
    open for the others)."""
    from aqueue.testing._leaks import Running, leaks_since, release_blocked

    errors: list[BaseException] = []
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 1, np.int64, ())
        await q.enqueue(0)
        before = Running.now()

        def put() -> None:
            try:
                q.blocking().enqueue(1)
            except aqueue.QueueClosedError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, put)
            try:
                with anyio.fail_after(10):
                    while not leaks_since(before):  # noqa: ASYNC110 - a thread's state
                        await anyio.sleep(0.005)
                (line,) = leaks_since(before)
                assert line.startswith("- thread '"), line
                assert f"blocked in BlockingQueue.enqueue() on queue '{qname}' for " in line
                assert release_blocked(before) == [
                    f"shared queue '{qname}': this process's producers released"
                ]
            finally:
                q.release_producers()  # whatever failed, the thread must not stay blocked
        assert [type(e) for e in errors] == [aqueue.QueueClosedError]
        assert leaks_since(before) == []
        assert not await q.is_closed()
