"""The ``q.blocking()`` view used from real threads (docs/semantics.md, "The thread view").

Thread-side ops admit/take directly under the queue's lock, so they make progress while
the event loop itself is blocked; they wait on a threading primitive only when they must,
and are woken by whichever side (thread or task) frees space or adds data. Timeouts raise
TimeoutError and change nothing. Calling them on the event-loop thread is a RuntimeError.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pytest
from support import ints, poll, settle, spawn

import aqueue

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def _fifo(capacity: int) -> aqueue.FIFOQueue:
    return aqueue.FIFOQueue(capacity, np.int64, ())


class _Thread(threading.Thread):
    """A thread running ``fn`` and keeping its result or exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as exc:
            self.error = exc

    async def join_async(self) -> Any:
        """Join without blocking the event loop; return the value or raise the error."""
        await poll(lambda: not self.is_alive())
        if self.error is not None:
            raise self.error
        return self.value


def _start(fn: Callable[[], Any]) -> _Thread:
    t = _Thread(fn)
    t.start()
    return t


async def test_view_methods_raise_on_the_event_loop_thread() -> None:
    """Blocking methods refuse to run on the event-loop thread; nothing changes."""
    q = _fifo(4)
    q.enqueue_nowait(1)
    bq = q.blocking()
    assert isinstance(bq, aqueue.BlockingQueue)
    calls: list[Callable[[], Any]] = [
        lambda: bq.enqueue(2),
        lambda: bq.enqueue_many(np.array([2, 3])),
        lambda: bq.dequeue(),
        lambda: bq.dequeue_many(1),
        lambda: bq.dequeue_up_to(1),
        lambda: bq.dequeue_burst(1),
    ]
    for call in calls:
        with pytest.raises(RuntimeError):
            call()
    assert q.size() == 1
    assert q.statistics().dequeued_total == 0


async def test_thread_enqueues_admit_while_the_loop_is_blocked() -> None:
    """A thread fills the queue while the event loop is stuck in time.sleep."""
    q = _fifo(100)
    bq = q.blocking()

    def produce() -> None:
        for v in range(50):
            bq.enqueue(v)
        bq.enqueue_many(np.arange(50, 80))
        bq.enqueue_many(np.arange(80, 90), timeout=1.0)

    t = _start(produce)
    deadline = time.monotonic() + 10
    while t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)  # noqa: ASYNC251 - deliberately block the event loop
    assert not t.is_alive()
    assert t.error is None
    assert q.size() == 90
    assert ints(q.dequeue_many_nowait(90)) == list(range(90))


async def test_thread_dequeues_take_while_the_loop_is_blocked() -> None:
    """A thread takes elements while the event loop is stuck in time.sleep."""
    q = _fifo(100)
    q.enqueue_many_nowait(np.arange(60))
    bq = q.blocking()

    def consume() -> list[int]:
        out = [int(bq.dequeue()) for _ in range(10)]
        out += ints(bq.dequeue_many(20))
        out += ints(bq.dequeue_up_to(10, timeout=1.0))
        return out

    t = _start(consume)
    deadline = time.monotonic() + 10
    while t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)  # noqa: ASYNC251 - deliberately block the event loop
    assert not t.is_alive()
    assert t.error is None
    assert t.value == list(range(40))
    assert q.size() == 20


async def test_blocked_task_dequeue_woken_by_thread_enqueue() -> None:
    """A task waiting in dequeue is woken by a thread's enqueue."""
    q = _fifo(4)
    bq = q.blocking()
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue_many, 2)
        await settle()
        await anyio.to_thread.run_sync(bq.enqueue_many, np.array([5, 6]))
        await poll(lambda: not op.pending)
    assert ints(op.result()) == [5, 6]


async def test_blocked_task_enqueue_woken_by_thread_dequeue() -> None:
    """A task waiting in enqueue on a full queue is woken by a thread's dequeue."""
    q = _fifo(1)
    q.enqueue_nowait(1)
    bq = q.blocking()
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.enqueue, 2)
        await settle()
        assert int(await anyio.to_thread.run_sync(bq.dequeue)) == 1
        await poll(lambda: not op.pending)
        assert op.returned
    assert ints(q.dequeue_up_to_nowait(3)) == [2]


async def test_blocked_thread_dequeue_woken_by_task_enqueue() -> None:
    """A thread waiting in dequeue (no timeout) is woken by an async enqueue."""
    q = _fifo(4)
    bq = q.blocking()
    t = _start(lambda: ints(bq.dequeue_many(3)))
    await poll(lambda: q.statistics().tasks_waiting_dequeue == 1)
    await q.enqueue(1)
    await q.enqueue_many(np.array([2, 3]))
    assert await t.join_async() == [1, 2, 3]
    assert q.statistics().tasks_waiting_dequeue == 0


async def test_blocked_thread_enqueue_woken_by_task_dequeue() -> None:
    """A thread waiting in enqueue_many on a full queue is woken by async dequeues."""
    q = _fifo(2)
    q.enqueue_many_nowait(np.array([0, 1]))
    bq = q.blocking()
    t = _start(lambda: bq.enqueue_many(np.arange(2, 6)))
    await poll(lambda: q.statistics().tasks_waiting_enqueue == 1)
    got = [int(await q.dequeue()) for _ in range(4)]
    await t.join_async()
    got += ints(q.dequeue_up_to_nowait(5))
    assert got == list(range(6))


async def test_a_burst_of_thread_wakeups_reaches_every_waiting_task() -> None:
    """Threads that wake many waiting tasks while the loop is busy wake every one of them.

    The loop is blocked while eight threads each admit an element into its own queue,
    so all eight wake-ups are sent before the loop can deliver any (on asyncio they
    travel together); each waiting dequeue must still get its own element.
    """
    queues = [_fifo(2) for _ in range(8)]
    views = [q.blocking() for q in queues]
    async with anyio.create_task_group() as tg:
        ops = [spawn(tg, q.dequeue) for q in queues]
        await settle()
        assert all(q.statistics().tasks_waiting_dequeue == 1 for q in queues)
        start = threading.Barrier(len(views))

        def admit(i: int) -> None:
            start.wait()
            views[i].enqueue(100 + i)

        threads = [_start(lambda i=i: admit(i)) for i in range(len(views))]
        for t in threads:
            t.join()  # blocks the loop: the wake-ups pile up meanwhile
        with anyio.fail_after(5):
            await poll(lambda: not any(op.pending for op in ops))
    assert [int(op.result()) for op in ops] == [100 + i for i in range(8)]


async def test_thread_to_thread_wakeups() -> None:
    """Two threads hand data to each other through the queue while the loop idles."""
    q = _fifo(3)
    bq = q.blocking()
    consumer = _start(lambda: [int(bq.dequeue()) for _ in range(50)])

    def produce() -> None:
        for v in range(50):
            bq.enqueue(v)

    producer = _start(produce)
    await producer.join_async()
    assert await consumer.join_async() == list(range(50))


async def test_thread_timeouts_change_nothing() -> None:
    """Expired thread-side ops raise TimeoutError and leave the queue as it was; a timed
    enqueue_many is all-or-nothing."""
    q = _fifo(4)
    q.enqueue_many_nowait(np.array([0, 1, 2]))
    bq = q.blocking()

    def attempts() -> list[str]:
        seen: list[str] = []
        calls: list[Callable[[], Any]] = [
            lambda: bq.enqueue_many(np.array([7, 8]), timeout=0.02),
            lambda: bq.dequeue_many(4, timeout=0.02),
            lambda: bq.dequeue_up_to(4, timeout=0.02),
        ]
        for call in calls:
            try:
                call()
            except TimeoutError:
                seen.append("timeout")
        return seen

    assert await anyio.to_thread.run_sync(attempts) == ["timeout"] * 3
    assert q.size() == 3
    stats = q.statistics()
    assert (stats.enqueued_total, stats.dequeued_total) == (3, 0)
    assert (stats.tasks_waiting_enqueue, stats.tasks_waiting_dequeue) == (0, 0)
    q.enqueue_nowait(3)

    def full_and_empty() -> list[str]:
        seen: list[str] = []
        try:
            bq.enqueue(9, timeout=0.02)
        except TimeoutError:
            seen.append("timeout")
        seen.append(str(ints(bq.dequeue_many(4, timeout=1.0))))
        try:
            bq.dequeue(timeout=0.02)
        except TimeoutError:
            seen.append("timeout")
        return seen

    assert await anyio.to_thread.run_sync(full_and_empty) == ["timeout", "[0, 1, 2, 3]", "timeout"]
    assert q.size() == 0


async def test_timed_out_thread_dequeue_many_restores_claims_in_order() -> None:
    """A thread dequeue_many larger than the capacity claims progressively; on timeout its
    claims go back to the front in order."""
    q = _fifo(2)
    bq = q.blocking()
    t = _start(lambda: bq.dequeue_many(4, timeout=1.0))
    await poll(lambda: q.statistics().tasks_waiting_dequeue == 1)
    q.enqueue_many_nowait(np.array([0, 1]))
    # Normally the thread claims both before its timeout; the checks below hold either way.
    await poll(lambda: q.size() == 0 or not t.is_alive())
    with pytest.raises(TimeoutError):
        await t.join_async()
    assert ints(q.dequeue_up_to_nowait(5)) == [0, 1]


async def test_close_from_thread_and_closed_errors() -> None:
    """close() through the view wakes async consumers; thread ops see the closed rules."""
    q = _fifo(4)
    bq = q.blocking()
    q.enqueue_nowait(1)
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue_many, 2)
        await settle()
        await anyio.to_thread.run_sync(bq.close)
        await poll(lambda: not op.pending)
    assert isinstance(op.error, aqueue.OutOfRangeError)
    assert q.closed

    def after_close() -> list[Any]:
        out: list[Any] = [bq.size(), int(bq.dequeue())]
        for call in (lambda: bq.enqueue(2), lambda: bq.dequeue(), lambda: bq.dequeue_up_to(2)):
            try:
                call()
            except (aqueue.QueueClosedError, aqueue.OutOfRangeError) as exc:
                out.append(type(exc).__name__)
        return out

    assert await anyio.to_thread.run_sync(after_close) == [
        1,
        1,
        "QueueClosedError",
        "OutOfRangeError",
        "OutOfRangeError",
    ]


async def test_close_wakes_a_blocked_thread() -> None:
    """A thread blocked in dequeue (no timeout) gets OutOfRangeError when the loop closes."""
    q = _fifo(2)
    bq = q.blocking()
    t = _start(bq.dequeue)
    await poll(lambda: q.statistics().tasks_waiting_dequeue == 1)
    q.close()
    with pytest.raises(aqueue.OutOfRangeError):
        await t.join_async()


async def test_threads_and_tasks_share_one_line() -> None:
    """A task that started waiting first is served before a later thread waiter."""
    q = _fifo(2)
    bq = q.blocking()
    async with anyio.create_task_group() as tg:
        task_op = spawn(tg, q.dequeue)
        await settle()
        t = _start(bq.dequeue)
        await poll(lambda: q.statistics().tasks_waiting_dequeue == 2)
        q.enqueue_nowait(1)
        await poll(lambda: not task_op.pending)
        assert int(task_op.result()) == 1
        q.enqueue_nowait(2)
        assert int(await t.join_async()) == 2


async def test_game_threads_feed_an_async_trainer_exactly_once() -> None:
    """Experience replay: four threads push frames through the view into a shuffle queue
    with a floor; an async trainer takes batches; every frame arrives exactly once."""
    q = aqueue.RandomShuffleQueue(64, 16, np.int64, (2,), seed=3)
    bq = q.blocking()

    def game(g: int) -> None:
        for i in range(200):
            frame = g * 1000 + i
            if i % 10 == 9:
                bq.enqueue_many(np.array([[frame, -frame]]))
            else:
                bq.enqueue(np.array([frame, -frame]))

    threads = [_start(lambda g=g: game(g)) for g in range(4)]  # type: ignore[misc]
    seen: list[int] = []
    while len(seen) < 800 - 16:
        batch = await q.dequeue_many(8)
        assert (batch[:, 0] == -batch[:, 1]).all()
        seen += batch[:, 0].tolist()
    for t in threads:
        await t.join_async()
    q.close()
    async for frame in q:
        seen.append(int(frame[0]))
    assert sorted(seen) == sorted(g * 1000 + i for g in range(4) for i in range(200))


async def test_cancel_pending_enqueues_fails_blocked_threads() -> None:
    """close(cancel_pending_enqueues=True) fails a thread's pending enqueue_many at once;
    the prefix it had admitted stays."""
    q = _fifo(2)
    bq = q.blocking()
    t = _start(lambda: bq.enqueue_many(np.arange(5)))
    await poll(lambda: q.statistics().tasks_waiting_enqueue == 1)
    assert int(await q.dequeue()) == 0
    await poll(lambda: q.size() == 2)  # the thread admitted 2 into the freed slot
    q.close(cancel_pending_enqueues=True)
    with pytest.raises(aqueue.QueueClosedError):
        await t.join_async()
    assert ints(await q.dequeue_up_to(5)) == [1, 2]


async def test_timed_enqueue_many_larger_than_capacity_is_refused() -> None:
    """A timed (all-or-nothing) thread enqueue_many that could never fit raises
    ElementSpecError at once and admits nothing."""
    q = _fifo(2)
    bq = q.blocking()

    def call() -> str:
        try:
            bq.enqueue_many(np.arange(3), timeout=5.0)
        except aqueue.ElementSpecError:
            return "refused"
        return "admitted"

    assert await anyio.to_thread.run_sync(call) == "refused"
    assert q.size() == 0


def _values(batch: Any) -> list[int]:
    """Element values of a batch: the priorities' partner component for PriorityQueue."""
    return ints(batch[1] if isinstance(batch, tuple) else batch)


@pytest.mark.parametrize(
    ("make", "batch"),
    [
        (lambda: aqueue.FIFOQueue(10, np.int64, ()), np.arange),
        (lambda: aqueue.RandomShuffleQueue(10, 2, np.int64, (), seed=3), np.arange),
        (lambda: aqueue.PaddingFIFOQueue(10, np.int64, ()), np.arange),
        (
            lambda: aqueue.PriorityQueue(10, np.int64, ()),
            lambda a, b: (np.arange(a, b)[::-1].copy(), np.arange(a, b)[::-1].copy()),
        ),
    ],
    ids=["fifo", "shuffle", "padding", "priority"],
)
async def test_timed_enqueue_many_and_waiting_dequeue_many_do_not_block_each_other(
    make: Callable[[], Any], batch: Callable[[int, int], Any]
) -> None:
    """A timed thread enqueue_many (all-or-nothing) that does not fit the free space goes
    in whole when the waiting dequeue_many will take enough to bring the size back
    within capacity: neither waits for the other until the timeout."""
    q = make()
    q.enqueue_many_nowait(batch(0, 5))
    bq = q.blocking()
    async with anyio.create_task_group() as tg:
        got = spawn(tg, q.dequeue_many, 8)
        await settle()
        t = _start(lambda: bq.enqueue_many(batch(5, 13), timeout=20.0))
        await t.join_async()  # TimeoutError here if the two waited for each other
        await settle()
    taken = _values(got.result())
    assert len(taken) == 8
    assert q.size() == 5  # back within capacity once the dequeue took its 8
    q.close()  # lifts the shuffle queue's floor
    rest = _values(q.dequeue_many_nowait(q.size()))
    assert sorted(taken + rest) == list(range(13))
    if isinstance(q, aqueue.PriorityQueue):  # still the 8 smallest, in order
        assert taken == list(range(8))


@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
async def test_threads_and_tasks_with_timeouts_and_cancellations_conserve(kind: str) -> None:
    """Producer threads (some calls timing out) and consumer threads and tasks (some
    timing out or cancelled) on a small queue: nothing is lost or duplicated, and a
    timed-out or cancelled call changed nothing."""
    if kind == "fifo":
        q: Any = aqueue.FIFOQueue(3, np.int64, ())
    else:
        q = aqueue.RandomShuffleQueue(4, 1, np.int64, (), seed=5)
    bq = q.blocking()
    attempts: list[tuple[list[int], bool]] = []  # values, completed
    consumed: list[int] = []
    lock = threading.Lock()

    def producer(p: int) -> None:
        rng = random.Random(p)
        for i in range(60):
            vals = [p * 1000 + i * 10 + j for j in range(rng.randint(1, 3))]
            timeout = rng.choice([None, None, 0.0, 0.001])
            try:
                if len(vals) == 1:
                    bq.enqueue(vals[0], timeout=timeout)
                else:
                    bq.enqueue_many(np.array(vals), timeout=timeout)
                done = True
            except TimeoutError:
                done = False
            with lock:
                attempts.append((vals, done))

    def thread_consumer(c: int) -> None:
        rng = random.Random(100 + c)
        while True:
            try:
                if rng.random() < 0.5:
                    got = [int(bq.dequeue(timeout=rng.choice([None, 0.001])))]
                else:
                    got = ints(bq.dequeue_up_to(rng.randint(1, 5), timeout=0.002))
            except TimeoutError:
                continue
            except aqueue.OutOfRangeError:
                return
            with lock:
                consumed.extend(got)

    async def task_consumer(c: int) -> None:
        rng = random.Random(200 + c)
        while True:
            with anyio.move_on_after(rng.choice([0.0, 0.0005, 0.01])):
                try:
                    got = ints(await q.dequeue_many(rng.randint(1, 6)))
                except aqueue.OutOfRangeError:
                    return
                consumed.extend(got)

    producers = [_start(lambda p=p: producer(p)) for p in range(3)]  # type: ignore[misc]
    consumers = [_start(lambda c=c: thread_consumer(c)) for c in range(2)]  # type: ignore[misc]
    async with anyio.create_task_group() as tg:
        for c in range(2):
            tg.start_soon(task_consumer, c)
        for t in producers:
            await t.join_async()
        q.close()
        for t in consumers:
            await t.join_async()
    remaining = ints(q.dequeue_up_to_nowait(100)) if q.size() else []
    everything = consumed + remaining
    assert len(everything) == len(set(everything))
    expected = {v for vals, done in attempts if done for v in vals}
    assert set(everything) == expected
    assert q.statistics().enqueued_total == len(expected)


async def test_thread_dequeue_burst_takes_what_arrived_and_times_out_cleanly() -> None:
    """A thread's dequeue_burst blocks for the first element, then takes all that is
    there up to n; with a timeout and nothing there it raises TimeoutError and takes
    nothing."""
    q = _fifo(8)
    bq = q.blocking()
    t = _start(lambda: bq.dequeue_burst(5))
    await anyio.sleep(0.01)
    assert t.is_alive()
    await q.enqueue_many(np.array([1, 2, 3]))  # all three arrive in one step
    assert ints(await t.join_async()) == [1, 2, 3]
    assert q.size() == 0
    t2 = _start(lambda: bq.dequeue_burst(5, timeout=0.05))
    with pytest.raises(TimeoutError):
        await t2.join_async()
    assert q.statistics().tasks_waiting_dequeue == 0


def test_a_view_may_be_created_before_any_loop_runs_or_in_the_thread_itself() -> None:
    """``q.blocking()`` may be created anywhere: here one view is made before the event
    loop starts and another inside the producer thread; both feed an async consumer."""
    q = _fifo(2)
    early = q.blocking()

    def produce() -> None:
        early.enqueue_many(np.arange(0, 5))
        q.blocking().enqueue_many(np.arange(5, 10))  # made in this thread
        early.close()

    async def consume() -> list[int]:
        t = _start(produce)
        got = [int(x) async for x in q]
        await t.join_async()
        return got

    assert anyio.run(consume) == list(range(10))
