"""PaddingFIFOQueue: None dimensions, padding with 0 and "" (TF
padding_fifo_queue_test)."""

from __future__ import annotations

import anyio
import numpy as np
import pytest
from support import settle, spawn

import aqueue

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def _ragged_queue(capacity: int = 10) -> aqueue.PaddingFIFOQueue:
    return aqueue.PaddingFIFOQueue(capacity, [np.int32, object], [(None,), (None,)])


async def test_shapes_are_required() -> None:
    """PaddingFIFOQueue needs declared shapes (rank fixed, dimensions may be None)."""
    with pytest.raises(aqueue.ElementSpecError):
        aqueue.PaddingFIFOQueue(5, np.int32, None)
    q = aqueue.PaddingFIFOQueue(5, np.int32, (None, 3))
    assert q.shapes == ((None, 3),)


async def test_dequeue_many_pads_numbers_with_zero_and_strings_with_empty() -> None:
    """Batch dequeue pads each None dimension to the batch maximum: 0 and ""."""
    q = _ragged_queue()
    await q.enqueue((np.array([1, 2], np.int32), ["a"]))
    await q.enqueue(([3], ["b", "c", "d"]))
    ints, strs = await q.dequeue_many(2)
    assert ints.dtype == np.int32
    assert ints.tolist() == [[1, 2], [3, 0]]
    assert strs.dtype == object
    assert strs.tolist() == [["a", "", ""], ["b", "c", "d"]]


async def test_single_dequeue_is_not_padded() -> None:
    """A single dequeue returns each element with its own shape."""
    q = _ragged_queue()
    await q.enqueue(([1, 2, 3], ["x"]))
    await q.enqueue(([4], ["y", "z"]))
    a, s = await q.dequeue()
    assert a.tolist() == [1, 2, 3]
    assert s.tolist() == ["x"]
    a, s = await q.dequeue()
    assert a.tolist() == [4]
    assert s.tolist() == ["y", "z"]


async def test_padding_is_per_batch() -> None:
    """Each batch pads to its own maximum, not to the largest element ever seen."""
    q = aqueue.PaddingFIFOQueue(10, np.float32, [(None,)])
    for n in (5, 1, 2, 1):
        await q.enqueue(np.ones(n, np.float32))
    big = await q.dequeue_many(2)
    small = await q.dequeue_many(2)
    assert big.shape == (2, 5)
    assert small.shape == (2, 2)
    assert small.tolist() == [[1.0, 1.0], [1.0, 0.0]]


async def test_two_none_dimensions_pad_independently() -> None:
    """Several None dimensions are padded each to its own maximum."""
    q = aqueue.PaddingFIFOQueue(4, np.int64, [(None, None)])
    await q.enqueue(np.ones((1, 3), np.int64))
    await q.enqueue(np.full((2, 1), 2, np.int64))
    batch = await q.dequeue_many(2)
    assert batch.shape == (2, 2, 3)
    assert batch.tolist() == [[[1, 1, 1], [0, 0, 0]], [[2, 0, 0], [2, 0, 0]]]


async def test_enqueue_many_with_padded_batch() -> None:
    """enqueue_many takes a (rectangular) batch; elements come back with that shape."""
    q = aqueue.PaddingFIFOQueue(10, np.int32, [(None, 2)])
    await q.enqueue_many(np.arange(12, dtype=np.int32).reshape(2, 3, 2))
    first = await q.dequeue()
    assert first.shape == (3, 2)
    assert first.tolist() == [[0, 1], [2, 3], [4, 5]]


async def test_known_dimensions_are_still_checked() -> None:
    """A known dimension or the rank that does not match raises ElementSpecError naming
    expected and got; the queue is unchanged."""
    q = aqueue.PaddingFIFOQueue(5, np.int32, [(None, 3)])
    with pytest.raises(aqueue.ElementSpecError, match=r"\(\?, 3\).*\(2, 4\)"):
        await q.enqueue(np.zeros((2, 4), np.int32))
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue(np.zeros((3,), np.int32))
    with pytest.raises(aqueue.ElementSpecError):
        q.enqueue_many_nowait(np.zeros((2, 2, 4), np.int32))
    assert q.size() == 0
    assert q.statistics().enqueued_total == 0


async def test_zero_size_dequeues_with_dynamic_shapes() -> None:
    """dequeue_many(0)/dequeue_up_to(0) work with None dimensions."""
    q = _ragged_queue()
    await q.enqueue(([1], ["a"]))
    for batch in (await q.dequeue_many(0), await q.dequeue_up_to(0)):
        ints, strs = batch
        assert len(ints) == 0
        assert len(strs) == 0
    assert q.size() == 1


async def test_dequeue_up_to_after_close_pads_the_remainder() -> None:
    """dequeue_up_to after close returns the remainder, padded to its own maximum."""
    q = aqueue.PaddingFIFOQueue(10, np.int32, [(None,)])
    for n in (1, 4, 2):
        await q.enqueue(np.full(n, n, np.int32))
    assert (await q.dequeue()).tolist() == [1]
    q.close()
    batch = await q.dequeue_up_to(5)
    assert batch.tolist() == [[4, 4, 4, 4], [2, 2, 0, 0]]
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue_up_to(5)


async def test_named_components_are_padded() -> None:
    """Names give dict elements and dict batches; padding applies per component."""
    q = aqueue.PaddingFIFOQueue(4, [np.int64, object], [(None,), ()], names=["ids", "path"])
    await q.enqueue({"ids": [1, 2, 3], "path": "a.txt"})
    await q.enqueue({"ids": [4], "path": "b.txt"})
    batch = await q.dequeue_many(2)
    assert set(batch) == {"ids", "path"}
    assert batch["ids"].tolist() == [[1, 2, 3], [4, 0, 0]]
    assert batch["path"].tolist() == ["a.txt", "b.txt"]


async def test_partial_batch_restored_on_close_keeps_shapes() -> None:
    """Claims restored on close keep each element's own shape and order."""
    q = aqueue.PaddingFIFOQueue(2, np.int32, [(None,)])
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue_many, 3)
        await settle()
        await q.enqueue(np.array([1], np.int32))
        await q.enqueue(np.array([2, 2], np.int32))
        await settle()
        assert op.pending
        q.close()
        await settle()
    assert isinstance(op.error, aqueue.OutOfRangeError)
    assert (await q.dequeue()).tolist() == [1]
    assert (await q.dequeue()).tolist() == [2, 2]
