"""FIFOQueue: TF behaviours beyond the shared contract (multi-component elements,
shape-less queues, close and restoration details, parallel dequeue_up_to)."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

import anyio
import numpy as np
import pytest
from support import ints, settle, spawn

import aqueue

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


async def test_multi_component_enqueue_many_and_dequeue_many() -> None:
    """Several components are sliced and stacked together, in order."""
    q = aqueue.FIFOQueue(10, [np.int32, np.float32], shapes=[(), (2,)])
    counts = np.arange(4, dtype=np.int32)
    floats = np.arange(8, dtype=np.float32).reshape(4, 2)
    await q.enqueue_many((counts, floats))
    a, b = await q.dequeue()
    assert int(a) == 0
    np.testing.assert_array_equal(b, [0.0, 1.0])
    batch_a, batch_b = await q.dequeue_many(3)
    assert batch_a.dtype == np.int32
    assert batch_a.shape == (3,)
    assert batch_b.dtype == np.float32
    assert batch_b.shape == (3, 2)
    np.testing.assert_array_equal(batch_a, counts[1:])
    np.testing.assert_array_equal(batch_b, floats[1:])


async def test_dequeue_many_returns_a_copy() -> None:
    """A returned batch is not a view into the ring: later enqueues do not change it."""
    q = aqueue.FIFOQueue(3, np.int64, ())
    await q.enqueue_many(np.array([1, 2, 3]))
    batch = await q.dequeue_many(3)
    await q.enqueue_many(np.array([7, 8, 9]))
    assert ints(batch) == [1, 2, 3]


async def test_ring_wraps_around_in_order() -> None:
    """Batches that straddle the end of the ring keep FIFO order (two-slice copies)."""
    q = aqueue.FIFOQueue(5, np.int64, ())
    got: list[int] = []
    nxt = 0
    for k in [3, 4, 2, 5, 1, 4, 3]:
        await q.enqueue_many(np.arange(nxt, nxt + k))
        nxt += k
        got += ints(await q.dequeue_many(k))
    assert got == list(range(nxt))


async def test_shape_less_queue_takes_any_shape_but_refuses_batch_dequeue() -> None:
    """Without declared shapes, single ops accept any shape; dequeue_many/up_to raise
    ElementSpecError and consume nothing."""
    q = aqueue.FIFOQueue(5, np.float32)
    assert q.shapes is None
    await q.enqueue(np.zeros((2, 3), np.float32))
    await q.enqueue(7.0)
    await q.enqueue_many(np.ones((2, 4), np.float32))
    assert q.size() == 4
    for call in (q.dequeue_many, q.dequeue_up_to):
        with pytest.raises(aqueue.ElementSpecError, match=r"pass shapes=.*shapes=\(\) for scalars"):
            await call(2)
    with pytest.raises(aqueue.ElementSpecError):
        q.dequeue_many_nowait(2)
    with pytest.raises(aqueue.ElementSpecError):
        q.dequeue_up_to_nowait(2)
    assert q.size() == 4
    assert (await q.dequeue()).shape == (2, 3)
    assert float(await q.dequeue()) == 7.0
    assert (await q.dequeue()).shape == (4,)
    assert (await q.dequeue()).shape == (4,)


async def test_blocking_enqueue_before_close() -> None:
    """TF testBlockingEnqueueBeforeClose: full queue + pending enqueue(50); close; one
    dequeue unblocks the enqueue; then 20, 30, 40, 50 come out, then OutOfRange."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    await q.enqueue_many(np.array([10, 20, 30, 40]))
    async with anyio.create_task_group() as tg:
        pending = spawn(tg, q.enqueue, 50)
        await settle()
        q.close()
        await settle()
        assert pending.pending
        assert int(await q.dequeue()) == 10
        await settle()
        assert pending.returned
    assert [int(await q.dequeue()) for _ in range(4)] == [20, 30, 40, 50]
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue()


async def test_enqueue_many_larger_than_capacity_with_concurrent_dequeue_many() -> None:
    """TF: a big pending enqueue_many after close feeds a dequeue_many; the one that can
    no longer be filled fails, and a plain dequeue still gets the leftover."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    async with anyio.create_task_group() as tg:
        producer = spawn(tg, q.enqueue_many, np.arange(5))
        await settle()
        q.close()
        assert ints(await q.dequeue_many(3)) == [0, 1, 2]
        await settle()
        assert producer.returned
        with pytest.raises(aqueue.OutOfRangeError):
            await q.dequeue_many(3)
    assert ints(await q.dequeue_many(2)) == [3, 4]


async def test_blocked_dequeue_up_to_returns_partial_batch_on_close() -> None:
    """A dequeue_up_to waiting for n returns what is there, in order, when the queue closes."""
    q = aqueue.FIFOQueue(10, np.int64, ())
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue_up_to, 5)
        await settle()
        q.enqueue_many_nowait(np.array([3, 4]))
        await settle()
        assert op.pending
        q.close()
        await settle()
    assert ints(op.result()) == [3, 4]


async def test_partial_batch_goes_back_to_the_front() -> None:
    """Claims restored on close go back at the front, ahead of elements that arrived
    later, in original order."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    async with anyio.create_task_group() as tg:
        big = spawn(tg, q.dequeue_many, 5)
        await settle()
        q.enqueue_many_nowait(np.array([0, 1]))
        await settle()
        assert q.size() == 0
        # Cancel big before the next elements could reach it, then refill the queue.
        big.scope.cancel()
        q.enqueue_many_nowait(np.array([2, 3]))
        await settle()
    assert big.cancelled
    assert q.size() == 4
    q.close()
    assert ints(await q.dequeue_up_to(10)) == [0, 1, 2, 3]


async def test_parallel_dequeue_up_to_on_closed_queue() -> None:
    """TF testParallelDequeueUpTo: ten dequeue_up_to(101) loops on a closed
    1000-element queue deliver every element exactly once."""
    q = aqueue.FIFOQueue(1000, np.int64, ())
    q.enqueue_many_nowait(np.arange(1000))
    q.close()
    got: list[int] = []

    async def consume() -> None:
        while True:
            try:
                got.extend(ints(await q.dequeue_up_to(101)))
            except aqueue.OutOfRangeError:
                return

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(consume)
    assert sorted(got) == list(range(1000))


async def test_blocking_dequeue_many_from_closed_queue() -> None:
    """TF testBlockingDequeueManyFromClosedQueue: a blocked dequeue_many gets a full
    batch when one is present; the next fails once the queue is closed."""
    q = aqueue.FIFOQueue(10, np.int64, ())
    async with anyio.create_task_group() as tg:
        first = spawn(tg, q.dequeue_many, 4)
        await settle()
        second = spawn(tg, q.dequeue_many, 4)
        await settle()
        q.enqueue_many_nowait(np.arange(5))
        await settle()
        assert ints(first.result()) == [0, 1, 2, 3]
        assert second.pending
        q.close()
        await settle()
    assert isinstance(second.error, aqueue.OutOfRangeError)
    assert ints(q.dequeue_up_to_nowait(5)) == [4]


async def test_close_with_pending_dequeuers_and_no_data_raises_for_all() -> None:
    """TF testBlockingDequeueManyFromClosedEmptyQueue and friends: nobody hangs."""
    q = aqueue.FIFOQueue(3, np.int64, ())
    async with anyio.create_task_group() as tg:
        ops = [spawn(tg, q.dequeue), spawn(tg, q.dequeue_many, 2), spawn(tg, q.dequeue_up_to, 2)]
        await settle()
        q.close()
    assert all(isinstance(op.error, aqueue.OutOfRangeError) for op in ops)


async def test_queues_are_independent() -> None:
    """Separately constructed queues share nothing."""
    a = aqueue.FIFOQueue(3, np.int64, (), name="a")
    b = aqueue.FIFOQueue(3, np.int64, (), name="b")
    a.enqueue_nowait(1)
    assert (a.size(), b.size()) == (1, 0)
    assert (a.name, b.name) == ("a", "b")


async def test_size_reads_do_not_change_the_queue() -> None:
    """TF testDoesNotLoseValue: many size reads of a one-element queue all return 1."""
    q = aqueue.FIFOQueue(3, np.int64, ())
    q.enqueue_nowait(5)
    assert {q.size() for _ in range(500)} == {1}
    assert int(q.dequeue_nowait()) == 5


@pytest.mark.parametrize(
    "make",
    [
        lambda c: aqueue.FIFOQueue(c, np.int64, ()),
        lambda c: aqueue.FIFOQueue(c, object, ()),
        lambda c: aqueue.PaddingFIFOQueue(c, np.int64, [()]),
    ],
    ids=["ring", "ring-object", "padding"],
)
async def test_ring_matches_a_list_model_through_wraps_and_overflowing_restores(
    make: Any,
) -> None:
    """Seeded random ops (batch enqueues, batch dequeues, and cancelled claims restored
    after the freed slots were refilled, so the ring overflows and grows) keep exactly
    the order of a plain list model."""
    rng = random.Random(2026)
    for _ in range(60):
        cap = rng.randint(1, 5)
        q = make(cap)
        model: list[int] = []
        nxt = 0
        for _ in range(25):
            r = rng.random()
            if r < 0.4:
                k = rng.randint(1, cap)
                if k <= cap - q.size():
                    q.enqueue_many_nowait(np.arange(nxt, nxt + k))
                    model += range(nxt, nxt + k)
                    nxt += k
            elif r < 0.7 and q.size():
                k = rng.randint(1, q.size())
                assert ints(q.dequeue_many_nowait(k)) == model[:k]
                del model[:k]
            else:
                async with anyio.create_task_group() as tg:
                    victim = spawn(tg, q.dequeue_many, q.size() + cap + 1)
                    await settle()
                    assert q.size() == 0  # everything claimed
                    victim.scope.cancel()
                    k = cap
                    q.enqueue_many_nowait(np.arange(nxt, nxt + k))
                    model += range(nxt, nxt + k)
                    nxt += k
                assert victim.cancelled
            assert q.size() == len(model)
        assert (ints(q.dequeue_many_nowait(q.size())) if q.size() else []) == model


@pytest.mark.parametrize(
    "make",
    [
        lambda: aqueue.FIFOQueue(500, np.float32, (32, 32)),
        lambda: aqueue.RandomShuffleQueue(500, 0, np.float32, (32, 32), seed=1),
    ],
    ids=["ring", "pool"],
)
async def test_fixed_shape_storage_is_preallocated(make: Any) -> None:
    """A fixed-shape queue allocates capacity x element bytes up front and filling it
    allocates no Python object (nor copy) per element."""
    element = np.ones((32, 32), np.float32)
    batch = np.ones((100, 32, 32), np.float32)
    make()  # first use may import or initialise library code; measure a second queue
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        q = make()
        created = tracemalloc.get_traced_memory()[0]
        for _ in range(200):
            q.enqueue_nowait(element)
        for _ in range(3):
            q.enqueue_many_nowait(batch)
        filled = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    storage = 500 * element.nbytes
    assert storage <= created - before < storage + 64 * 1024
    assert q.size() == 500
    assert filled - created < 64 * 1024


@pytest.mark.parametrize("capacity", [2**62, 10**15])
@pytest.mark.parametrize(
    "make",
    [
        lambda c: aqueue.FIFOQueue(c, np.float32, (32, 32), name="frames"),
        lambda c: aqueue.PaddingFIFOQueue(c, np.float32, (32, 32), name="frames"),
        lambda c: aqueue.RandomShuffleQueue(c, 0, np.float32, (32, 32), name="frames"),
    ],
    ids=["fifo", "padding", "shuffle"],
)
def test_absurd_capacity_names_the_queue_and_the_bytes(capacity: int, make: Any) -> None:
    """A capacity that cannot be preallocated raises ElementSpecError naming the queue,
    the capacity and the bytes it would take, not numpy's own error."""
    with pytest.raises(aqueue.ElementSpecError) as info:
        make(capacity)
    message = str(info.value)
    assert "'frames'" in message
    assert f"capacity {capacity}" in message
    assert f"{capacity * 4096:,} bytes" in message


def test_repr_of_a_queue_whose_constructor_raised() -> None:
    """repr() works on a queue whose constructor raised (tracebacks show it)."""
    q = aqueue.FIFOQueue.__new__(aqueue.FIFOQueue)
    with pytest.raises(aqueue.ElementSpecError):
        q.__init__(10**15, np.float32, (32, 32))  # type: ignore[misc]
    assert repr(q) == "<FIFOQueue (not constructed)>"


class CountingLock:
    """A stand-in for an engine's lock that counts how often it is taken."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self.acquired = 0

    def acquire(self, *args: Any) -> bool:
        self.acquired += 1
        return self._lock.acquire(*args)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
async def test_a_dequeue_many_with_its_elements_there_takes_the_lock_once(kind: str) -> None:
    """With the elements already queued, ``dequeue_many`` is one engine step: the
    queue's lock is taken once (not once to look and again to take)."""
    if kind == "fifo":
        q: Any = aqueue.FIFOQueue(100, np.int64, ())
    else:
        q = aqueue.RandomShuffleQueue(100, 10, np.int64, (), seed=0)
    await q.enqueue_many(np.arange(64))
    counting = CountingLock()
    q._engine.lock = counting  # (instrumentation: the engine takes this lock for every step)
    batch = await q.dequeue_many(32)
    assert len(batch) == 32
    assert counting.acquired == 1
