"""TF-style input functions: producers, limit_epochs and the batching helpers.

Mirrors tf_queue_semantics.md section 7 (TF's input_test.py): epochs then
OutOfRangeError, shuffling within each epoch only (uniform for a fixed seed), exactly
once delivery with several producers, short final batches, padding, batch_join order.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import numpy as np
import pytest
from support import aqueue_warnings, poll

import aqueue
from aqueue import (
    Coordinator,
    ElementSpecError,
    OutOfRangeError,
    batch,
    batch_join,
    input_producer,
    limit_epochs,
    range_input_producer,
    shuffle_batch,
    shuffle_batch_join,
    slice_input_producer,
    string_input_producer,
)
from aqueue.testing import drain


def perm_counts(values: list[Any], n: int) -> Counter[tuple[Any, ...]]:
    """Count the orders of each aligned block of ``n`` values; each must be a permutation."""
    counts: Counter[tuple[Any, ...]] = Counter()
    base = sorted(values[:n])
    for i in range(0, len(values), n):
        block = tuple(values[i : i + n])
        assert sorted(block) == base, f"block {i // n} is not a permutation: {block}"
        counts[block] += 1
    return counts


def assert_uniform(counts: Counter[tuple[Any, ...]], orders: int, blocks: int) -> None:
    """Every one of ``orders`` orders occurs within +-40% of ``blocks / orders``."""
    expected = blocks / orders
    assert len(counts) == orders
    for order, c in counts.items():
        assert 0.6 * expected <= c <= 1.4 * expected, (order, c, expected)


# -- limit_epochs -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_limit_epochs_repeats_then_stops() -> None:
    """Every item in order, num_epochs times, then the iterator ends."""
    got = [x async for x in limit_epochs([1, 2], 3)]
    assert got == [1, 2, 1, 2, 1, 2]


@pytest.mark.anyio
async def test_limit_epochs_none_is_unbounded() -> None:
    """num_epochs=None repeats forever."""
    it = limit_epochs([7], None)
    assert [await it.__anext__() for _ in range(50)] == [7] * 50


@pytest.mark.parametrize(
    ("values", "epochs"), [([1], 0), ([1], -2), ([], 1), ("abc", 1), ([1], 1.5)]
)
def test_limit_epochs_rejects_bad_arguments(values: Any, epochs: Any) -> None:
    """num_epochs <= 0 (or not an int), empty values or a bare string: ElementSpecError."""
    with pytest.raises(ElementSpecError):
        limit_epochs(values, epochs)


# -- producers ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_input_producer_no_shuffle_repeats_rows() -> None:
    """Unshuffled output is the rows repeated num_epochs times, then OutOfRangeError."""
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    q = input_producer(rows, element_shape=(2,), num_epochs=2, shuffle=False, capacity=4)
    assert q.shapes == ((2,),)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(q)
    assert np.array_equal(np.stack(got), np.concatenate([rows, rows]))


@pytest.mark.parametrize(
    ("array", "shape"),
    [(np.zeros((3, 2)), (3,)), ([[1, 2], [3]], None), (np.zeros((0, 2)), None), (5, None)],
)
def test_input_producer_rejects_bad_input(array: Any, shape: Any) -> None:
    """A wrong element_shape, ragged, empty or scalar input: ElementSpecError."""
    with pytest.raises(ElementSpecError):
        input_producer(array, element_shape=shape)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"strings": []},
        {"strings": "file.txt"},
        {"strings": ["a", 3]},
        {"strings": ["a"], "num_epochs": 0},
        {"strings": ["a"], "capacity": 0},
        {"strings": ["a"], "seed": -1},
    ],
)
def test_string_input_producer_rejects_bad_arguments(kwargs: dict[str, Any]) -> None:
    """Empty list, a bare string, a non-string, num_epochs 0, capacity 0, bad seed."""
    strings = kwargs.pop("strings")
    with pytest.raises(ElementSpecError):
        string_input_producer(strings, **kwargs)


@pytest.mark.anyio
async def test_string_input_producer_shuffle_is_uniform_within_epochs() -> None:
    """600 epochs of 3 strings: each block a permutation, each of the 6 orders 100 +- 40%."""
    q = string_input_producer(["a", "b", "c"], num_epochs=600, seed=271828)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(q)
    assert all(isinstance(s, str) for s in got)
    assert_uniform(perm_counts(got, 3), orders=6, blocks=600)


@pytest.mark.anyio
async def test_range_input_producer_shuffle_is_uniform() -> None:
    """200 epochs of range(2): both orders 100 +- 40%."""
    q = range_input_producer(2, num_epochs=200, seed=1)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = [int(v) for v in await drain(q)]
    assert_uniform(perm_counts(got, 2), orders=2, blocks=200)


@pytest.mark.anyio
async def test_range_input_producer_no_shuffle() -> None:
    """0 .. limit-1 per epoch, in order."""
    q = range_input_producer(4, num_epochs=2, shuffle=False)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = [int(v) for v in await drain(q)]
    assert got == [0, 1, 2, 3, 0, 1, 2, 3]


@pytest.mark.anyio
async def test_slice_input_producer_slices_together_and_is_uniform() -> None:
    """Slices stay aligned; over 1200 epochs each of the 24 orders occurs 50 +- 40%."""
    xs = np.arange(4, dtype=np.int64)
    ys = np.array(["w", "x", "y", "z"])
    q = slice_input_producer([xs, ys], num_epochs=1200, seed=5, capacity=64)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(q)
    assert all(ys[int(x)] == y for x, y in got)
    assert_uniform(perm_counts([int(x) for x, _ in got], 4), orders=24, blocks=1200)


@pytest.mark.anyio
async def test_slice_input_producer_dict_gives_dict_elements() -> None:
    """A dict of arrays gives dict elements with the same keys."""
    q = slice_input_producer({"x": [1, 2], "y": [3.0, 4.0]}, num_epochs=1, shuffle=False)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(q)
    assert [(int(e["x"]), float(e["y"])) for e in got] == [(1, 3.0), (2, 4.0)]


@pytest.mark.parametrize("arrays", [[], [[1, 2], [1, 2, 3]], "ab"])
def test_slice_input_producer_rejects_bad_arrays(arrays: Any) -> None:
    """Empty list, arrays of different lengths, or not a list: ElementSpecError."""
    with pytest.raises(ElementSpecError):
        slice_input_producer(arrays)


@pytest.mark.anyio
async def test_producer_seed_fixes_the_order() -> None:
    """The same seed gives the same order, another seed a different one."""

    async def run(seed: int) -> list[int]:
        q = range_input_producer(10, num_epochs=3, seed=seed)
        async with Coordinator() as coord:
            coord.start_queue_runners()
            got = [int(v) for v in await drain(q)]
        return got

    first = await run(3)
    assert first == await run(3)
    assert first != await run(4)


# -- batch --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_batch_one_thread_keeps_order_and_drops_leftovers() -> None:
    """Full batches in source order; the 3 leftovers are dropped, then OutOfRangeError."""
    source = range_input_producer(23, num_epochs=1, shuffle=False)
    b = batch(source, 5)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
        with pytest.raises(OutOfRangeError):
            await b.dequeue()
    assert [x.tolist() for x in got] == [list(range(i, i + 5)) for i in range(0, 20, 5)]


@pytest.mark.anyio
async def test_batch_allow_smaller_final_batch() -> None:
    """With allow_smaller_final_batch the leftovers come as one short final batch."""
    b = batch(limit_epochs([0, 1, 2, 3, 4, 5, 6], 1), 3, allow_smaller_final_batch=True)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
    assert [x.tolist() for x in got] == [[0, 1, 2], [3, 4, 5], [6]]


@pytest.mark.anyio
async def test_batch_many_async_producers_deliver_exactly_once() -> None:
    """Four async producers reading one queue: every example exactly once."""
    source = range_input_producer(200, num_epochs=1, shuffle=False, capacity=8)

    async def read() -> tuple[np.int64, np.int64]:
        v = await source.dequeue()
        return v, v * 2

    b = batch(read, 16, num_threads=4, allow_smaller_final_batch=True)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
    values = np.concatenate([x for x, _ in got])
    assert sorted(values.tolist()) == list(range(200))
    assert all(np.array_equal(y, x * 2) for x, y in got)


@pytest.mark.anyio
async def test_batch_many_thread_producers_share_an_iterator_exactly_once() -> None:
    """Four producer threads sharing one generator: every example exactly once."""

    def examples() -> Iterator[int]:
        yield from range(300)

    b = batch(examples(), 7, num_threads=4, allow_smaller_final_batch=True)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
    assert sorted(np.concatenate(got).tolist()) == list(range(300))
    assert [len(x) for x in got[:-1]] == [7] * (len(got) - 1)


@pytest.mark.anyio
async def test_batch_dynamic_pad_pads_to_the_batch_maximum() -> None:
    """dynamic_pad: variable lengths are padded with 0 (numbers) and "" (strings)."""
    examples = [(np.arange(n, dtype=np.int32), "x" * n) for n in (1, 3, 2, 1)]
    b = batch(limit_epochs(examples, 1), 2, dynamic_pad=True)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
    assert isinstance(b.queue, aqueue.PaddingFIFOQueue)
    (a0, s0), (a1, _) = got
    assert a0.tolist() == [[0, 0, 0], [0, 1, 2]]
    assert a1.tolist() == [[0, 1], [0, 0]]
    assert s0.tolist() == ["x", "xxx"]


@pytest.mark.anyio
async def test_batch_dict_examples_give_dict_batches() -> None:
    """Dict examples in, dict batches (same keys) out."""

    def example() -> Iterator[dict[str, Any]]:
        for i in range(4):
            yield {"label": i, "image": np.full((2, 2), i, np.float32)}

    b = batch(example(), 2)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
    assert set(got[0]) == {"label", "image"}
    assert got[1]["label"].tolist() == [2, 3]
    assert got[1]["image"].shape == (2, 2, 2)


@pytest.mark.anyio
async def test_batch_with_dtypes_and_shapes_builds_the_queue_up_front() -> None:
    """dtypes= and shapes= create the queue at once, with that spec."""
    b = batch(limit_epochs([1, 2, 3, 4], 1), 2, dtypes=np.float64, shapes=(), capacity=5)
    assert b.queue.dtypes == (np.dtype(np.float64),)
    assert b.queue.capacity == 5
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
    assert [x.tolist() for x in got] == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.anyio
async def test_batch_queue_before_the_first_example_raises() -> None:
    """An inferred spec: .queue before the first example says how to get it earlier."""
    b = batch(limit_epochs([1], 1), 1)
    with pytest.raises(RuntimeError, match="dtypes= and shapes="):
        _ = b.queue
    async with Coordinator() as coord:
        coord.start_queue_runners()
        assert (await b.dequeue()).tolist() == [1]
        assert b.queue.dtypes == (np.dtype(np.int64),)


@pytest.mark.anyio
async def test_batch_enqueue_many_treats_values_as_batches() -> None:
    """enqueue_many=True: each produced value is a batch of examples."""
    chunks = [np.arange(i, i + 4) for i in range(0, 12, 4)]
    b = batch(limit_epochs(chunks, 1), 6, enqueue_many=True, capacity=3)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
    assert [x.tolist() for x in got] == [list(range(6)), list(range(6, 12))]


@pytest.mark.anyio
async def test_batch_of_an_empty_source_ends_with_out_of_range() -> None:
    """A source that ends before its first example: the consumer gets OutOfRangeError."""
    b = batch(iter([]), 4)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        with pytest.raises(OutOfRangeError):
            await b.dequeue()


@pytest.mark.anyio
async def test_batch_source_error_reaches_the_coordinator_block() -> None:
    """A failing source: its exception leaves the coordinator; the consumer never hangs."""
    count = itertools.count()

    async def read() -> int:
        i = next(count)
        if i == 5:
            raise KeyError("bad record")
        return i

    b = batch(read, 2)

    async def consume() -> None:
        async with Coordinator() as coord:
            coord.start_queue_runners()
            async for _ in b:
                pass

    with anyio.fail_after(10), pytest.raises(KeyError, match="bad record"):
        await consume()


@pytest.mark.parametrize(
    "kwargs", [{"batch_size": 0}, {"num_threads": 0}, {"capacity": 0}, {"batch_size": 2.0}]
)
def test_batch_rejects_bad_arguments(kwargs: dict[str, Any]) -> None:
    """batch_size, num_threads or capacity < 1 (or not an int): ElementSpecError."""
    args = {"batch_size": 2, **kwargs}
    with pytest.raises(ElementSpecError):
        batch([1, 2], **args)


def test_batch_rejects_a_string_source() -> None:
    """A str is not a producer: TypeError."""
    with pytest.raises(TypeError):
        batch("abc", 2)


# -- shuffle_batch, joins -------------------------------------------------------------------


@pytest.mark.parametrize(("capacity", "mad"), [(10, 10), (5, 9), (10, -1)])
def test_shuffle_batch_rejects_capacity_not_above_min_after_dequeue(
    capacity: int, mad: int
) -> None:
    """capacity <= min_after_dequeue (or a negative minimum): ElementSpecError."""
    with pytest.raises(ElementSpecError):
        shuffle_batch([1, 2], 2, capacity, mad)


@pytest.mark.anyio
async def test_shuffle_batch_delivers_everything_scrambled() -> None:
    """Every example once, in an order other than the input's."""
    source = range_input_producer(100, num_epochs=1, shuffle=False)
    b = shuffle_batch(source, 10, 50, 20, seed=1, allow_smaller_final_batch=True)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = (await drain(b, stack=True)).tolist()
    assert sorted(got) == list(range(100))
    assert got != list(range(100))


@pytest.mark.anyio
async def test_num_epochs_then_out_of_range_through_a_reader() -> None:
    """TF's shape: names -> async reader -> shuffle_batch, num_epochs=2, then the end."""
    names = string_input_producer([f"f{i}" for i in range(5)], num_epochs=2, seed=0)

    async def read() -> tuple[str, int]:
        name = await names.dequeue()
        return name, int(name[1:])

    b = shuffle_batch(read, 3, 20, 5, num_threads=2, seed=0, allow_smaller_final_batch=True)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
        with pytest.raises(OutOfRangeError):
            await b.dequeue()
    flat = [str(n) for names_, _ in got for n in names_]
    assert Counter(flat) == {f"f{i}": 2 for i in range(5)}


@pytest.mark.anyio
async def test_batch_join_keeps_each_source_order() -> None:
    """One producer per source; each source's subsequence comes out in order."""

    def tagged(tag: int) -> Iterator[tuple[int, int]]:
        for i in range(40):
            yield tag, i

    b = batch_join([tagged(0), tagged(1), tagged(2)], 8, allow_smaller_final_batch=True)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
    tags = np.concatenate([t for t, _ in got]).tolist()
    values = np.concatenate([v for _, v in got]).tolist()
    for tag in range(3):
        assert [v for t, v in zip(tags, values) if t == tag] == list(range(40))


@pytest.mark.anyio
async def test_shuffle_batch_join_mixes_sources() -> None:
    """Sources are mixed: more than one batch holds examples of both."""

    async def tagged(tag: int) -> AsyncIterator[int]:
        for i in range(50):
            yield tag * 100 + i

    b = shuffle_batch_join([tagged(0), tagged(1)], 10, 60, 20, seed=2)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        got = await drain(b)
    mixed = sum(1 for x in got if (x < 100).any() and (x >= 100).any())
    assert mixed > 1
    assert sorted(np.concatenate(got).tolist()) == sorted([*range(50), *range(100, 150)])


@pytest.mark.parametrize("sources", [[], "ab"])
def test_batch_join_rejects_bad_sources(sources: Any) -> None:
    """An empty list or a non-list of sources: ElementSpecError."""
    with pytest.raises(ElementSpecError):
        batch_join(sources, 2)


@pytest.mark.anyio
async def test_batches_whose_runner_never_started_warn() -> None:
    """Inside a coordinator's block that forgot ``coord.start_queue_runners()``, a
    consumer of a batch whose runner was never started gets a warning naming it."""
    b = batch(limit_epochs([1], 1), 1, name="never-started-batch")
    with aqueue_warnings() as logged, anyio.fail_after(10):
        # ... and no coord.start_queue_runners():
        async with Coordinator(), anyio.create_task_group() as tg:
            tg.start_soon(b.dequeue)
            await poll(lambda: any("never-started-batch" in m for m in logged))
            tg.cancel_scope.cancel()
    assert any("never started" in m for m in logged)
