"""A waiting batch dequeue on a FIFO ring fills its own batch.

When a dequeue_many/dequeue_up_to waits at the head of a FIFO queue, it claims what the
ring holds and later enqueues copy straight into its batch (one copy per element instead
of two). Claimed elements have left the queue (TF: they do not count in size()) and go
back to the front, in order, if the dequeue is cancelled or cannot be satisfied.
"""

from __future__ import annotations

import asyncio

import anyio
import numpy as np
import pytest
from support import ints, settle, spawn

import aqueue


@pytest.mark.anyio
async def test_waiting_batch_takes_ring_contents_then_new_rows_in_order() -> None:
    """Elements already queued come first, then enqueued rows; the rest stays queued."""
    q = aqueue.FIFOQueue(8, np.int64, ())
    q.enqueue_many_nowait([0, 1, 2])
    async with anyio.create_task_group() as tg:
        q.enqueue_many_nowait([])  # no-op
        waiter = spawn(tg, q.dequeue_many, 5)
        await settle()
        assert q.size() == 0  # the three were claimed by the waiting batch
        assert q.statistics().tasks_waiting_dequeue == 1
        await q.enqueue_many(np.array([3, 4, 5, 6]))
        await settle()
        assert ints(waiter.result()) == [0, 1, 2, 3, 4]
    assert ints(q.dequeue_many_nowait(2)) == [5, 6]
    stats = q.statistics()
    assert (stats.enqueued_total, stats.dequeued_total) == (7, 7)


# pytest-asyncio: this counts the task's steps, and asyncio runs ready tasks in FIFO
# order (one sleep(0) is one step of the task); trio shuffles them.
@pytest.mark.asyncio
async def test_batch_dequeue_that_must_wait_parks_before_yielding() -> None:
    """A dequeue_many that cannot complete registers in its first step (its wait is its
    checkpoint), so an enqueue that runs right after it copies into its batch: nothing
    lands in the ring, and the claimed rows have left size()."""
    q = aqueue.FIFOQueue(8, np.int64, ())
    task = asyncio.ensure_future(q.dequeue_many(4))
    await asyncio.sleep(0)  # exactly one step of the task
    assert q.statistics().tasks_waiting_dequeue == 1
    q.enqueue_many_nowait(np.array([0, 1, 2]))
    assert q.size() == 0
    q.enqueue_nowait(3)
    assert ints(await task) == [0, 1, 2, 3]
    assert q.statistics().dequeued_total == 4


@pytest.mark.anyio
async def test_batch_dequeue_that_can_complete_checkpoints_first() -> None:
    """A dequeue_many whose elements are there takes them only after its checkpoint:
    cancelled there, it consumes nothing (task.cancel() there: test_cancellation.py)."""
    q = aqueue.FIFOQueue(8, np.int64, ())
    q.enqueue_many_nowait(np.array([0, 1, 2, 3]))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await q.dequeue_many(4)  # cancelled at its checkpoint, before taking
    assert scope.cancelled_caught
    assert q.size() == 4
    assert ints(q.dequeue_many_nowait(4)) == [0, 1, 2, 3]


@pytest.mark.anyio
async def test_two_waiting_batches_fill_in_arrival_order() -> None:
    """Single enqueues fill the first waiting batch, then the second."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    async with anyio.create_task_group() as tg:
        a = spawn(tg, q.dequeue_many, 3)
        await settle()
        b = spawn(tg, q.dequeue_up_to, 2)
        await settle()
        for i in range(5):
            await q.enqueue(i)
        await settle()
        assert ints(a.result()) == [0, 1, 2]
        assert ints(b.result()) == [3, 4]


@pytest.mark.anyio
async def test_cancelled_filling_batch_puts_claims_back_in_front() -> None:
    """Cancelling a half-filled batch returns its elements to the front, in order,
    ahead of elements enqueued later; the next waiter receives them."""
    q = aqueue.FIFOQueue(4, [np.int64, np.float32], [(), (2,)])
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, q.dequeue_many, 4)
        await settle()
        await q.enqueue_many((np.array([0, 1]), np.ones((2, 2), np.float32)))
        await settle()
        assert q.size() == 0
        victim.scope.cancel()
        await settle()
        assert victim.cancelled
        assert q.size() == 2
        await q.enqueue((2, [2.0, 2.0]))
    counts, floats = q.dequeue_many_nowait(3)
    assert ints(counts) == [0, 1, 2]
    assert floats.tolist() == [[1.0, 1.0], [1.0, 1.0], [2.0, 2.0]]


@pytest.mark.anyio
async def test_close_returns_claims_and_serves_the_next_waiter() -> None:
    """Closing fails the waiting batch without consuming anything; the single dequeue
    behind it then gets the first element."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    async with anyio.create_task_group() as tg:
        big = spawn(tg, q.dequeue_many, 3)
        await settle()
        small = spawn(tg, q.dequeue)
        await settle()
        await q.enqueue_many(np.array([7, 8]))
        await settle()
        q.close()
        await settle()
        assert isinstance(big.error, aqueue.OutOfRangeError)
        assert "requested 3, current size 2" in str(big.error)
        assert int(small.result()) == 7
    assert ints(q.dequeue_up_to_nowait(5)) == [8]


@pytest.mark.anyio
async def test_thread_dequeue_many_fills_from_async_producer() -> None:
    """A thread blocked in dequeue_many receives rows from async enqueues, in order."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    view = q.blocking()
    result: list[int] = []

    def consume() -> None:
        result.extend(ints(view.dequeue_many(6, timeout=20)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, consume)
        for i in range(6):
            await q.enqueue(i)
    assert result == list(range(6))


@pytest.mark.anyio
async def test_next_waiting_batch_claims_the_ring_when_it_reaches_the_head() -> None:
    """Two waiting batch dequeues; an enqueue_many gives the first its rows and leaves
    one in the ring. When the first completes, the second reaches the head and claims
    that row before any later enqueue: it gets [3, 4], in order, not [4, 3]."""
    q = aqueue.FIFOQueue(8, np.int64, ())
    async with anyio.create_task_group() as tg:
        first = spawn(tg, q.dequeue_many, 2)
        await settle()
        second = spawn(tg, q.dequeue_many, 2)
        await settle()
        q.enqueue_many_nowait(np.array([1, 2, 3]))
        await settle()
        assert ints(first.result()) == [1, 2]
        assert second.pending
        q.enqueue_nowait(4)
        await settle()
        assert ints(second.result()) == [3, 4]
