"""A stage queue's capacity changed while it is in use (``StageQueue.set_capacity``, what
the pipeline's tuner calls for ``capacity="auto"`` and ``prefetch("auto")``).

Growing admits a waiting enqueue at once; shrinking drops nothing, lets the queue drain
below the new capacity, and keeps a waiting enqueue that no longer fits waiting until
there is room, then admits it; a waiting enqueue cancelled during a shrink leaves
nothing behind and takes nothing with it. Task and thread enqueues, both backends, and
native asyncio cancellation.
"""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest
from support import poll, settle, spawn

from aqueue import ElementSpecError, QueueFull
from aqueue._queues._fifo import StageQueue

pytestmark = pytest.mark.timeout(30)


def _full(capacity: int, name: str = "s") -> StageQueue:
    q = StageQueue(capacity, name=name)
    q.enqueue_many_nowait(list(range(capacity)))
    return q


def _drain(q: StageQueue) -> list[object]:
    return list(q.dequeue_up_to_nowait(q.size())) if q.size() else []


@pytest.mark.anyio
async def test_growing_admits_a_waiting_task_enqueue_at_once() -> None:
    q = _full(2)
    async with anyio.create_task_group() as tg:
        put = spawn(tg, q.enqueue, "late")
        await settle()
        many = spawn(tg, q.enqueue_many, ["a", "b"])
        await settle()
        assert put.pending
        assert many.pending
        q.set_capacity(5)  # room for all three, and nothing was taken
        await settle()
        assert put.returned
        assert many.returned
    assert q.capacity == 5
    assert _drain(q) == [0, 1, "late", "a", "b"]
    q._engine.check_invariants()


@pytest.mark.anyio
async def test_growing_admits_a_waiting_thread_enqueue_at_once() -> None:
    q = _full(2)
    done = threading.Event()

    def produce() -> None:
        q.blocking().enqueue_many(list(range(2, 12)))  # a burst of 10 into a full queue
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        await poll(lambda: q.statistics().tasks_waiting_enqueue > 0)
        assert not done.is_set()
        q.set_capacity(12)
        assert await anyio.to_thread.run_sync(done.wait, 10.0)
    finally:
        q.close(cancel_pending_enqueues=True)
        thread.join()
    assert _drain(q) == list(range(12))


@pytest.mark.anyio
async def test_shrinking_drains_below_the_new_capacity_then_admits_the_waiter() -> None:
    q = _full(8)
    q.set_capacity(3)
    assert q.size() == 8  # nothing dropped
    async with anyio.create_task_group() as tg:
        put = spawn(tg, q.enqueue, "late")
        await settle()
        taken = []
        for _ in range(5):  # down to 3: still no room under the new capacity
            taken.append(await q.dequeue())
            await settle()
            assert put.pending
        taken.append(await q.dequeue())  # 2 held: room for one
        await settle()
        assert put.returned
    assert taken + _drain(q) == [*range(8), "late"]
    q._engine.check_invariants()


@pytest.mark.anyio
async def test_a_waiting_burst_larger_than_the_shrunk_capacity_still_goes_in() -> None:
    """A burst waiting whole (its rest within half the old capacity) that no longer
    fits at all is admitted in pieces as room frees: it does not wait for ever."""
    q = _full(16)
    got: list[object] = []
    async with anyio.create_task_group() as tg:
        many = spawn(tg, q.enqueue_many, list(range(16, 24)))  # 8 rows: within 16 // 2
        await settle()
        q.set_capacity(4)
        with anyio.fail_after(10):
            while len(got) < 24:
                got.append(await q.dequeue())
                assert q.size() <= max(4, 16 - len(got))  # never refilled past it
        assert many.returned
    assert got == list(range(24))


@pytest.mark.anyio
async def test_a_waiting_thread_burst_is_not_left_waiting_for_more_room_than_there_is() -> None:
    """A thread's long burst waits for ``whole_rest`` rows of room; after a shrink it
    needs no more than the new capacity's half."""
    q = _full(64)
    done = threading.Event()

    def produce() -> None:
        q.blocking().enqueue_many(list(range(64, 164)))  # 100 rows, longer than 64 // 2
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    got: list[object] = []
    try:
        await poll(lambda: q.statistics().tasks_waiting_enqueue > 0)
        q.set_capacity(8)
        with anyio.fail_after(10):
            while len(got) < 164:  # (no dequeue waits: a waiting one would admit it)
                if q.size():
                    got.append(q.dequeue_nowait())
                else:
                    await anyio.sleep(0.001)
    finally:
        q.close(cancel_pending_enqueues=True)
        thread.join()
    assert done.is_set()
    assert got == list(range(164))


@pytest.mark.anyio
@pytest.mark.parametrize("op", ["enqueue", "enqueue_many"])
async def test_a_waiting_enqueue_cancelled_during_a_shrink_loses_nothing(op: str) -> None:
    q = _full(4)
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, getattr(q, op), "v" if op == "enqueue" else ["v1", "v2"])
        await settle()
        other = spawn(tg, q.enqueue, "o")
        await settle()
        q.set_capacity(2)
        await q.dequeue()  # 3 held, above the new capacity: both still wait
        await settle()
        assert victim.pending
        assert other.pending
        victim.scope.cancel()
        await settle()
        assert victim.cancelled
        rest = [await q.dequeue() for _ in range(2)]  # 1 held: room for "o"
        await settle()
        assert other.returned
    assert rest + _drain(q) == [1, 2, 3, "o"]
    st = q.statistics()
    assert st.enqueued_total == 5
    assert st.dequeued_total == 5
    q._engine.check_invariants()


@pytest.mark.asyncio  # native asyncio cancellation: task.cancel() and asyncio.wait_for
@pytest.mark.parametrize("how", ["task.cancel", "wait_for"])
async def test_native_cancellation_of_a_waiting_enqueue_during_a_shrink(how: str) -> None:
    q = _full(4)
    if how == "task.cancel":
        task = asyncio.ensure_future(q.enqueue_many(["v1", "v2"]))
        await asyncio.sleep(0.01)
        q.set_capacity(1)
        q.dequeue_nowait()  # 3 held, above the new capacity
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        shrink = asyncio.get_running_loop().call_later(0.005, q.set_capacity, 1)
        with pytest.raises(asyncio.TimeoutError):  # (the built-in TimeoutError from 3.11 on)
            await asyncio.wait_for(q.enqueue_many(["v1", "v2"]), 0.05)
        shrink.cancel()
        q.dequeue_nowait()
    assert q.capacity == 1
    assert _drain(q) == [1, 2, 3]
    q.set_capacity(3)
    await q.enqueue("after")
    assert _drain(q) == ["after"]
    q._engine.check_invariants()


@pytest.mark.parametrize("bad", ["big", 0, -3, 2.5, True, None])
def test_a_bad_capacity_is_refused_and_changes_nothing(bad: object) -> None:
    q = _full(4)
    with pytest.raises(ElementSpecError, match=r"StageQueue 's': capacity must be"):
        q.set_capacity(bad)  # type: ignore[arg-type]  # (the bad input under test)
    assert q.capacity == 4
    assert q.statistics().capacity == 4
    with pytest.raises(QueueFull):
        q.enqueue_nowait("x")
