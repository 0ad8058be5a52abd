"""When a new enqueue may pass queued enqueues (aqueue's convoy rule).

A new enqueue is admitted ahead of queued ones only when the queue has room for it *and*
for everything the queued enqueues still need, and none of them has started admitting
(so a pending enqueue_many stays contiguous). Without the rule, producer threads that
find the queue full hand every element over through a thread wake-up.
"""

from __future__ import annotations

import threading

import anyio
import numpy as np
import pytest
from support import ints, settle, spawn

import aqueue


@pytest.mark.anyio
async def test_new_enqueue_passes_only_with_room_for_the_queued_ones() -> None:
    """With one queued enqueue and two free slots, one new element fits, a second does not."""
    q = aqueue.FIFOQueue(3, np.int64, ())
    q.enqueue_many_nowait([0, 1, 2])
    async with anyio.create_task_group() as tg:
        waiter = spawn(tg, q.enqueue, 10)
        await settle()
        assert ints(q.dequeue_many_nowait(2)) == [0, 1]
        q.enqueue_nowait(11)  # room for it and for the queued enqueue
        with pytest.raises(aqueue.QueueFull):
            q.enqueue_nowait(12)  # the last slot is the queued enqueue's
        await settle()
        assert waiter.returned
    assert sorted(ints(q.dequeue_many_nowait(3))) == [2, 10, 11]


@pytest.mark.anyio
async def test_started_enqueue_many_is_never_interleaved() -> None:
    """Once a queued enqueue_many has admitted part of its batch, nothing passes it."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    q.enqueue_many_nowait([0, 1, 2])
    async with anyio.create_task_group() as tg:
        big = spawn(tg, q.enqueue_many, np.array([10, 11]))
        await settle()
        assert q.size() == 4  # 10 is in, 11 waits
        assert ints(q.dequeue_many_nowait(3)) == [0, 1, 2]
        with pytest.raises(aqueue.QueueFull):
            q.enqueue_nowait(99)  # would land between 10 and 11
        await settle()
        assert big.returned
        q.enqueue_nowait(12)
    assert ints(q.dequeue_many_nowait(3)) == [10, 11, 12]


@pytest.mark.anyio
async def test_threads_on_a_full_queue_keep_every_element_once() -> None:
    """Four producer threads against a full queue: every element arrives once, in each
    thread's order, whichever thread passes which."""
    q = aqueue.FIFOQueue(8, np.int64, ())
    view = q.blocking()
    per_thread = 500

    def produce(t: int) -> None:
        for i in range(per_thread):
            view.enqueue(t * 10_000 + i)

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    got: list[int] = []
    with anyio.fail_after(30):
        while len(got) < 4 * per_thread:
            got.append(int(await q.dequeue()))
    for th in threads:
        th.join()
    assert sorted(got) == sorted(t * 10_000 + i for t in range(4) for i in range(per_thread))
    for t in range(4):
        mine = [v for v in got if v // 10_000 == t]
        assert mine == sorted(mine)
