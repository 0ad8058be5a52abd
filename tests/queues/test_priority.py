"""PriorityQueue: ascending int64 priority, priority validation, dequeue_many waits for a
globally sorted batch (TF priority_queue_test)."""

from __future__ import annotations

import random

import anyio
import numpy as np
import pytest
from support import settle, spawn

import aqueue

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def _pq(capacity: int = 100) -> aqueue.PriorityQueue:
    return aqueue.PriorityQueue(capacity, [np.float32, object], [(2,), ()])


async def test_insert_once_read_once_sorts() -> None:
    """Elements come out in ascending priority; side values travel with their priority."""
    q = _pq()
    prios = random.Random(5).sample(range(-50, 50), 40)
    for p in prios:
        await q.enqueue((p, [p, -p], f"s{p}"))
    out = []
    for _ in prios:
        p, arr, s = await q.dequeue()
        assert isinstance(p, np.integer)
        assert arr.tolist() == [p, -p]
        assert s == f"s{p}"
        out.append(int(p))
    assert out == sorted(prios)


async def test_insert_once_read_many_sorts() -> None:
    """enqueue_many with a priority vector, dequeue_many returns sorted batches."""
    q = _pq()
    prios = np.array(random.Random(6).sample(range(1000), 30), dtype=np.int64)
    vals = np.stack([prios, prios], axis=1).astype(np.float32)
    names = np.array([str(p) for p in prios], dtype=object)
    await q.enqueue_many((prios, vals, names))
    got: list[int] = []
    for _ in range(3):
        p, v, s = await q.dequeue_many(10)
        assert p.dtype == np.int64
        assert p.shape == (10,)
        assert v.shape == (10, 2)
        assert v[:, 0].tolist() == p.tolist()
        assert s.tolist() == [str(x) for x in p]
        got += p.tolist()
    assert got == sorted(prios.tolist())


async def test_ties_keep_side_values_with_their_priority() -> None:
    """Equal priorities come out together, each with its own side value."""
    q = aqueue.PriorityQueue(20, np.int64, ())
    rng = random.Random(9)
    pairs = [(rng.randint(0, 3), i) for i in range(16)]
    for p, v in pairs:
        q.enqueue_nowait((p, v))
    out = [tuple(int(x) for x in q.dequeue_nowait()) for _ in pairs]
    assert [p for p, _ in out] == sorted(p for p, _ in pairs)
    assert sorted(out) == sorted(pairs)


async def test_extreme_priorities() -> None:
    """The whole int64 range is usable, negatives included."""
    q = aqueue.PriorityQueue(5, np.int64, ())
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    for p in (0, hi, lo, -1):
        await q.enqueue((p, 7))
    assert [int((await q.dequeue())[0]) for _ in range(4)] == [lo, -1, 0, hi]


@pytest.mark.parametrize(
    "priority",
    [1.5, "3", np.float64(2.0), np.uint64(2**63), 2**70, None],
    ids=["float", "str", "np-float", "uint64-big", "overflow", "none"],
)
async def test_priority_not_castable_to_int64_raises(priority: object) -> None:
    """A priority numpy/safe rules cannot make an int64 raises ElementSpecError and
    changes nothing."""
    q = aqueue.PriorityQueue(5, np.int64, ())
    q.enqueue_nowait((1, 1))
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue((priority, 2))
    with pytest.raises(aqueue.ElementSpecError):
        q.enqueue_nowait((priority, 2))
    assert q.size() == 1


async def test_narrow_integer_priorities_are_accepted() -> None:
    """Priorities of smaller integer dtypes cast safely to int64."""
    q = aqueue.PriorityQueue(5, np.int64, ())
    q.enqueue_nowait((np.int8(3), 0))
    q.enqueue_nowait((np.uint32(1), 0))
    q.enqueue_many_nowait((np.array([2], np.int16), np.array([0])))
    assert [int(q.dequeue_nowait()[0]) for _ in range(3)] == [1, 2, 3]


async def test_non_scalar_priority_raises() -> None:
    """A non-scalar priority (or a batch priority that is not a vector) raises."""
    q = aqueue.PriorityQueue(5, np.int64, ())
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue(([1, 2], 3))
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue_many((np.array([[1], [2]]), np.array([3, 4])))
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue_many((np.array([1, 2, 3]), np.array([3, 4])))
    assert q.size() == 0


async def test_dequeue_many_waits_until_n_are_present() -> None:
    """dequeue_many(n) claims nothing early: it waits for n and returns the n smallest."""
    q = aqueue.PriorityQueue(5, np.int64, ())
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue_many, 3)
        await settle()
        await q.enqueue_many((np.array([9, 4]), np.array([90, 40])))
        await settle()
        assert op.pending
        assert q.size() == 2
        await q.enqueue((1, 10))
        await settle()
        p, v = op.result()
    assert p.tolist() == [1, 4, 9]
    assert v.tolist() == [10, 40, 90]
    assert q.size() == 0


async def test_dequeue_many_takes_the_smallest_of_everything_present() -> None:
    """A batch is globally sorted: the n smallest of all stored elements, ascending."""
    q = aqueue.PriorityQueue(10, np.int64, ())
    q.enqueue_many_nowait((np.array([5, 3, 8, 1, 9, 2]), np.arange(6)))
    p, _ = await q.dequeue_many(3)
    assert p.tolist() == [1, 2, 3]
    p, _ = await q.dequeue_many(3)
    assert p.tolist() == [5, 8, 9]


async def test_closed_priority_queue() -> None:
    """Closed: dequeue_many with too few raises; dequeue_up_to returns the sorted rest."""
    q = aqueue.PriorityQueue(10, np.int64, ())
    q.enqueue_many_nowait((np.array([3, 1, 2]), np.zeros(3, np.int64)))
    q.close()
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue_many(4)
    p, _ = await q.dequeue_up_to(4)
    assert p.tolist() == [1, 2, 3]
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue_up_to(4)


async def test_many_producers_and_consumers_on_small_queue() -> None:
    """TF testRoundTripFillsCapacityMultiThreadedEnqueueAndDequeue: everything arrives."""
    q = aqueue.PriorityQueue(10, np.int64, ())
    got: list[tuple[int, int]] = []

    async def produce(w: int) -> None:
        rng = random.Random(w)
        for i in range(50):
            await q.enqueue((rng.randint(-5, 5), w * 50 + i))

    async def consume() -> None:
        for _ in range(25):
            p, v = await q.dequeue_many(2)
            got.extend(zip(p.tolist(), v.tolist()))

    async with anyio.create_task_group() as tg:
        for w in range(4):
            tg.start_soon(produce, w)
            tg.start_soon(consume)
    assert sorted(v for _, v in got) == list(range(200))


async def test_properties_lead_with_the_priority() -> None:
    """The constructor's dtypes/shapes exclude the priority; the properties describe
    the whole element (int64 scalar priority first), as in TF."""
    q = _pq()
    assert q.dtypes == (np.dtype(np.int64), np.dtype(np.float32), np.dtype(object))
    assert q.shapes == ((), (2,), ())
    assert q.names is None


async def test_large_uint64_priorities_in_a_batch_raise() -> None:
    """uint64 priorities above the int64 range are refused, not wrapped."""
    q = aqueue.PriorityQueue(5, np.int64, ())
    with pytest.raises(aqueue.ElementSpecError):
        q.enqueue_many_nowait((np.array([1, 2**63], np.uint64), np.array([0, 0])))
    assert q.size() == 0


async def test_equal_priorities_come_out_in_arrival_order() -> None:
    """Ties are broken by arrival order (documented), also across restores."""
    q = aqueue.PriorityQueue(10, np.int64, ())
    for v in range(6):
        q.enqueue_nowait((v % 2, v))
    assert [int(q.dequeue_nowait()[1]) for _ in range(6)] == [0, 2, 4, 1, 3, 5]


async def test_dequeue_many_larger_than_capacity_does_not_deadlock() -> None:
    """dequeue_many(n > capacity) cannot wait for n at once: it claims progressively and
    returns n elements, sorted within the batch."""
    q = aqueue.PriorityQueue(2, np.int64, ())
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue_many, 5)
        await settle()
        for prio in (4, 2, 9, 1, 7):
            await q.enqueue((prio, prio))
        await settle()
        p, v = op.result()
    assert p.tolist() == sorted(p.tolist())
    assert sorted(v.tolist()) == [1, 2, 4, 7, 9]


@pytest.mark.anyio
async def test_object_elements_that_are_tuples_batch_as_one_object_each() -> None:
    """Object elements that are tuples (of different lengths) come back from a batch
    dequeue as they went in, one object per element, and nothing is lost."""
    q = aqueue.PriorityQueue(4, object, ())
    await q.enqueue((2, ("b", 2, 3)))
    await q.enqueue((1, ("a", 1)))
    priorities, objs = await q.dequeue_many(2)
    assert priorities.tolist() == [1, 2]
    assert list(objs) == [("a", 1), ("b", 2, 3)]
    assert q.size() == 0
