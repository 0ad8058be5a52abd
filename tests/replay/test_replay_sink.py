"""A replay table as a sink: QueueRunner producers (tasks and threads) and
``Pipeline.to_queue`` fill it, inserting with the default priority; producer accounting
closes it after the last producer (a failed one at once); bad elements are the table's
ElementSpecError; a sink's ``enqueue_many`` goes in progressively, as the rate limiter
admits it.

Every body runs over ``make_table`` (each backend that has replay tables) and only uses
what every backend offers; no test measures a speed.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import numpy as np
import pytest
from replay_support import MakeTable, counters, item, items, until, values
from support import settle, spawn

import aqueue
from aqueue import (
    Coordinator,
    ElementSpecError,
    MinSize,
    Pipeline,
    QueueClosedError,
    QueueRunner,
    RateLimiter,
    SampleToInsertRatio,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def drain(table: Any, n: int) -> list[int]:
    """Sample ``n`` at a time until the table is closed and cannot serve another."""
    got: list[int] = []
    async for s in table.samples(n):
        got.extend(values(s.data))
    return got


def test_a_table_is_a_sink_and_a_queue_is_not_a_table() -> None:
    """The protocols tell them apart: both are sinks, only the table is a table."""
    table = aqueue.ReplayTable(4, np.float32, (3,))
    queue = aqueue.FIFOQueue(4, np.float32, (3,))
    assert isinstance(table, aqueue.Sink)
    assert isinstance(table, aqueue.AsyncReplayTable)
    assert isinstance(table.blocking(), aqueue.SinkView)
    assert isinstance(table.blocking(), aqueue.ReplayView)
    assert isinstance(queue, aqueue.Sink)
    assert not isinstance(queue, aqueue.AsyncReplayTable)
    assert not isinstance(table, aqueue.AsyncQueue)


@pytest.mark.parametrize("kind", ["async-callable", "async-iterable", "sync-callable", "iterable"])
async def test_runner_fills_a_table_and_closes_it_after_its_last_producer(
    make_table: MakeTable, kind: str
) -> None:
    """Three producers of one kind insert 40 items each; the last one's clean end
    closes the table, so the learner's ``samples(1)`` ends once it cannot be served
    (each item is sampled once here), and every item went in exactly once."""
    table = await make_table(1000, np.float32, (3,), max_times_sampled=1, name="exp")
    lock = threading.Lock()
    left = iter(range(120))

    def next_item() -> np.ndarray:
        with lock:
            for v in left:
                return item(v)
        raise aqueue.OutOfRangeError("no more items")  # ends the producer cleanly

    async def anext_item() -> np.ndarray:
        await anyio.lowlevel.checkpoint()
        return next_item()

    async def agen(k: int) -> Any:
        for v in range(40 * k, 40 * k + 40):
            await anyio.lowlevel.checkpoint()
            yield item(v)

    producers: list[Any] = {
        "async-callable": [anext_item] * 3,
        "async-iterable": [agen(k) for k in range(3)],
        "sync-callable": [next_item] * 3,
        "iterable": [[item(v) for v in range(40 * k, 40 * k + 40)] for k in range(3)],
    }[kind]
    async with Coordinator() as coord:
        runner = QueueRunner(table, producers, name="actors")
        assert runner.queue is table
        coord.start(runner)
        got = await drain(table, 1)
    st = await table.statistics()
    assert st.closed
    assert (st.size, st.inserts, st.samples) == (0, 120, 120)
    assert sorted(got) == list(range(120))
    assert not runner.exceptions_raised


@pytest.mark.parametrize("threaded", [False, True], ids=["task", "thread"])
async def test_runner_batches_go_in_progressively_under_a_narrow_limiter(
    make_table: MakeTable, threaded: bool
) -> None:
    """With ``enqueue_many=True`` each produced batch (64 items) goes in as the rate
    limiter admits it, although its band admits at most 8 at once (an ``insert_many``
    of 64 is refused): the learner's samples let the rest through, and all of it
    arrives in order."""
    limiter = SampleToInsertRatio(2.0, 4, 8.0)
    table = await make_table(10_000, np.float32, (3,), rate_limiter=limiter, name="exp")
    with pytest.raises(ElementSpecError, match="could never be admitted at once"):
        await table.insert_many(items(range(64)))
    batches = [items(range(64 * k, 64 * k + 64)) for k in range(3)]

    async def abatches() -> Any:
        for b in batches:
            yield b

    producer: Any = iter(batches) if threaded else abatches()
    async with Coordinator() as coord:
        coord.start(QueueRunner(table, [producer], enqueue_many=True))
        got = await drain(table, 2)
    st = await table.statistics()
    assert (st.inserts, st.closed) == (192, True)
    assert st.samples == len(got) > 0
    assert set(got) <= set(range(192))
    if isinstance(table, aqueue.ReplayTable):  # (on a server the learner may keep up)
        assert st.insert_wait_s > 0  # the limiter held the batches back


async def test_a_failing_producer_closes_the_table_and_fails_waiting_inserts(
    make_table: MakeTable,
) -> None:
    """One producer raises while another waits in an insert the limiter holds back:
    the failure closes the table at once, the waiting insert ends with
    QueueClosedError (a clean end of its producer), and the block raises the failure
    with a note naming the runner."""
    limiter = RateLimiter(1.0, 1, 0.0, 4.0)  # at most 4 inserts ahead of the samples
    table = await make_table(100, np.float32, (3,), rate_limiter=limiter, name="exp")
    fail = anyio.Event()
    count = 0

    async def steady() -> np.ndarray:
        nonlocal count
        count += 1
        return item(count)

    async def failing() -> np.ndarray:
        await fail.wait()
        raise RuntimeError("the game crashed")

    runner = QueueRunner(table, [steady, failing], name="actors")

    async def run() -> None:
        async with Coordinator() as coord:
            coord.start(runner)
            await until(table, lambda st: st.inserts_waiting == 1)
            fail.set()
            await anyio.sleep_forever()

    with pytest.raises(RuntimeError, match="the game crashed") as info:
        await run()
    assert any("QueueRunner 'actors'" in note for note in info.value.__notes__)
    st = await table.statistics()
    assert st.closed
    assert (st.size, st.inserts, st.inserts_waiting) == (4, 4, 0)
    assert [type(e) for e in runner.exceptions_raised] == [RuntimeError]


async def test_a_bad_element_fails_the_producer_with_the_tables_error(
    make_table: MakeTable,
) -> None:
    """A producer that yields an element of the wrong shape fails with the table's
    ElementSpecError (naming the table), noted with the runner, and inserts nothing."""
    table = await make_table(10, np.float32, (3,), name="exp")

    async def run() -> None:
        async with Coordinator() as coord:
            coord.start(QueueRunner(table, [[np.zeros(4, np.float32)]], name="actors"))
            await anyio.sleep_forever()

    with pytest.raises(ElementSpecError, match="ReplayTable 'exp'") as info:
        await run()
    assert any("QueueRunner 'actors'" in note for note in info.value.__notes__)
    assert await counters(table) == (0, 0, 0, 0, 0)
    assert (await table.statistics()).closed


async def test_pipeline_to_queue_fills_a_table_and_closes_it(make_table: MakeTable) -> None:
    """``Pipeline(...).map(...).to_queue(table)`` inserts every item with the default
    priority, in bursts the limiter admits, and closes the table when done."""
    limiter = SampleToInsertRatio(1.0, 8, 16.0)
    table = await make_table(1000, np.float32, (3,), rate_limiter=limiter, name="exp")
    pipe = Pipeline(range(300)).map(item, concurrency=2).to_queue(table)
    async with anyio.create_task_group() as tg:
        learner = spawn(tg, drain, table, 4)
        await pipe.run()
    st = await table.statistics()
    assert (st.inserts, st.closed) == (300, True)
    assert len(learner.result()) == st.samples > 0


async def test_pipeline_to_queue_with_a_bad_item_raises_the_tables_error(
    make_table: MakeTable,
) -> None:
    """An item the table's spec refuses fails the stage with the table's
    ElementSpecError; nothing of that burst went in."""
    table = await make_table(100, np.float32, (3,), name="exp")
    pipe = Pipeline([np.zeros((2, 2), np.float32)]).to_queue(table)
    with pytest.raises(ElementSpecError, match="ReplayTable 'exp'"):
        await pipe.run()
    assert await counters(table) == (0, 0, 0, 0, 0)


async def test_what_is_not_a_sink_is_refused() -> None:
    """QueueRunner, Pipeline.to_queue and Coordinator.watch name what they accept."""
    with pytest.raises(TypeError, match="queue or replay table"):
        QueueRunner(object(), [range(3)])  # type: ignore[type-var]
    with pytest.raises(TypeError, match="queue or replay table"):
        Pipeline(range(3)).to_queue(object())  # type: ignore[arg-type]
    table = aqueue.ReplayTable(4, np.float32, (3,))
    async with Coordinator() as coord:
        with pytest.raises(TypeError, match="queues or replay tables"):
            coord.watch(table, object())  # type: ignore[arg-type]
    assert "replay table" not in coord.report()  # (nothing was watched)


# -- the table's sink methods and producer accounting, directly --------------------------


async def test_producer_accounting_of_a_table(make_table: MakeTable) -> None:
    """Two producers: the first clean end leaves the table open, the last closes it;
    an unknown id and registering on a closed table are refused, naming the table."""
    table = await make_table(10, np.float32, (3,), name="exp")
    a = await table.register_producer()
    b = await table.register_producer()
    await table.enqueue(item(1))
    await table.producer_done(a)
    assert not (await table.statistics()).closed
    with pytest.raises(ElementSpecError, match="replay table 'exp'"):
        await table.producer_done(a)
    await table.producer_done(b)
    assert (await table.statistics()).closed
    with pytest.raises(QueueClosedError, match="replay table 'exp'"):
        await table.register_producer()
    with pytest.raises(QueueClosedError):
        await table.enqueue(item(2))
    assert values((await table.sample(1)).data) == [1]  # what is held is still served


async def test_an_unclean_end_closes_the_table_while_others_produce(make_table: MakeTable) -> None:
    """``producer_done(id, clean=False)`` closes the table although another producer is
    registered: its insert waiting on the limiter fails, having inserted nothing."""
    limiter = RateLimiter(1.0, 1, 0.0, 2.0)
    table = await make_table(10, np.float32, (3,), rate_limiter=limiter)
    a = await table.register_producer()
    await table.register_producer()
    await table.enqueue_many(items([1, 2]))
    async with anyio.create_task_group() as tg:
        waiting = spawn(tg, table.enqueue, item(3))
        await until(table, lambda st: st.inserts_waiting == 1)
        await table.producer_done(a, clean=False)
    with pytest.raises(QueueClosedError):
        waiting.result()
    assert await counters(table) == (2, 2, 0, 0, 0)


async def test_release_producers_closes_the_table(make_table: MakeTable) -> None:
    """A coordinator's stop releases a table's waiting producers: in process the table
    is closed; a shared table stays open for the other processes (the releasing
    object's sink inserts fail, as a shared queue's enqueues)."""
    table = await make_table(10, np.float32, (3,), rate_limiter=RateLimiter(1.0, 1, 0.0, 1.0))
    await table.enqueue(item(0))
    async with anyio.create_task_group() as tg:
        waiting = spawn(tg, table.enqueue, item(1))
        await until(table, lambda st: st.inserts_waiting == 1)
        table.release_producers()
    with pytest.raises(QueueClosedError):
        waiting.result()
    shared = not isinstance(table, aqueue.ReplayTable)
    assert (await table.statistics()).closed is not shared
    if shared:
        with pytest.raises(QueueClosedError, match="producers were released"):
            await table.enqueue(item(2))
    assert await counters(table) == (1, 1, 0, 0, 0)


async def test_enqueue_many_is_progressive_and_a_cancelled_one_leaves_a_prefix(
    make_table: MakeTable,
) -> None:
    """A sink's ``enqueue_many`` inserts what the limiter admits and waits for the rest;
    cancelled meanwhile, exactly a prefix is in, and the limiter's counters agree."""
    limiter = RateLimiter(1.0, 1, 0.0, 5.0)  # inserts at most 5 ahead of the samples
    table = await make_table(100, np.float32, (3,), rate_limiter=limiter)
    with anyio.move_on_after(30) as scope:
        async with anyio.create_task_group() as tg:
            op = spawn(tg, table.enqueue_many, items(range(12)))
            await until(table, lambda st: st.inserts_waiting == 1)
            assert (await table.statistics()).inserts == 5
            await table.sample(3)  # room for 3 more
            await until(table, lambda st: st.inserts == 8)
            op.scope.cancel()
    assert not scope.cancelled_caught
    assert op.cancelled
    st = await table.statistics()
    assert (st.size, st.inserts, st.samples, st.inserts_waiting) == (8, 8, 3, 0)
    got = await table.sample(2)
    assert set(values(got.data)) <= set(range(8))
    # the rest can go in later, after it
    async with anyio.create_task_group() as tg:
        rest = spawn(tg, table.enqueue_many, items(range(8, 12)))
        await settle()
        await table.sample(4)
    rest.result()
    assert (await table.statistics()).inserts == 12


async def test_thread_view_enqueue_many(make_table: MakeTable) -> None:
    """The thread view's ``enqueue_many``: progressive without a timeout (a batch wider
    than the band goes in as samples free room), all or nothing with one (refused
    when the limiter could never admit it at once; a timeout inserts nothing)."""
    limiter = RateLimiter(1.0, 1, 0.0, 4.0)
    table = await make_table(100, np.float32, (3,), rate_limiter=limiter, name="exp")
    view = table.blocking()
    with pytest.raises(ElementSpecError, match="could never be admitted"):
        await anyio.to_thread.run_sync(lambda: view.enqueue_many(items(range(6)), timeout=1.0))
    await anyio.to_thread.run_sync(lambda: view.enqueue_many(items(range(3)), timeout=1.0))
    with pytest.raises(TimeoutError):
        await anyio.to_thread.run_sync(lambda: view.enqueue_many(items(range(3)), timeout=0.01))
    assert await counters(table) == (3, 3, 0, 0, 0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, lambda: view.enqueue_many(items(range(3, 9))))
        await until(table, lambda st: st.inserts == 4 and st.inserts_waiting == 1)
        await table.sample(4)
        await until(table, lambda st: st.inserts == 8)
        await table.sample(1)
    assert await counters(table) == (9, 9, 5, 0, 0)
    await table.sample(1)  # (room for one more)
    await anyio.to_thread.run_sync(lambda: view.enqueue(item(9), timeout=10.0))
    with pytest.raises(ElementSpecError, match="ReplayTable 'exp'"):
        await anyio.to_thread.run_sync(lambda: view.enqueue(np.zeros(2, np.float32)))
    assert (await table.statistics()).inserts == 10


async def test_enqueue_uses_the_default_priority() -> None:
    """``enqueue`` gives a new item the largest priority held, as ``insert(x)`` does."""
    table = aqueue.ReplayTable(10, np.float32, (3,), rate_limiter=MinSize(1))
    key = await table.insert(item(0), 5.0)
    await table.enqueue(item(1))
    await table.enqueue_many(items([2, 3]))
    s = table.snapshot()
    assert s.keys.tolist() == [key, key + 1, key + 2, key + 3]
    assert s.priorities.tolist() == [5.0, 5.0, 5.0, 5.0]
