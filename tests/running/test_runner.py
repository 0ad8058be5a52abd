"""QueueRunner: the four producer kinds, clean ends, chained queues, thread producers,
failures, restarts and the add_queue_runner registry."""

from __future__ import annotations

import contextvars
import gc
import inspect
import json
import logging
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest
from support import aqueue_warnings, int_queue, poll, raised, settle, spawn

import aqueue
from aqueue import Coordinator, OutOfRangeError, QueueRunner, add_queue_runner
from aqueue._running._producers import ThreadRecord
from aqueue._waiting import _wait as _waiting
from aqueue.testing import stall_guard

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def drain(q: Any) -> list[int]:
    """Dequeue until the queue ends (closed and drained)."""
    return [int(x) async for x in q]


# -- producer kinds -------------------------------------------------------------------


def _async_callable(n: int) -> Any:
    it = iter(range(n))

    async def produce() -> int:
        await anyio.lowlevel.checkpoint()
        try:
            return next(it)
        except StopIteration:
            raise StopAsyncIteration from None

    return produce


def _async_iterable(n: int) -> Any:
    async def gen() -> AsyncIterator[int]:
        for i in range(n):
            await anyio.lowlevel.checkpoint()
            yield i

    return gen()


def _sync_callable(n: int) -> Any:
    return iter(range(n)).__next__  # raises StopIteration at the end


def _sync_iterable(n: int) -> Any:
    return range(n)


KINDS = {
    "async-callable": _async_callable,
    "async-iterable": _async_iterable,
    "sync-callable": _sync_callable,
    "sync-iterable": _sync_iterable,
}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_each_producer_kind_fills_the_queue_then_closes_it(kind: str) -> None:
    """Every kind enqueues each produced item once; its clean end closes the queue, so
    the consumer's ``async for`` ends after draining."""
    q = int_queue(4)
    runner = QueueRunner(q, [KINDS[kind](50)])
    async with Coordinator() as coord:
        coord.start(runner)
        got = await drain(q)
    assert got == list(range(50))
    assert q.closed
    assert runner.exceptions_raised == []
    assert not runner.running


@pytest.mark.parametrize("kind", list(KINDS))
async def test_enqueue_many_treats_each_value_as_a_batch(kind: str) -> None:
    """With enqueue_many=True each produced value is sliced along axis 0."""
    q = int_queue(8)
    batches = [np.arange(i * 3, i * 3 + 3) for i in range(10)]
    source: Any
    if kind == "sync-iterable":
        source = batches
    elif kind == "sync-callable":
        source = iter(batches).__next__
    elif kind == "async-iterable":

        async def gen() -> AsyncIterator[Any]:
            for b in batches:
                yield b

        source = gen()
    else:
        it = iter(batches)

        async def produce() -> Any:
            for b in it:
                return b
            raise StopAsyncIteration

        source = produce
    async with Coordinator() as coord:
        coord.start(QueueRunner(q, [source], enqueue_many=True))
        got = await drain(q)
    assert got == list(range(30))


async def test_last_producer_to_end_closes_the_queue() -> None:
    """Two producers run to their own exhaustion (3 and 30 items); the queue closes only
    after both ended (TF testTwoOps)."""
    q = int_queue(5)
    runner = QueueRunner(q, [range(3), range(100, 130)])
    async with Coordinator() as coord:
        coord.start(runner)
        got = await drain(q)
    assert sorted(got) == [0, 1, 2, *range(100, 130)]
    assert runner.exceptions_raised == []


async def test_producer_accounting_by_hand_closes_after_the_last_clean_end() -> None:
    """Producers that no runner runs (an actor process of its own) register and report
    their end themselves: ``producer_done(id)`` means a clean end by default, as on the
    shared queues; the last one closes the queue, and consumers drain what is left."""
    q = int_queue(5)
    a, b = await q.register_producer(), await q.register_producer()
    await q.enqueue_many([1, 2])
    await q.producer_done(a)
    assert not q.closed
    await q.producer_done(b)
    assert q.closed
    assert await drain(q) == [1, 2]
    with pytest.raises(aqueue.ElementSpecError, match="not registered"):
        await q.producer_done(b)
    r = int_queue(5)
    c = await r.register_producer()
    await r.register_producer()
    await r.producer_done(c, clean=False)  # a failed producer closes it at once
    assert r.closed


async def test_two_runners_on_one_queue_close_it_after_the_last_producer() -> None:
    """Two runners feeding one queue: the first to finish does not cut the other short."""
    q = int_queue(5)
    async with Coordinator() as coord:
        coord.start(QueueRunner(q, [range(3)]))
        coord.start(QueueRunner(q, [range(100, 130)]))
        got = await drain(q)
    assert sorted(got) == [0, 1, 2, *range(100, 130)]


async def test_same_callable_listed_k_times_runs_k_concurrent_producers() -> None:
    """[load] * 4 gives four producer threads calling ``load`` concurrently."""
    q = int_queue(100)
    inside = 0
    peak = 0
    lock = threading.Lock()
    all_in = threading.Barrier(4, timeout=20)
    counter = iter(range(1000))

    def load() -> int:
        nonlocal inside, peak
        value = next(counter)
        if value < 4:  # the first four calls only return once all four are inside
            with lock:
                inside += 1
                peak = max(peak, inside)
            all_in.wait()
            with lock:
                inside -= 1
        return value

    async with Coordinator() as coord:
        coord.start(QueueRunner(q, [load] * 4))
        await q.dequeue_many(8)
        coord.request_stop()
    assert peak == 4


class ThreadAffineEnv:
    """A game environment that must only ever be used from one thread.

    Its first frame waits at ``started`` until every environment has made its first
    call, so each one runs on some thread before the consumer can take everything
    (on a busy machine one or two producers could otherwise fill the queue alone).
    """

    def __init__(self, base: int, started: threading.Barrier) -> None:
        self.base = base
        self.frame = 0
        self.owner: int | None = None
        self.started = started

    def grab_screen(self) -> int:
        """Return the next frame number; fail if called from a second thread."""
        me = threading.get_ident()
        if self.owner is None:
            self.owner = me
            self.started.wait(timeout=10)
        if self.owner != me:
            raise AssertionError("grab_screen called from a second thread")
        self.frame += 1
        return self.base + self.frame


async def test_thread_producers_are_thread_affine_and_each_item_arrives_once() -> None:
    """Each sync producer keeps one dedicated thread; every frame arrives exactly once."""
    q = int_queue(16)
    started = threading.Barrier(4)
    envs = [ThreadAffineEnv(base, started) for base in (0, 10_000, 20_000, 30_000)]
    runner = QueueRunner(q, [env.grab_screen for env in envs])
    got: list[int] = []
    async with Coordinator() as coord:
        coord.start(runner)
        for _ in range(50):
            got += [int(x) for x in await q.dequeue_many(8)]
    assert len(set(got)) == len(got) == 400
    assert len({env.owner for env in envs}) == 4
    assert runner.exceptions_raised == []


async def test_thread_producers_keep_filling_while_the_event_loop_is_blocked() -> None:
    """Thread producers enqueue through the blocking view: the queue fills while the
    event loop is blocked in a synchronous step (no per-item loop round trip)."""
    q = int_queue(100)
    async with Coordinator() as coord:
        coord.start(QueueRunner(q, [range(60), range(60, 100)]))
        await anyio.wait_all_tasks_blocked()  # the supervising tasks started their threads
        give_up = time.monotonic() + 20
        while q.size() < 100 and time.monotonic() < give_up:
            time.sleep(0.001)  # noqa: ASYNC251 - a blocking "training step" on purpose
        assert q.size() == 100
        assert sorted(int(x) for x in await q.dequeue_many(100)) == list(range(100))


async def test_a_slow_thread_start_does_not_hold_up_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Producer threads are started off the event loop: while a thread start is held
    up (as on a busy machine), the async producers and the body keep running."""
    gate = threading.Event()
    loop_was_held: list[str] = []
    real_start = threading.Thread.start

    def held_start(self: threading.Thread) -> None:
        if self.name.startswith("QueueRunnerThread-") and not gate.wait(10):
            loop_was_held.append(self.name)  # nobody could set the gate: the loop waited
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", held_start)
    q = int_queue(10)
    async with Coordinator() as coord:
        coord.start(QueueRunner(q, [lambda: 7, _async_callable(3)]))
        first = [int(await q.dequeue()) for _ in range(3)]  # the thread is not running yet
        gate.set()
        assert int(await q.dequeue()) == 7
    assert first == [0, 1, 2]
    assert loop_was_held == []


async def test_a_thread_that_cannot_start_is_reported_as_a_failed_producer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A producer thread that cannot be started fails like a producer: its error, with a
    note naming runner and producer, leaves the block and the queue is closed."""
    real_start = threading.Thread.start

    def failing_start(self: threading.Thread) -> None:
        if self.name.startswith("QueueRunnerThread-"):
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", failing_start)
    q = int_queue(2)
    runner = QueueRunner(q, [lambda: 1], name="loader")

    async def block() -> None:
        async with Coordinator() as coord:
            coord.start(runner)
            await anyio.sleep_forever()

    with anyio.fail_after(20):
        exc = await raised(block)
    assert type(exc) is RuntimeError
    assert "can't start new thread" in str(exc)
    assert runner.exceptions_raised == [exc]
    assert "producer 0" in exc.__notes__[0]
    assert "QueueRunner 'loader'" in exc.__notes__[0]
    assert q.closed


# Which threads are started, and by whom, is seen by wrapping the interpreter's one way
# to start a thread (``_thread.start_new_thread``, or ``start_joinable_thread`` from
# Python 3.13) before ``threading`` is imported, so that ``threading.Thread.start`` goes
# through the wrapper too: every thread is seen, including one started with the
# low-level ``_thread`` API, which ``threading.enumerate()`` never lists. The script runs
# in a fresh interpreter, where nothing has imported ``threading`` yet.
_THREAD_AUDIT = """
import sys, _thread
assert "threading" not in sys.modules
starts = []

def wrap(name):
    real = getattr(_thread, name)

    def start(function, *args, **kwargs):
        me = threading.current_thread()
        new = getattr(function, "__self__", None)  # Thread._bootstrap's thread, if any
        starts.append({
            "by": me.name,
            "by_listed": me in threading.enumerate(),
            "thread": new.name if isinstance(new, threading.Thread) else None,
        })
        return real(function, *args, **kwargs)

    setattr(_thread, name, start)

for name in ("start_new_thread", "start_joinable_thread"):
    if hasattr(_thread, name):
        wrap(name)

import asyncio, json, threading
import numpy as np
import aqueue

def names():
    return sorted(t.name for t in threading.enumerate())

async def runner():
    q, r = aqueue.FIFOQueue(64, np.int64, ()), aqueue.FIFOQueue(64, np.int64, ())
    async with aqueue.Coordinator() as coord:
        coord.start(aqueue.QueueRunner(q, [lambda: 1] * 6, name="audited"))
        await q.dequeue_many(32)
        coord.start(aqueue.QueueRunner(r, [lambda: 2] * 2, name="second"))
        await r.dequeue_many(32)
        coord.request_stop()
    return {"starts": starts, "loop": threading.current_thread().name}

async def register():
    q = aqueue.FIFOQueue(4, np.int64, ())
    before = names()
    aqueue.add_queue_runner(aqueue.QueueRunner(q, [range(3)]))
    after = names()
    await asyncio.sleep(0.3)  # a watcher would have started by now
    return {"before": before, "after": after, "later": names(), "starts": starts}

print(json.dumps(asyncio.run({"runner": runner, "register": register}[sys.argv[1]]())))
"""


def audit_threads(mode: str) -> dict[str, Any]:
    """Run the audit script in a fresh interpreter; what it reports."""
    proc = subprocess.run(
        [sys.executable, "-c", _THREAD_AUDIT, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_every_thread_a_threaded_runner_starts_is_a_named_threading_thread() -> None:
    """Runners' threads are ``threading.Thread``s with names saying what they are, each
    listed by ``threading.enumerate()``: the event loop starts one thread per
    coordinator, the starter, which starts every producer thread of its runners (no
    thread made with the low-level ``_thread`` API)."""
    got = audit_threads("runner")
    starts = got["starts"]
    assert all(s["thread"] is not None for s in starts), starts  # each a threading.Thread
    by_loop = [s["thread"] for s in starts if s["by"] == got["loop"]]
    assert len(by_loop) == 1, starts  # the loop waits for one thread start, for 2 runners
    [starter] = by_loop
    assert starter.startswith("QueueRunnerStarter"), starter
    producers = [s for s in starts if s["by"] != got["loop"]]
    assert sorted(s["thread"].split(" ")[0] for s in producers) == [
        *(f"QueueRunnerThread-audited-{i}" for i in range(6)),
        *(f"QueueRunnerThread-second-{i}" for i in range(2)),
    ]
    assert all(s["by"] == starter and s["by_listed"] for s in producers), producers


def test_add_queue_runner_starts_no_thread() -> None:
    """Registering a runner only registers it: ``threading.enumerate()`` is the same
    before and after, and no thread of any kind is started (no watcher without a
    coordinator)."""
    got = audit_threads("register")
    assert got["after"] == got["before"]
    assert got["later"] == got["before"]
    assert got["starts"] == []


def starters() -> list[threading.Thread]:
    """The live threads that start producer threads."""
    return [t for t in threading.enumerate() if t.name.startswith("QueueRunnerStarter")]


async def test_the_thread_starter_lives_only_while_the_block_runs() -> None:
    """A coordinator's starter thread appears with its first threaded runner, is listed
    by ``threading.enumerate()`` under its name, and ends once the block is left."""
    q = int_queue()
    async with Coordinator() as coord:
        coord.start(QueueRunner(q, [lambda: 1]))
        assert int(await q.dequeue()) == 1
        assert starters() != []
    await poll(lambda: starters() == [])


class Env:
    """A producer holding a resource (weakly referenced by the test)."""

    def __init__(self) -> None:
        self.frames: list[weakref.ref[np.ndarray[Any, Any]]] = []

    def step(self) -> np.ndarray[Any, Any]:
        frame = np.array(len(self.frames))
        self.frames.append(weakref.ref(frame))
        return frame


async def test_no_producer_thread_or_what_it_held_outlives_the_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the block is left, every producer thread has ended, not only reported that
    it ended: the producer and the last value it produced (not yet enqueued) are
    released. A thread descheduled between the report and its end, as on a loaded
    machine (simulated by a slow report), held both."""
    report = ThreadRecord.finish

    def slow_report(self: ThreadRecord, outcome: str, error: BaseException | None) -> None:
        report(self, outcome, error)
        time.sleep(0.2)

    monkeypatch.setattr(ThreadRecord, "finish", slow_report)
    env = Env()
    frames = env.frames
    held = weakref.ref(env)
    q = int_queue(4)
    async with Coordinator() as coord:
        coord.start(QueueRunner(q, [env.step]))
        del env
        await poll(lambda: len(frames) == 5)  # 4 queued, the 5th waiting for room
        assert int(await q.dequeue()) == 0
        await poll(lambda: len(frames) == 6)
        coord.request_stop()
    del coord
    gc.collect()
    assert [t.name for t in threading.enumerate() if t.name.startswith("QueueRunnerThread")] == []
    assert held() is None
    assert frames[-1]() is None


async def test_shared_generator_is_advanced_by_one_producer_at_a_time() -> None:
    """A generator listed several times is shared safely: no item lost or repeated."""

    def gen() -> Iterator[int]:
        yield from range(200)

    async def agen() -> AsyncIterator[int]:
        for i in range(200, 400):
            await anyio.lowlevel.checkpoint()
            yield i

    q = int_queue(7)
    g, a = gen(), agen()
    runner = QueueRunner(q, [g, g, g, a, a])
    async with Coordinator() as coord:
        coord.start(runner)
        got = await drain(q)
    assert sorted(got) == list(range(400))
    assert runner.exceptions_raised == []


# -- chained queues -------------------------------------------------------------------


@pytest.mark.parametrize("how", ["queue", "dequeue", "thread"])
async def test_end_of_input_propagates_down_a_chain(how: str) -> None:
    """queue A -> runner -> queue B: when A is closed and drained, B's runner ends
    cleanly and closes B, whose consumer drains and stops (TF testRealDequeueEnqueue)."""
    a = int_queue(4, "a")
    b = int_queue(3, "b")
    a_runner = QueueRunner(a, [range(20)])
    source: Any = {"queue": a, "dequeue": a.dequeue}.get(how)
    async with Coordinator() as coord:
        coord.start(a_runner)
        if source is None:
            blocking = a.blocking()
            source = blocking.dequeue  # a sync producer reading A from its thread
        coord.start(QueueRunner(b, [source, source]))
        got = await drain(b)
    assert sorted(got) == list(range(20))
    assert a.closed
    assert b.closed


@pytest.mark.parametrize("seed", range(4))
async def test_mixed_producers_through_a_chain_deliver_every_item_once(seed: int) -> None:
    """Random mixes of all four kinds, batch and single, through two chained queues of
    random small capacities: every item arrives exactly once, then everything ends."""
    rng = np.random.default_rng(seed)
    a = int_queue(int(rng.integers(1, 6)), "a")
    b = int_queue(int(rng.integers(1, 6)), "b")
    sources: list[Any] = []
    expected: list[int] = []
    for i in range(int(rng.integers(2, 6))):
        lo, n = 1000 * i, int(rng.integers(0, 40))
        expected += range(lo, lo + n)
        sources.append(list(KINDS.values())[int(rng.integers(0, 4))](n))
        sources[-1] = _shifted(sources[-1], lo)
    relay_kinds: list[Any] = [a, a.dequeue, a.blocking().dequeue]
    relays = [relay_kinds[int(rng.integers(0, 3))] for _ in range(int(rng.integers(1, 4)))]
    async with Coordinator() as coord:
        coord.start(QueueRunner(a, sources))
        coord.start(QueueRunner(b, relays))
        got = await drain(b)
    assert sorted(got) == sorted(expected)
    assert coord.exceptions == ()


def _shifted(source: Any, offset: int) -> Any:
    """The producer ``source`` with ``offset`` added to every value."""
    if inspect.iscoroutinefunction(source):

        async def shifted_async() -> int:
            return int(await source()) + offset

        return shifted_async
    if hasattr(source, "__aiter__"):

        async def shifted_agen() -> AsyncIterator[int]:
            async for v in source:
                yield v + offset

        return shifted_agen()
    if callable(source):
        return lambda: source() + offset
    return [v + offset for v in source]


# -- failures -------------------------------------------------------------------------


async def test_failing_producer_closes_its_queue_with_cancel_and_records_the_error() -> None:
    """A producer error closes the queue (pending enqueues cancelled), lands in
    exceptions_raised with a note naming runner and producer, and reaches the coordinator."""
    q = int_queue(2)
    boom = ValueError("boom")

    async def bad() -> int:
        raise boom

    async def good() -> int:
        return 1

    runner = QueueRunner(q, [good, bad], name="loader")

    async def block() -> None:
        async with Coordinator() as coord:
            coord.start(runner)
            await anyio.sleep_forever()

    assert await raised(block) is boom
    assert runner.exceptions_raised == [boom]
    notes = getattr(boom, "__notes__", [])
    assert len(notes) == 1
    assert "producer 1 (test_failing_producer_closes_its_queue_with_cancel" in notes[0]
    assert "QueueRunner 'loader'" in notes[0]
    assert q.closed
    with pytest.raises(aqueue.QueueClosedError):
        q.enqueue_nowait(1)


async def test_sync_callable_returning_a_coroutine_is_reported() -> None:
    """A lambda returning a coroutine looks synchronous; the runner says what to do."""
    q = int_queue()

    async def load() -> int:
        return 1

    async def block() -> None:
        async with Coordinator() as coord:
            coord.start(QueueRunner(q, [lambda: load()]))
            await anyio.sleep_forever()

    exc = await raised(block)
    assert type(exc) is TypeError
    assert "async def" in str(exc)


async def test_custom_queue_closed_exception_types_end_producers_cleanly() -> None:
    """An exception of queue_closed_exception_types is a clean end, not a failure."""

    class Exhausted(Exception):
        pass

    calls = 0

    async def produce() -> int:
        nonlocal calls
        calls += 1
        if calls > 5:
            raise Exhausted
        return calls

    q = int_queue()
    runner = QueueRunner(q, [produce], queue_closed_exception_types=(Exhausted,))
    async with Coordinator() as coord:
        coord.start(runner)
        got = await drain(q)
    assert got == [1, 2, 3, 4, 5]
    assert runner.exceptions_raised == []
    assert coord.exceptions == ()


# -- lifecycle ------------------------------------------------------------------------


async def test_runner_cannot_be_started_twice_at_once_but_can_restart() -> None:
    """Starting a running runner raises; once its producers ended it can start again,
    with exceptions_raised reset (TF testIgnoreMultiStarts, testThreads)."""
    q = int_queue(100)
    fail = [True]

    async def produce() -> int:
        if fail[0]:
            fail[0] = False
            raise KeyError("first start")
        await anyio.lowlevel.checkpoint()
        return 1

    runner = QueueRunner(q, [produce])

    async def block() -> None:
        async with Coordinator() as coord:
            coord.start(runner)
            await anyio.sleep_forever()

    assert type(await raised(block)) is KeyError
    assert len(runner.exceptions_raised) == 1
    q2 = int_queue(5)
    runner2 = QueueRunner(q2, [produce])
    async with Coordinator() as coord:
        coord.start(runner2)
        with pytest.raises(RuntimeError, match="already running"):
            coord.start(runner2)
        await q2.dequeue_many(5)
    assert runner2.exceptions_raised == []
    async with Coordinator() as coord:
        coord.start(runner2)  # restarts: its queue is closed, so it ends at once
    assert not runner2.running


async def test_producers_do_not_run_once_the_coordinator_stopped() -> None:
    """A runner started after request_stop() never calls its producers (TF
    testRespectCoordShouldStop) and closes its queue."""
    calls = 0

    def load() -> int:
        nonlocal calls
        calls += 1
        return 1

    q = int_queue()
    async with Coordinator() as coord:
        coord.request_stop()
        coord.start(QueueRunner(q, [load, _async_callable(3)]))
        with pytest.raises(OutOfRangeError):
            await q.dequeue()
    assert calls == 0


def test_constructor_validates_its_arguments() -> None:
    """Bad arguments raise at construction with messages naming the problem."""
    q = int_queue()
    with pytest.raises(ValueError, match="must not be empty"):
        QueueRunner(q, [])
    with pytest.raises(TypeError, match="sequence of producers"):
        QueueRunner(q, _sync_callable(3))
    with pytest.raises(TypeError, match=r"producers\[1\]"):
        QueueRunner(q, [range(3), 42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="str"):
        QueueRunner(q, ["file.bin"])
    with pytest.raises(TypeError, match="queue_closed_exception_types"):
        QueueRunner(q, [range(3)], queue_closed_exception_types=())
    with pytest.raises(TypeError, match="aqueue queue"):
        QueueRunner([], [range(3)])  # type: ignore[arg-type]
    r = QueueRunner(q, [range(3)])
    assert r.name == "q"
    assert r.queue is q
    assert r.exceptions_raised == []
    assert QueueRunner(q, [range(3)], name="loader").name == "loader"
    assert "QueueRunner 'q'" in repr(r)


def test_generator_functions_are_refused() -> None:
    """Passing a generator *function* instead of the generator is a TypeError."""

    def gen() -> Iterator[int]:
        yield 1

    async def agen() -> AsyncIterator[int]:
        yield 1

    for fn in (gen, agen):
        with pytest.raises(TypeError, match="generator function"):
            QueueRunner(int_queue(), [fn])


# -- registry -------------------------------------------------------------------------
#
# Registry tests run their event loop inside a fresh copy of the context (the registry is
# a context variable), so nothing they register can leak into other tests.

BACKENDS = ["asyncio", "trio"]


def run_isolated(fn: Callable[[], Awaitable[Any]], backend: str) -> Any:
    """``anyio.run(fn)`` inside a fresh copy of the current context."""
    return contextvars.copy_context().run(lambda: anyio.run(fn, backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_start_queue_runners_starts_registered_runners_and_clears_the_registry(
    backend: str,
) -> None:
    """add_queue_runner + start_queue_runners is TF's three-step recipe."""

    async def body() -> None:
        q1, q2 = int_queue(name="q1"), int_queue(name="q2")
        r1, r2 = QueueRunner(q1, [range(5)]), QueueRunner(q2, [range(5, 8)])
        add_queue_runner(r1)
        add_queue_runner(r2)
        add_queue_runner(r1)  # registering twice keeps one entry
        async with Coordinator() as coord:
            assert coord.start_queue_runners() == [r1, r2]
            assert coord.start_queue_runners() == []  # cleared
            assert await drain(q1) == [0, 1, 2, 3, 4]
            assert await drain(q2) == [5, 6, 7]
        assert coord.runners == (r1, r2)

    run_isolated(body, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_registry_is_context_local(backend: str) -> None:
    """Runners registered at the top of a context are started by the tasks of that
    context, and not by those of another."""
    registered = contextvars.copy_context()
    runner = QueueRunner(int_queue(), [range(3)])
    registered.run(add_queue_runner, runner)

    async def start_registered() -> list[QueueRunner]:
        async with Coordinator() as coord:
            started = coord.start_queue_runners()
        return started

    assert run_isolated(start_registered, backend) == []
    assert registered.run(lambda: anyio.run(start_registered, backend=backend)) == [runner]


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_registry_logs_a_warning(backend: str, caplog: pytest.LogCaptureFixture) -> None:
    """start_queue_runners with nothing registered only warns (as TF does)."""

    async def body() -> None:
        async with Coordinator() as coord:
            assert coord.start_queue_runners() == []

    with caplog.at_level(logging.WARNING, logger="aqueue"):
        run_isolated(body, backend)
    assert "no QueueRunner was registered" in caplog.text


# -- the warning for a runner registered and never started ------------------------------
#
# A consumer waiting on the queue of such a runner warns after its first sleep's
# deadline, _waiting.SLOW_WAIT_S (a second), shortened here so the tests do not wait.

CONSUMERS = ["dequeue", "dequeue_many", "thread", "sample", "thread-sample"]


def _never_started_warning(what: str, name: str, runner: str) -> str:
    return (
        f"{what} '{name}': a consumer has waited 0.05 s, but QueueRunner '{runner}' that "
        "feeds it was registered with add_queue_runner() and never started; call "
        "coord.start_queue_runners() (or coord.start(runner)) inside `async with "
        "Coordinator() as coord:`"
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("consumer", CONSUMERS)
def test_a_consumer_of_a_never_started_runner_is_warned_without_a_coordinator(
    backend: str, consumer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TF's most common silent hang, without any Coordinator: a consumer (a task's
    dequeue or sample, or a thread's) blocked on the queue (or table) of a runner
    registered and never started gets one warning naming the queue, the runner and the
    fix after its first sleep's deadline, and goes on waiting: data enqueued later is
    what it returns. Two consumers of the same queue give one warning."""
    monkeypatch.setattr(_waiting, "SLOW_WAIT_S", 0.05)
    table = consumer.endswith("sample")

    async def body() -> list[str]:
        q: Any
        if table:
            q = aqueue.ReplayTable(8, np.int64, (), name="never-fed")
        else:
            q = int_queue(name="never-fed")
        add_queue_runner(QueueRunner(q, [range(3)], name="feeder"))

        async def consume() -> Any:
            if consumer == "dequeue":
                return int(await q.dequeue())
            if consumer == "dequeue_many":
                [v] = await q.dequeue_many(1)
                return int(v)
            if consumer == "sample":
                return int((await q.sample(1)).data[0])
            view = q.blocking()
            call = (lambda: view.sample(1).data[0]) if table else view.dequeue
            return int(await anyio.to_thread.run_sync(call))

        with aqueue_warnings() as logged:
            async with anyio.create_task_group() as tg:
                first, second = spawn(tg, consume), spawn(tg, consume)
                await poll(lambda: len(logged) == 1)
                await anyio.sleep(0.1)  # (a second warning would come meanwhile)
                assert first.pending  # they go on waiting
                assert second.pending
                for v in (5, 6):
                    if table:
                        await q.insert(v)
                    else:
                        q.enqueue_nowait(v)
                await poll(lambda: first.finished and second.finished)
            got = sorted([first.result(), second.result()])
            if table:  # (samples draw with replacement from the two items)
                assert set(got) <= {5, 6}
            else:
                assert got == [5, 6]
        return logged

    logged = run_isolated(body, backend)
    what = "replay table" if table else "queue"
    assert logged == [_never_started_warning(what, "never-fed", "feeder")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_started_runner_or_none_registered_gives_no_warning(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer that waits long on the queue of a runner that was started (whose
    producer has nothing yet), or of a queue no runner feeds, is not warned about."""
    monkeypatch.setattr(_waiting, "SLOW_WAIT_S", 0.05)
    release = threading.Event()

    def slow_producer() -> int:
        release.wait(20)
        return 9

    async def body() -> list[str]:
        fed, alone = int_queue(name="fed"), int_queue(name="alone")
        runner = QueueRunner(fed, [slow_producer])
        add_queue_runner(runner)
        with aqueue_warnings() as logged:
            async with Coordinator() as coord:
                coord.start_queue_runners()
                async with anyio.create_task_group() as tg:
                    waiting = [spawn(tg, fed.dequeue), spawn(tg, alone.dequeue)]
                    await settle()
                    await anyio.sleep(0.3)  # six deadlines
                    assert all(op.pending for op in waiting)
                    release.set()
                    alone.enqueue_nowait(1)
                    await poll(lambda: all(op.finished for op in waiting))
                assert [int(op.result()) for op in waiting] == [9, 1]
                coord.request_stop()
        return logged

    try:
        assert run_isolated(body, backend) == []
    finally:
        release.set()


def test_waits_pay_nothing_unless_a_runner_waits_to_be_started() -> None:
    """The watch is registered with the waiting code only while a registered runner has
    not started: none before, one from add_queue_runner until that runner starts, none
    after (and none once an unstarted runner is garbage-collected). Checked in a fresh
    interpreter: runners other tests left registered do not count there."""
    script = """
import gc
import anyio, numpy as np, aqueue
from aqueue._waiting import _wait as _waiting

async def main():
    q = aqueue.FIFOQueue(4, np.int64, (), name="q")
    assert _waiting._watch is None
    runner = aqueue.QueueRunner(q, [range(2)])
    aqueue.add_queue_runner(runner)
    assert _waiting._watch is not None
    async with aqueue.Coordinator() as coord:
        coord.start_queue_runners()
        assert _waiting._watch is None
        assert [int(await q.dequeue()) for _ in range(2)] == [0, 1]
    lost = aqueue.FIFOQueue(4, np.int64, (), name="lost")
    aqueue.add_queue_runner(aqueue.QueueRunner(lost, [range(2)]))
    assert _waiting._watch is not None
    aqueue._running._registry.take_registered_runners()
    gc.collect()
    with anyio.move_on_after(0.01):  # a watched wait notices nobody is left
        await aqueue.FIFOQueue(4, np.int64, ()).dequeue()
    assert _waiting._watch is None
    print("ok")

anyio.run(main)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_add_queue_runner_rejects_other_objects() -> None:
    """add_queue_runner only takes QueueRunner objects."""
    with pytest.raises(TypeError, match="QueueRunner"):
        add_queue_runner(int_queue())  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_join_waits_until_every_producer_ended_and_the_queue_closed() -> None:
    """runner.join() returns once all producers of the start have ended, and the queue
    (whose last producers they were) is closed by then; before any start it raises."""
    q = aqueue.FIFOQueue(64, np.int64, ())
    runner = QueueRunner(q, [iter(range(20)), iter(range(20, 30))])
    with pytest.raises(RuntimeError, match="never started"):
        await runner.join()
    async with aqueue.Coordinator() as coord:
        coord.start(runner)
        async with stall_guard(10):  # a hang here fails naming the stuck queue
            await runner.join()
        assert not runner.running
        assert q.closed
        assert sorted(int(x) for x in q.dequeue_many_nowait(30)) == list(range(30))
