"""drain: each source kind (queues of every element form, Batches, element and batch
iterators, a running pipeline's items, any async iterable), as a list and as one
stacked batch; its timeout message; bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import anyio
import numpy as np
import pytest

import aqueue
from aqueue.testing import StallError, drain

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def filled(q: Any, values: list[Any]) -> Any:
    """``q`` with ``values`` enqueued, then closed (so that a drain ends)."""
    for v in values:
        q.enqueue_nowait(v)
    q.close()
    return q


async def test_a_queue_as_a_list_and_as_one_batch() -> None:
    """A queue fed by a runner: its elements in order, or stacked like dequeue_many."""
    q = aqueue.FIFOQueue(4, np.int64, (), name="q")
    async with aqueue.Coordinator() as coord:
        coord.start(aqueue.QueueRunner(q, [iter(range(10))]))
        got = await drain(q, timeout=30)
    assert [int(x) for x in got] == list(range(10))
    q2 = filled(aqueue.FIFOQueue(8, np.float32, (2,)), [[i, -i] for i in range(5)])
    batch = await drain(q2, stack=True)
    assert batch.dtype == np.float32
    assert batch.tolist() == [[i, -i] for i in range(5)]


async def test_tuple_named_padded_and_object_elements_stack_per_component() -> None:
    """Tuples per position, dicts per name, ragged components padded as dequeue_many
    pads them, Python objects (tuples included) one per element."""
    pairs = filled(
        aqueue.FIFOQueue(4, [np.int64, np.float32], [(), (2,)]), [(i, [i, i]) for i in range(3)]
    )
    a, b = await drain(pairs, stack=True)
    assert (a.tolist(), b.dtype, b.shape) == ([0, 1, 2], np.float32, (3, 2))
    named = filled(
        aqueue.FIFOQueue(4, [np.int64, np.int64], [(), ()], names=["x", "y"]),
        [{"x": i, "y": -i} for i in range(3)],
    )
    got = await drain(named, stack=True)
    assert {k: v.tolist() for k, v in got.items()} == {"x": [0, 1, 2], "y": [0, -1, -2]}
    ragged = [np.arange(n, dtype=np.int64) + 1 for n in (1, 3, 2)]
    padding = filled(aqueue.PaddingFIFOQueue(4, np.int64, [(None,)]), ragged)
    reference = filled(aqueue.PaddingFIFOQueue(4, np.int64, [(None,)]), ragged)
    padded = await drain(padding, stack=True)
    assert padded.tolist() == [[1, 0, 0], [1, 2, 3], [1, 2, 0]]
    assert padded.tolist() == reference.dequeue_many_nowait(3).tolist()
    objects = filled(aqueue.FIFOQueue(4, object, ()), [("tag", i) for i in range(3)])
    column = await drain(objects, stack=True)
    assert column.dtype == object
    assert column.shape == (3,)
    assert list(column) == [("tag", 0), ("tag", 1), ("tag", 2)]


async def test_batches_and_batch_iterators_are_concatenated() -> None:
    """A Batches (spec given, or inferred from the first example) and ``q.batches(n)``
    give lists of batches; stacked, one batch of every element."""
    given = aqueue.batch(
        iter(range(10)), 4, dtypes=np.int64, shapes=(), allow_smaller_final_batch=True
    )
    inferred = aqueue.batch(iter(range(6)), 4, allow_smaller_final_batch=True, name="inferred")
    async with aqueue.Coordinator() as coord:
        coord.start_queue_runners()
        batches = await drain(given, timeout=30)
        whole = await drain(inferred, stack=True, timeout=30)
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert whole.tolist() == list(range(6))
    q = filled(aqueue.FIFOQueue(8, np.int64, ()), list(range(7)))
    assert (await drain(q.batches(3), stack=True)).tolist() == list(range(6))  # 6 left 1
    assert [int(x) for x in await drain(aiter(q))] == [6]


async def test_a_padding_queue_s_batches_are_padded_to_the_widest() -> None:
    """Batches of a PaddingFIFOQueue differ in width; concatenated, they are padded."""
    ragged = [np.full(n, n, dtype=np.int64) for n in (1, 3, 2, 1)]
    q = filled(aqueue.PaddingFIFOQueue(4, np.int64, [(None,)]), ragged)
    got = await drain(q.batches(2), stack=True)
    assert got.tolist() == [[1, 0, 0], [3, 3, 3], [2, 2, 0], [1, 0, 0]]


async def test_a_pipeline_s_items() -> None:
    """The items of a running pipeline; a batching pipeline's items stack with
    ``batched=True`` into one batch."""
    pipe = aqueue.Pipeline(range(10)).map(lambda x: x * x)
    async with pipe.open() as items:
        assert await drain(items, timeout=30) == [x * x for x in range(10)]
    batched = aqueue.Pipeline([np.array([i, -i]) for i in range(6)]).batch(4)
    async with batched.open() as items:
        whole = await drain(items, stack=True, batched=True, timeout=30)
    assert whole.tolist() == [[i, -i] for i in range(4)]  # the short final batch is dropped


class Pair(NamedTuple):
    x: int
    name: str


async def test_any_async_iterable_stacks_by_the_first_item_s_form() -> None:
    """Without a queue, the first item decides the form; a NamedTuple keeps its type;
    mixed forms are refused."""

    async def pairs() -> AsyncIterator[Pair]:
        for i in range(3):
            yield Pair(i, f"n{i}")

    got = await drain(pairs(), stack=True)
    assert isinstance(got, Pair)
    assert (got.x.tolist(), got.name.tolist()) == ([0, 1, 2], ["n0", "n1", "n2"])

    async def mixed() -> AsyncIterator[Any]:
        yield (1, 2)
        yield 3

    with pytest.raises(ValueError, match="item 1 is not a tuple of 2: int"):
        await drain(mixed(), stack=True)

    async def shapes() -> AsyncIterator[Any]:
        yield np.zeros(2)
        yield np.zeros(3)

    with pytest.raises(ValueError, match=r"elements of different shapes \[\(2,\), \(3,\)\]"):
        await drain(shapes(), stack=True)


async def test_an_empty_source() -> None:
    """Nothing left: an empty list, or the queue's empty batch; no queue, no batch form."""
    q = filled(aqueue.FIFOQueue(4, [np.int64, np.float32], [(), (3,)], names=["a", "b"]), [])
    assert await drain(q) == []
    empty = await drain(q, stack=True)
    assert {k: (v.shape, v.dtype) for k, v in empty.items()} == {
        "a": ((0,), np.int64),
        "b": ((0, 3), np.float32),
    }
    no_shapes = filled(aqueue.FIFOQueue(4, np.int64), [])
    with pytest.raises(ValueError, match="declares no shapes"):
        await drain(no_shapes, stack=True)

    async def nothing() -> AsyncIterator[int]:
        return
        yield

    with pytest.raises(ValueError, match="no items, and no queue"):
        await drain(nothing(), stack=True)


async def test_timeout_names_the_source_the_count_and_the_stuck_queue() -> None:
    """An open queue never ends: after the timeout, StallError says what was drained and
    what waits where (taken while the drain still waited)."""
    q = aqueue.FIFOQueue(4, np.int64, (), name="open")
    q.enqueue_nowait(1)
    q.enqueue_nowait(2)
    with anyio.fail_after(30), pytest.raises(StallError) as info:
        await drain(q, timeout=0.3)
    header, *lines = str(info.value).splitlines()
    assert header == (
        "drain(<FIFOQueue 'open' size=0/4 open>) did not end within 0.3 s (timeout): 2 items "
        "drained, then it waited"
    )
    assert (
        "- queue 'open' (FIFOQueue, size 0/4, open): 1 consumer blocked in dequeue on an "
        "empty queue; no running QueueRunner fills it"
    ) in lines


async def test_timeout_names_a_batch_runner_that_was_never_started() -> None:
    """drain of a Batches whose runner was registered and never started."""
    b = aqueue.batch(iter(range(4)), 2, dtypes=np.int64, shapes=(), name="never")
    with anyio.fail_after(30), pytest.raises(StallError) as info:
        await drain(b, timeout=0.3)
    message = str(info.value)
    assert "drain(<Batches 'never' batch_size=2 queue=<FIFOQueue 'never'" in message
    assert "0 items drained" in message
    assert (
        "QueueRunner 'never' that fills it was registered with add_queue_runner() and "
        "never started" in message
    )
    async with aqueue.Coordinator() as coord:  # leave the context's registry empty
        coord.start_queue_runners()
        assert [b.tolist() for b in await drain(b, timeout=30)] == [[0, 1], [2, 3]]


async def test_bad_arguments() -> None:
    """Each argument is checked before anything is taken."""
    q = filled(aqueue.FIFOQueue(4, np.int64, ()), [1])
    with pytest.raises(TypeError, match="drain: expected a queue, a Batches"):
        await drain([1, 2])  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="drain: timeout must be a number of seconds > 0"):
        await drain(q, timeout=0)
    with pytest.raises(TypeError, match="drain: stack must be a bool"):
        await drain(q, stack=1)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="drain: batched must be a bool or None"):
        await drain(q, batched=1)  # type: ignore[arg-type]
    assert q.size() == 1
