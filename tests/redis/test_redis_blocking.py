"""The thread view (``q.blocking()``): blocking methods on the synchronous client, with
``timeout=`` raising TimeoutError and changing nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import numpy as np
import pytest

import aqueue
import aqueue.redis

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("payload_storage"),
]


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as server:
        yield server


async def in_thread(fn: Any, *args: Any) -> Any:
    return await anyio.to_thread.run_sync(fn, *args)


async def test_threads_and_tasks_share_the_queue(srv: Any, qname: str) -> None:
    q = await srv.fifo_queue(qname, 4, np.int64, ())
    b = q.blocking()
    assert b.queue is q

    def produce() -> None:
        b.enqueue_many(np.arange(10))
        b.enqueue(10)

    async with anyio.create_task_group() as tg:
        tg.start_soon(in_thread, produce)
        got = [int(v) for v in await q.dequeue_many(6)]
        got += [int(v) for v in await in_thread(b.dequeue_many, 3)]
        got += [int(await in_thread(b.dequeue))]
        got += [int(v) for v in await q.dequeue_up_to(1)]
    assert got == list(range(11))
    assert await in_thread(b.size) == 0
    await in_thread(b.close)
    assert await q.is_closed()
    with pytest.raises(aqueue.OutOfRangeError):
        await in_thread(b.dequeue_up_to, 3)


async def test_timeouts_change_nothing(srv: Any, qname: str) -> None:
    q = await srv.random_shuffle_queue(qname, 3, 0, np.int64, (), seed=1)
    b = q.blocking()
    with pytest.raises(TimeoutError, match="timed out"):
        await in_thread(b.dequeue, 0.1)
    await q.enqueue_many(np.arange(2))
    with pytest.raises(TimeoutError):
        await in_thread(b.dequeue_many, 3, 0.1)
    with pytest.raises(TimeoutError):  # progressive (n > capacity): claims go back
        await in_thread(b.dequeue_many, 5, 0.2)
    assert await q.size() == 2
    with pytest.raises(TimeoutError):  # all-or-nothing with a timeout
        await in_thread(b.enqueue_many, np.arange(2), 0.1)
    assert await q.size() == 2
    await q.enqueue(2)
    with pytest.raises(TimeoutError):
        await in_thread(b.enqueue, 9, 0.1)
    with pytest.raises(aqueue.ElementSpecError, match="at once"):
        await in_thread(b.enqueue_many, np.arange(4), 1.0)
    s = await q.statistics()
    assert (s.size, s.enqueued_total, s.tasks_waiting_enqueue, s.tasks_waiting_dequeue) == (
        3,
        3,
        0,
        0,
    )
    assert sorted(int(v) for v in await q.dequeue_many(3)) == [0, 1, 2]


async def test_view_methods_raise_on_the_event_loop_thread(srv: Any, qname: str) -> None:
    """As in process: a blocking method called where the event loop runs raises
    RuntimeError (it would stall the loop, and on a full queue never return, since the
    consumer task could not run) and changes nothing."""
    q = await srv.fifo_queue(qname, 4, np.int64, ())
    await q.enqueue_many(np.arange(2))
    b = q.blocking()
    calls: list[Any] = [
        lambda: b.enqueue(2),
        lambda: b.enqueue(2, timeout=1.0),
        lambda: b.enqueue_many(np.array([2, 3])),
        lambda: b.dequeue(),
        lambda: b.dequeue_many(1),
        lambda: b.dequeue_up_to(1),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="event-loop thread"):
            call()
    s = await q.statistics()
    assert (s.size, s.enqueued_total, s.dequeued_total) == (2, 2, 0)
    assert await in_thread(b.dequeue) == 0  # other threads still may


async def test_view_dequeue_burst(srv: Any, qname: str) -> None:
    """The thread view's dequeue_burst takes 1..n of what is there at once; with a
    timeout on an empty queue it raises TimeoutError and takes nothing; once the queue
    is closed and empty it raises OutOfRangeError."""
    q = await srv.fifo_queue(qname, 8, np.int64, ())
    b = q.blocking()
    with pytest.raises(TimeoutError, match="dequeue_burst"):
        await in_thread(b.dequeue_burst, 4, 0.1)
    await q.enqueue_many(np.arange(6))
    assert [int(v) for v in await in_thread(b.dequeue_burst, 4)] == [0, 1, 2, 3]
    assert [int(v) for v in await in_thread(b.dequeue_burst, 4, 1.0)] == [4, 5]
    s = await q.statistics()
    assert (s.size, s.dequeued_total, s.tasks_waiting_dequeue) == (0, 6, 0)
    with pytest.raises(RuntimeError, match="event-loop thread"):
        b.dequeue_burst(1)
    await q.aclose()
    with pytest.raises(aqueue.OutOfRangeError):
        await in_thread(b.dequeue_burst, 4)


async def test_close_and_aclose_as_a_table_has_them(srv: Any, qname: str) -> None:
    """A queue has the blocking ``close()`` beside ``aclose()``, as a table does: from a
    thread it closes the queue on the server (what is left is still dequeued, then
    OutOfRangeError); ``cancel_pending_enqueues`` fails a waiting enqueue; the thread
    view's close is the same call."""
    q = await srv.fifo_queue(qname, 2, np.int64, ())
    await q.enqueue_many(np.arange(2))
    failed: list[BaseException] = []

    async def pending() -> None:
        try:
            await q.enqueue(9)
        except aqueue.QueueClosedError as exc:
            failed.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pending)
        while (await q.statistics()).tasks_waiting_enqueue == 0:  # noqa: ASYNC110
            await anyio.sleep(0.01)
        await in_thread(lambda: q.close(cancel_pending_enqueues=True))
    assert len(failed) == 1
    assert "cancel_pending_enqueues=True" in str(failed[0])
    assert await q.is_closed()
    assert [int(v) for v in await q.dequeue_up_to(5)] == [0, 1]
    other = await srv.fifo_queue(qname + "-2", 2, np.int64, ())
    await in_thread(other.blocking().close)
    assert await other.is_closed()
    with pytest.raises(aqueue.OutOfRangeError):
        await other.dequeue()
