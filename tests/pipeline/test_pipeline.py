"""Pipeline: stages, ordering, determinism, failures, teardown and statistics."""

from __future__ import annotations

import inspect
import itertools
import operator
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import numpy as np
import pytest
from support import collect, notes, stage_statistics

import aqueue
from aqueue import (
    Coordinator,
    ElementSpecError,
    FIFOQueue,
    OutOfRangeError,
    Pipeline,
    StageStatistics,
)

pytestmark = pytest.mark.timeout(30)


async def jitter(x: int) -> int:
    """An async map whose completion order differs from its input order."""
    for _ in range((7 * x) % 5):
        await anyio.lowlevel.checkpoint()
    return x * x


# -- stages -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_and_thread_maps_deliver_every_item() -> None:
    """An async map and a sync (thread) map, concurrency 4: every item once."""

    def plus_one(x: int) -> int:
        return x + 1

    pipe = (
        Pipeline.from_iterable(range(100)).map(jitter, concurrency=4).map(plus_one, concurrency=4)
    )
    got = await collect(pipe)
    assert sorted(got) == [x * x + 1 for x in range(100)]


@pytest.mark.anyio
async def test_ordered_map_keeps_input_order() -> None:
    """ordered=True with concurrency 8 keeps the input order despite jitter."""
    pipe = Pipeline.from_iterable(range(60)).map(jitter, concurrency=8, ordered=True)
    assert await collect(pipe) == [x * x for x in range(60)]


@pytest.mark.anyio
async def test_ordered_sync_map_keeps_input_order() -> None:
    """An ordered sync map (threads) keeps the input order."""

    def slow_for_small(x: int) -> int:
        time.sleep(0.002 if x % 4 == 0 else 0)
        return -x

    pipe = Pipeline.from_iterable(range(40)).map(slow_for_small, concurrency=4, ordered=True)
    assert await collect(pipe) == [-x for x in range(40)]


@pytest.mark.anyio
async def test_filter_keeps_order_and_counts_dropped() -> None:
    """filter keeps matching items in order and reports the rest as dropped."""
    pipe = Pipeline.from_iterable(range(30)).filter(lambda x: x % 3 == 0)
    assert await collect(pipe) == list(range(0, 30, 3))
    stats = pipe.statistics()
    assert (stats[1].items_in, stats[1].items_out, stats[1].items_dropped) == (30, 10, 20)


@pytest.mark.anyio
async def test_batch_counts_the_final_items_it_drops() -> None:
    """Without allow_smaller_final_batch the last 23 % 5 items are dropped, and the
    batch stage's statistics say so: every item that reached it is counted in."""
    pipe = Pipeline.from_iterable(range(23)).batch(5)
    assert len(await collect(pipe)) == 4
    stats = pipe.statistics()
    assert (stats[1].items_in, stats[1].items_out, stats[1].items_dropped) == (23, 4, 3)
    whole = Pipeline.from_iterable(range(23)).batch(5, allow_smaller_final_batch=True)
    assert len(await collect(whole)) == 5
    assert whole.statistics()[1].items_dropped == 0


@pytest.mark.anyio
async def test_async_filter_predicate() -> None:
    """An async predicate is awaited."""

    async def odd(x: int) -> bool:
        await anyio.lowlevel.checkpoint()
        return x % 2 == 1

    assert await collect(Pipeline.from_iterable(range(10)).filter(odd)) == [1, 3, 5, 7, 9]


@pytest.mark.anyio
async def test_batch_stacks_and_keeps_a_short_final_batch() -> None:
    """Arrays stack on axis 0, tuples per component; the short final batch is kept."""
    pipe = (
        Pipeline.from_iterable(range(7))
        .map(lambda x: (np.full(2, x), str(x)))
        .batch(3, allow_smaller_final_batch=True)
    )
    got = await collect(pipe)
    assert [a.shape for a, _ in got] == [(3, 2), (3, 2), (1, 2)]
    assert got[2][1].tolist() == ["6"]


@pytest.mark.anyio
async def test_batch_drops_leftovers_by_default() -> None:
    """Without allow_smaller_final_batch the leftovers are dropped."""
    got = await collect(Pipeline.from_iterable(range(7)).batch(3))
    assert [b.tolist() for b in got] == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.anyio
async def test_batch_dynamic_pad_and_dicts() -> None:
    """dynamic_pad pads each component to the batch maximum; dicts batch per key."""
    pipe = (
        Pipeline.from_iterable([1, 3, 2])
        .map(lambda n: {"ids": np.arange(n) + 1, "n": n})
        .batch(3, dynamic_pad=True)
    )
    (got,) = await collect(pipe)
    assert got["ids"].tolist() == [[1, 0, 0], [1, 2, 3], [1, 2, 0]]
    assert got["n"].tolist() == [1, 3, 2]


@pytest.mark.anyio
async def test_batch_of_text_has_the_dtype_np_stack_gives() -> None:
    """Text items (unicode or bytes arrays of several widths, Python str) batch to the
    dtype np.stack gives them (e.g. ``<U2``), not to object; padded text too."""
    cases: list[list[Any]] = [
        [np.array(["a"]), np.array(["bc"])],
        [np.array([b"a"]), np.array([b"bcd"])],
        ["a", "bc"],
        [np.str_("xy"), np.str_("z")],
    ]
    for items in cases:
        (got,) = await collect(Pipeline(items).batch(2))
        want = np.stack(items)
        assert got.dtype == want.dtype, items
        assert got.tolist() == want.tolist()
    (padded,) = await collect(
        Pipeline([np.array(["a"]), np.array(["bc", "d"])]).batch(2, dynamic_pad=True)
    )
    assert padded.dtype == np.dtype("<U2")
    assert padded.tolist() == [["a", ""], ["bc", "d"]]


@pytest.mark.anyio
async def test_batch_of_different_shapes_without_padding_fails() -> None:
    """Different shapes without dynamic_pad: ElementSpecError naming the stage."""
    pipe = Pipeline.from_iterable([1, 2]).map(np.arange).batch(2)
    with pytest.raises(ElementSpecError, match="dynamic_pad") as info:
        await collect(pipe)
    assert "batch(2)" in notes(info.value)


@pytest.mark.anyio
async def test_prefetch_and_sources() -> None:
    """from_async_iterable, from_producer and from_queue feed a pipeline."""

    async def agen() -> AsyncIterator[int]:
        for i in range(5):
            yield i

    assert await collect(Pipeline.from_async_iterable(agen()).prefetch(2)) == [0, 1, 2, 3, 4]

    it = iter(range(4))

    def produce() -> int:
        return next(it)

    assert await collect(Pipeline.from_producer(produce)) == [0, 1, 2, 3]

    q = FIFOQueue(8, np.int64, ())
    for i in range(3):
        q.enqueue_nowait(i)
    q.close()
    assert [int(x) for x in await collect(Pipeline.from_queue(q))] == [0, 1, 2]


@pytest.mark.anyio
async def test_in_memory_items_pass_unchanged() -> None:
    """Items of a list source (more than the first queue holds) come out as the very
    objects put in, in order: lists, tuples and arrays are not unpacked."""
    kinds: list[Any] = [[1, 2], (3,), np.arange(3), "s", None, {"k": 1}, 7]
    items = [kinds[i % len(kinds)] if i % 2 else [i] for i in range(40)]
    got = await collect(Pipeline.from_iterable(items).prefetch(4))
    assert len(got) == len(items)
    assert all(g is x for g, x in zip(got, items))


@pytest.mark.anyio
async def test_an_async_map_never_holds_the_event_loop_for_long() -> None:
    """An async map whose function never awaits still yields to the event loop after
    each millisecond of work: with items of 2 ms each, other tasks run between every
    two items, although the whole input is there at once."""
    ticks = 0
    seen: list[int] = []

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async def spin(x: int) -> int:  # 2 ms of work without an await
        seen.append(ticks)
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
        return x

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            got = await collect(Pipeline.from_iterable(range(20)).map(spin))
            tg.cancel_scope.cancel()
    assert got == list(range(20))
    # trio may run the heartbeat before or after the map in each round: look two apart
    assert all(later > earlier for earlier, later in zip(seen, seen[2:]))


@pytest.mark.anyio
async def test_leaving_at_once_stops_thread_stages_not_yet_started() -> None:
    """Leaving the block before the thread stages have started: nothing hangs and no
    stage thread is left running."""

    def twice(x: int) -> int:
        return 2 * x

    pipe = Pipeline.from_iterable(range(100)).map(twice, concurrency=3).batch(4)
    with anyio.fail_after(10):
        async with pipe.open():
            pass
    assert not [t for t in threading.enumerate() if t.name.startswith("QueueRunnerThread-1:")]
    assert [s.items_out for s in pipe.statistics()][1:] == [0, 0]


# -- shuffle, repeat, determinism ------------------------------------------------------------


def golden_pipe(seed: int = 3) -> Pipeline:
    """The pipeline of the golden test: ordered map, seeded shuffle, batch."""
    return (
        Pipeline.from_iterable(range(20))
        .map(jitter, concurrency=4, ordered=True)
        .shuffle(12, 5, seed=seed)
        .batch(6, allow_smaller_final_batch=True)
    )


GOLDEN = [
    [1, 16, 36, 25, 4, 49],
    [9, 144, 100, 0, 169, 196],
    [121, 81, 225, 64, 361, 324],
    [289, 256],
]


@pytest.mark.anyio
async def test_seeded_pipeline_is_deterministic_golden() -> None:
    """Seeded shuffle + ordered map: a pinned output order, on every backend."""
    assert [b.tolist() for b in await collect(golden_pipe())] == GOLDEN


@pytest.mark.anyio
async def test_shuffle_seeds_differ_and_permute() -> None:
    """Another seed gives another order; the output is a permutation of the input."""
    other = [b.tolist() for b in await collect(golden_pipe(seed=4))]
    assert other != GOLDEN
    assert sorted(itertools.chain(*other)) == sorted(itertools.chain(*GOLDEN))


@pytest.mark.anyio
async def test_repeat_reads_the_source_several_times() -> None:
    """repeat(3) before the shuffle: every item three times."""
    pipe = Pipeline.from_iterable([1, 2, 3]).map(jitter).repeat(3).shuffle(8, 2, seed=0)
    got = await collect(pipe)
    assert sorted(got) == sorted([1, 4, 9] * 3)


@pytest.mark.parametrize(
    "build",
    [
        lambda: Pipeline.from_iterable([1]).shuffle(4, 1).repeat(2),
        lambda: Pipeline.from_iterable(iter([1, 2])).repeat(2),
        lambda: Pipeline.from_queue(FIFOQueue(1, int, ())).repeat(2),
        lambda: Pipeline.from_iterable([1]).repeat(2).repeat(2),
        lambda: Pipeline.from_iterable([1]).repeat(0),
    ],
)
def test_repeat_rejects_what_it_cannot_do(build: Any) -> None:
    """After a shuffle, a one-shot or queue source, twice, or 0 epochs: ElementSpecError."""
    with pytest.raises(ElementSpecError):
        build()


async def _agen() -> AsyncIterator[int]:
    for x in range(4):
        yield x


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["iterator", "generator", "async generator"])
async def test_a_one_shot_source_cannot_be_opened_twice(kind: str) -> None:
    """A pipeline over a one-shot iterator gives its items once; opening it (or a
    pipeline extended from it) again raises ElementSpecError saying why and what to
    pass instead, before anything runs, rather than yielding nothing."""
    if kind == "iterator":
        pipe: Pipeline[int] = Pipeline(iter(range(4)))
    elif kind == "generator":
        pipe = Pipeline(x for x in range(4))
    else:
        pipe = Pipeline(_agen())
    assert await collect(pipe) == [0, 1, 2, 3]
    for again in (pipe, pipe.map(abs)):
        with pytest.raises(ElementSpecError, match="one-shot iterator") as info:
            again.open()
        assert "can be read once" in str(info.value)
        assert "a list" in str(info.value)


@pytest.mark.anyio
async def test_re_iterable_sources_open_again() -> None:
    """A list, a range and an object whose __iter__ gives a fresh iterator are read
    afresh at each open."""

    class Fresh:
        def __iter__(self) -> Iterator[int]:
            return iter(range(3))

    for source in ([1, 2], range(3), Fresh()):
        pipe = Pipeline(source)
        assert await collect(pipe) == await collect(pipe) == list(source)


@pytest.mark.parametrize(
    "build",
    [
        lambda: Pipeline.from_iterable([1]).map(abs, concurrency=0),
        lambda: Pipeline.from_iterable([1]).map(abs, executor="gpu"),
        lambda: Pipeline.from_iterable([1]).map(jitter, executor="process"),
        lambda: Pipeline.from_iterable([1]).shuffle(5, 5),
        lambda: Pipeline.from_iterable([1]).batch(0),
        lambda: Pipeline.from_iterable([1]).prefetch(0),
        lambda: Pipeline.from_iterable([1]).map(abs, capacity=0),
    ],
)
def test_builder_rejects_bad_arguments(build: Any) -> None:
    """Bad concurrency, executor, shuffle sizes, batch size, buffer: ElementSpecError."""
    with pytest.raises(ElementSpecError):
        build()


def test_builder_rejects_non_callables_and_non_iterables() -> None:
    """A non-callable map or a str source: TypeError."""
    with pytest.raises(TypeError):
        Pipeline.from_iterable([1]).map(3)
    with pytest.raises(TypeError):
        Pipeline.from_iterable("abc")


# -- failures and teardown -------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["async", "thread"])
async def test_stage_failure_leaves_open_with_the_stage_named(kind: str) -> None:
    """A map raising at item 7: the original exception leaves the block, stage noted."""

    def check(x: int) -> int:
        if x == 7:
            raise ValueError(f"bad item {x}")
        return x

    async def acheck(x: int) -> int:
        return check(x)

    fn = acheck if kind == "async" else check
    pipe = Pipeline.from_iterable(range(1000)).map(fn, concurrency=3, name="map(check)")
    seen = []

    async def consume() -> None:
        async with pipe.open() as items:
            async for x in items:
                seen.append(x)

    with anyio.fail_after(10), pytest.raises(ValueError, match="bad item 7") as info:
        await consume()
    assert "stage 1 'map(check)'" in notes(info.value)
    assert 7 not in seen


@pytest.mark.anyio
async def test_source_failure_propagates() -> None:
    """A failing source iterable ends the pipeline with its exception."""

    def broken() -> Any:
        yield 1
        raise OSError("disk gone")

    with anyio.fail_after(10), pytest.raises(OSError, match="disk gone") as info:
        await collect(Pipeline.from_iterable(broken()).map(jitter, concurrency=2))
    assert "from_iterable(generator)" in notes(info.value)


@pytest.mark.anyio
async def test_early_exit_stops_an_endless_pipeline() -> None:
    """Leaving the block after three items of an endless source stops every stage."""
    # ordered=True: with completion order, two workers may legitimately deliver 1, 1, 3.
    pipe = Pipeline.from_iterable([1, 2, 3]).repeat(None).map(abs, concurrency=2, ordered=True)
    with anyio.fail_after(10):
        async with pipe.open() as items:
            got = [await items.get() for _ in range(3)]
    assert got == [1, 2, 3]


@pytest.mark.anyio
async def test_open_inside_a_user_coordinator() -> None:
    """pipe.open(coord) runs the stages in the caller's coordinator."""
    pipe = Pipeline.from_iterable(range(10)).map(jitter, concurrency=2)
    with anyio.fail_after(10):
        async with Coordinator() as coord:
            async with pipe.open(coord) as items:
                got = [x async for x in items]
            assert len(coord.runners) == 2
    assert sorted(got) == sorted(x * x for x in range(10))


@pytest.mark.anyio
async def test_cancelling_the_consumer_tears_down() -> None:
    """A cancel scope around the block: the pipeline stops and nothing hangs."""

    def slow(x: int) -> int:
        time.sleep(0.001)
        return x

    pipe = Pipeline.from_iterable([0]).repeat(None).map(slow, concurrency=2)
    with anyio.fail_after(10):
        with anyio.CancelScope() as scope:
            async with pipe.open() as items:
                await items.get()
                scope.cancel()
                await anyio.sleep_forever()
    assert scope.cancelled_caught


@pytest.mark.anyio
async def test_early_exit_releases_a_source_waiting_on_an_open_queue() -> None:
    """A from_queue source blocked on a queue nobody closes is released at exit."""
    q = FIFOQueue(4, np.int64, ())
    q.enqueue_nowait(1)
    pipe = Pipeline.from_queue(q).map(jitter)
    # Far below the coordinator's 5 s grace period: the wait is cancelled, not waited out.
    with anyio.fail_after(2):
        async with pipe.open() as items:
            assert await items.get() == 1
    assert not q.closed


@pytest.mark.anyio
@pytest.mark.parametrize("form", ["array", "tuple", "dict"])
async def test_a_queue_source_gives_its_elements_in_the_queues_form(form: str) -> None:
    """Items read from a source queue are its elements, as ``dequeue()`` gives them: a
    row of one component, a tuple of components, a dict of named components (never a
    batch's columns)."""
    if form == "array":
        q: Any = FIFOQueue(8, np.float32, (2,))
        elements: list[Any] = [np.full(2, i, np.float32) for i in range(5)]
    elif form == "tuple":
        q = FIFOQueue(8, (np.int64, np.float32), ((), (2,)))
        elements = [(i, np.full(2, i, np.float32)) for i in range(5)]
    else:
        q = FIFOQueue(8, (np.int64, np.float32), ((), (2,)), names=("k", "v"))
        elements = [{"k": i, "v": np.full(2, i, np.float32)} for i in range(5)]
    for e in elements:
        q.enqueue_nowait(e)
    q.close()
    got = await collect(Pipeline.from_queue(q))
    assert len(got) == 5
    for want, item in zip(elements, got):
        if form == "array":
            np.testing.assert_array_equal(item, want)
        elif form == "tuple":
            assert isinstance(item, tuple)
            assert len(item) == 2
            assert item[0] == want[0]
            np.testing.assert_array_equal(item[1], want[1])
        else:
            assert sorted(item) == ["k", "v"]
            assert item["k"] == want["k"]
            np.testing.assert_array_equal(item["v"], want["v"])


@pytest.mark.anyio
async def test_empty_source_repeated_forever_ends() -> None:
    """repeat(None) over an empty list ends (an empty epoch ends the source)."""
    with anyio.fail_after(5):
        assert await collect(Pipeline.from_iterable([]).repeat(None)) == []


@pytest.mark.anyio
async def test_get_after_the_end_raises_out_of_range() -> None:
    """items.get() past the last item: OutOfRangeError."""
    async with Pipeline.from_iterable([5]).open() as items:
        assert await items.get() == 5
        with pytest.raises(OutOfRangeError):
            await items.get()


@pytest.mark.anyio
async def test_in_memory_source_keeps_order_across_refills_and_epochs() -> None:
    """A list longer than its queue, repeated: a one-thread map sees every item in order."""
    seen: list[int] = []

    def record(x: int) -> int:
        seen.append(x)
        return x

    # Queue 0 holds 8 items: the 13-item list is refilled in batches that cross epochs.
    pipe = Pipeline.from_iterable(list(range(13))).repeat(3).map(record)
    with anyio.fail_after(10):
        got = await collect(pipe)
    assert got == seen == list(range(13)) * 3
    source, mapped = pipe.statistics()
    assert (source.items_out, mapped.items_in, mapped.items_out) == (39, 39, 39)


@pytest.mark.anyio
async def test_cancelled_get_loses_no_item() -> None:
    """A get() cancelled while it waits takes nothing: the next get() has the item."""
    q = FIFOQueue(4, np.int64, ())
    with anyio.fail_after(10):
        async with Pipeline.from_queue(q).open() as items:
            async with anyio.create_task_group() as tg:

                async def waiter() -> None:
                    await items.get()
                    pytest.fail("the cancelled get() returned an item")

                tg.start_soon(waiter)
                await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
            q.enqueue_nowait(7)
            assert await items.get() == 7
            q.close()
            with pytest.raises(OutOfRangeError):
                await items.get()


# -- process executor -------------------------------------------------------------------


@pytest.mark.anyio
async def test_process_executor_round_trip() -> None:
    """executor="process": a picklable function runs in worker processes."""
    pipe = Pipeline.from_iterable(range(6)).map(operator.neg, executor="process", concurrency=2)
    with anyio.fail_after(25):
        assert sorted(await collect(pipe)) == [-5, -4, -3, -2, -1, 0]


# -- statistics -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_statistics_counts_add_up() -> None:
    """items_in of a stage equals items_out of the previous (filter: minus dropped)."""

    def double(x: int) -> int:
        return 2 * x

    pipe = (
        Pipeline.from_iterable(range(50))
        .map(jitter, concurrency=4)
        .filter(lambda x: x % 2 == 0)
        .map(double, concurrency=2)
        .batch(4, allow_smaller_final_batch=True)
        .prefetch(2)
    )
    before = pipe.statistics()
    assert [s.items_out for s in before] == [0] * 6
    got = await collect(pipe)
    stats = pipe.statistics()
    assert all(isinstance(s, StageStatistics) for s in stats)
    assert [s.name for s in stats] == [
        "from_iterable(range)",
        "map(jitter)",
        "filter(<lambda>)",
        "map(double)",
        "batch(4)",
        "prefetch(2)",
    ]
    for prev, cur in itertools.pairwise(stats):
        assert cur.items_in == prev.items_out
    f = stats[2]
    assert f.items_out == f.items_in - f.items_dropped == 25
    assert stats[4].items_out == len(got) == 7
    assert [s.concurrency for s in stats] == [1, 4, 1, 2, 1, 1]
    for s in stats:
        assert 0.0 <= s.occupancy_mean <= 1.0
        assert 0.0 <= s.starved_fraction <= 1.0
        assert s.get_wait_p50_s <= s.get_wait_p99_s
        assert s.put_wait_p50_s <= s.put_wait_p99_s
    assert stats[1].get_wait_p99_s > 0


@pytest.mark.anyio
async def test_describe_marks_the_bottleneck() -> None:
    """describe() lists every stage and names the busiest one as the bottleneck."""

    def heavy(x: int) -> int:
        time.sleep(0.002)
        return x

    pipe = Pipeline.from_iterable(range(20)).map(heavy, name="map(heavy)").prefetch(2)
    assert "not run yet" in pipe.describe()
    await collect(pipe)
    text = pipe.describe()
    assert "from_iterable(range)" in text
    assert "prefetch(2)" in text
    assert "bottleneck: map(heavy)" in text
    heavy_stats = pipe.statistics()[1]
    assert heavy_stats.busy_s >= 20 * 0.002  # its 20 sleeps of 2 ms count as busy
    assert pipe.statistics()[1].busy_fraction > 0


@pytest.mark.anyio
async def test_describe_names_a_slow_consumer_as_the_bottleneck() -> None:
    """Cheap stages and a consumer that takes 3 ms per item: the pipeline keeps ahead,
    and describe() says the consumer is the limit, not one of the stages."""
    pipe = Pipeline.from_iterable(range(60)).map(lambda x: x + 1, concurrency=4).prefetch(8)
    async with pipe.open() as items:
        async for _ in items:
            time.sleep(0.003)  # noqa: ASYNC251 - the training step blocks the loop
    last = pipe.describe().splitlines()[-1]
    assert last.startswith("bottleneck: the consumer"), last


@pytest.mark.anyio
async def test_describe_blames_overhead_when_no_stage_is_busy() -> None:
    """Trivial stages and a consumer that takes batches at once: no stage is busy,
    the consumer waits, and describe() says per-item overhead sets the pace rather than
    naming an idle stage."""
    pipe = Pipeline.from_iterable(range(20_000)).map(lambda x: x, concurrency=4).batch(64)
    await collect(pipe)
    last = pipe.describe().splitlines()[-1]
    assert last.startswith("bottleneck: per-item overhead"), last


@pytest.mark.anyio
async def test_describe_gives_advice_that_fits_the_stage_kind() -> None:
    """A busy filter stage has one worker and a predicate: describe() says so instead of
    advising more concurrency, which a filter (like a batch stage) does not have; a busy
    thread map gets the advice of more threads."""

    def keep(x: int) -> bool:
        time.sleep(0.002)
        return True

    def heavy(x: int) -> int:
        time.sleep(0.002)
        return x

    filtered = Pipeline(range(30)).filter(keep)
    await collect(filtered)
    last = filtered.describe().splitlines()[-1]
    assert last.startswith("bottleneck: filter(keep) — its worker was busy"), last
    assert "a cheaper predicate would help" in last
    assert "concurrency there" not in last
    mapped = Pipeline(range(30)).map(heavy, concurrency=2)
    await collect(mapped)
    last = mapped.describe().splitlines()[-1]
    assert last.startswith("bottleneck: map(heavy) — its 2 workers were busy"), last
    assert "more threads there" in last
    # A tuned map's workers are the tuner's to add: the advice points at its range.
    tuned = Pipeline(range(30)).map(heavy, concurrency=aqueue.Auto(min=2, max=2))
    await collect(tuned)
    last = tuned.describe().splitlines()[-1]
    assert last.startswith("bottleneck: map(heavy) — its 2 workers were busy"), last
    assert "more threads there" not in last
    assert "its concurrency is the tuner's" in last
    assert "Auto(max=...)" in last


def _stage(name: str, busy: float, *, starved: float = 0.5) -> aqueue.StageStatistics:
    """Statistics of a one-worker stage busy ``busy`` of a 1 s run."""
    return stage_statistics(
        name,
        items_in=100,
        items_out=100,
        items_per_s=100.0,
        busy_s=busy,
        occupancy_mean=0.1,
        starved_fraction=starved,
        elapsed_s=1.0,
    )


def test_the_bottleneck_rule_has_margins() -> None:
    """One rule, with margins: a stage is named from 60% busy, per-item overhead is
    blamed below 30%, and in between there is no clear bottleneck; so a stage that is
    45% busy in one run and 55% in the next gets the same verdict. A batch stage is
    never told to use more concurrency."""
    from aqueue._pipeline.defs._stage_spec import StageSpec
    from aqueue._pipeline.run._describe import bottleneck

    specs = [
        StageSpec("iterable", "from_iterable(range)"),
        StageSpec("batch", "batch(32)", size=32),
    ]

    def verdict(busy: float) -> str:
        return bottleneck((_stage("from_iterable(range)", 0.01), _stage("batch(32)", busy)))

    runs = [verdict(b) for b in (0.35, 0.45, 0.55, 0.58)]
    assert all(v.startswith("no clear bottleneck — the busiest stage, batch(32)") for v in runs)
    assert verdict(0.2).startswith("per-item overhead")
    named = bottleneck((_stage("from_iterable(range)", 0.01), _stage("batch(32)", 0.85)), specs)
    assert named.startswith("batch(32) — its worker was busy 85% of the time"), named
    assert "no function of its own" in named
    assert "concurrency there" not in named
    both = bottleneck((_stage("map(load)", 0.9), _stage("batch(32)", 0.7)), [None, specs[1]])
    assert both.startswith("map(load) (90% busy) and batch(32) (70% busy) — each"), both


@pytest.mark.anyio
async def test_pipeline_of_a_source_tells_the_source_kind_apart() -> None:
    """Pipeline(source) starts from a list, a generator, an async iterable or a queue,
    as the matching from_* method would; bad sources get a clear TypeError."""
    q = FIFOQueue(4, "int64", ())
    q.enqueue_many_nowait([7, 8])
    q.close()

    async def agen() -> Any:
        for x in (4, 5):
            yield x

    assert await collect(Pipeline([1, 2, 3])) == [1, 2, 3]
    assert await collect(Pipeline(x for x in (9,))) == [9]
    assert await collect(Pipeline(agen())) == [4, 5]
    assert [int(x) for x in await collect(Pipeline(q))] == [7, 8]
    with pytest.raises(TypeError, match="expected an iterable of items, got int"):
        Pipeline(3)
    with pytest.raises(TypeError, match="got str"):
        Pipeline("abc")


def test_pipeline_help_is_public_and_complete() -> None:
    """help(Pipeline) shows the public constructor, and no public docstring sends the
    reader to a private module."""

    params = inspect.signature(Pipeline).parameters
    assert list(params) == ["source", "name", "autotune"]
    assert params["name"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["autotune"].kind is inspect.Parameter.KEYWORD_ONLY
    for name, member in inspect.getmembers(Pipeline):
        doc = inspect.getdoc(member) or ""
        if not name.startswith("_"):
            assert "module docstring" not in doc, name


@pytest.mark.anyio
async def test_to_queue_sends_every_item_and_closes_the_queue_when_done() -> None:
    """A pipeline ending in to_queue(q) fills q (waiting while q is full) and q closes
    after its last item, so a consumer of q drains it and stops; run() returns 0."""
    q = FIFOQueue(4, np.int64, ())
    pipe = Pipeline(range(50)).map(lambda x: x * 2, concurrency=3).to_queue(q)
    got: list[int] = []

    async def consume() -> None:
        async for x in q:
            got.append(int(x))

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        assert await pipe.run() == 0
    assert sorted(got) == [x * 2 for x in range(50)]
    assert q.closed
    stats = pipe.statistics()
    assert stats[-1].items_out == 50


@pytest.mark.anyio
async def test_to_queue_with_enqueue_many_sends_batches() -> None:
    """After batch(), to_queue(q, enqueue_many=True) sends each batch's rows, in
    order for an ordered pipeline; nothing may follow to_queue."""
    q = FIFOQueue(100, [np.int64, np.float32], [(), (2,)])
    pipe = (
        Pipeline(range(20))
        .map(lambda x: (x, np.array([x, -x], np.float32)))
        .batch(8, allow_smaller_final_batch=True)
        .to_queue(q, enqueue_many=True)
    )
    with pytest.raises(ElementSpecError, match="no stage may follow"):
        pipe.prefetch(2)
    await pipe.run()
    ids, xs = q.dequeue_many_nowait(20)
    assert ids.tolist() == list(range(20))
    assert xs[:, 1].tolist() == [-float(x) for x in range(20)]
    assert q.closed


@pytest.mark.anyio
async def test_open_with_a_monitor_samples_stages_and_the_consumers_queue() -> None:
    """pipe.open(monitor=m) samples every stage queue and every stage; only the last
    queue (what the body consumes) counts as the consumer's input."""
    m = aqueue.Monitor(interval=0.01)
    pipe = Pipeline(range(400)).map(lambda x: x, concurrency=2).batch(16)
    async with pipe.open(monitor=m) as batches:
        async for _ in batches:
            await anyio.sleep(0.001)
    h = m.history()
    assert set(h.stages) == {"pipeline/" + s.name for s in pipe.statistics()}
    assert {name: q.is_input for name, q in h.queues.items()} == {
        "0:from_iterable(range)": False,
        "1:map(<lambda>)": False,
        "2:batch(16)": True,
    }
    assert h.stages["pipeline/batch(16)"].items_out[-1] == 25
    with pytest.raises(TypeError, match="expected a Monitor"):
        pipe.open(monitor="yes")  # type: ignore[arg-type]
