"""Coordinator: fault drills (producer errors, hung threads, outside cancellation), clean
stop, first exception wins, supervised tasks, the stall watchdog and report()
(docs/guides/input-pipeline.md,
"Producers: tasks and threads").

Every test runs on asyncio and trio (anyio's plugin) but those whose subject is native
asyncio cancellation (``task.cancel()``, ``asyncio.timeout``), which pytest-asyncio runs.
"""

from __future__ import annotations

import asyncio
import logging
import re
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from support import aqueue_warnings, int_queue, poll, raised

import aqueue
from aqueue import Coordinator, OutOfRangeError, QueueRunner, add_queue_runner
from aqueue._running._registry import take_registered_runners

pytestmark = pytest.mark.timeout(60)

# A grace period far longer than any drill may take: a drill that finishes under its
# guard proves that errors do not wait for the grace period to run out.
LONG_GRACE = 60.0
GUARD = 20.0


# -- fault drills ---------------------------------------------------------------------


def failing_producer(kind: str, k: int, error: Exception) -> Any:
    """A producer of the given kind that yields 0..k-1, then raises ``error``."""
    counter = iter(range(1_000_000))

    def next_value() -> int:
        v = next(counter)
        if v == k:
            raise error
        return v

    if kind == "thread-callable":
        return next_value
    if kind == "thread-iterable":

        def gen() -> Any:
            while True:
                yield next_value()

        return gen()
    if kind == "task-callable":

        async def produce() -> int:
            await anyio.lowlevel.checkpoint()
            return next_value()

        return produce

    async def agen() -> AsyncIterator[int]:
        while True:
            await anyio.lowlevel.checkpoint()
            yield next_value()

    return agen()


PRODUCER_KINDS = ["thread-callable", "thread-iterable", "task-callable", "task-iterable"]


async def drill_producer_raises_at_item_k(kind: str) -> None:
    """The producer's own exception leaves the block (not wrapped), long before the grace
    period; the body blocked in dequeue_many and a consumer outside both wake up."""
    error = ValueError(f"bad record in {kind}")
    q = int_queue(100)
    outside: list[BaseException] = []

    async def outside_consumer() -> None:
        try:
            await q.dequeue_many(1000)
        except OutOfRangeError as exc:
            outside.append(exc)

    coord = Coordinator(stop_grace_period=LONG_GRACE)

    async def block() -> None:
        async with coord:
            coord.start(QueueRunner(q, [failing_producer(kind, 7, error)] * 2))
            while True:
                await q.dequeue_many(50)  # never satisfied: 7 items, then the error

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(outside_consumer)
            exc = await raised(block)
    assert exc is error  # the original exception itself, not an exception group
    assert coord.exceptions == (error,)
    assert any("QueueRunner 'q'" in note for note in getattr(error, "__notes__", ()))
    assert len(outside) == 1
    assert q.closed


async def drill_thread_producer_hangs() -> None:
    """A producer thread stuck in its call is abandoned after the grace period and
    leaving the block raises RuntimeError naming it."""
    release, entered = threading.Event(), threading.Event()

    def stuck_grab_screen() -> int:
        entered.set()
        release.wait(GUARD)
        return 0

    q = int_queue()

    async def block() -> None:
        async with Coordinator(stop_grace_period=0.1) as coord:
            coord.start(QueueRunner(q, [stuck_grab_screen, range(3)]))
            assert [int(x) for x in await q.dequeue_many(3)] == [0, 1, 2]
            await poll(entered.is_set)

    try:
        with anyio.fail_after(GUARD):
            exc = await raised(block)
        assert type(exc) is RuntimeError
        assert "Coordinator stopped with producers still running" in str(exc)
        assert "stuck_grab_screen" in str(exc)
        assert "QueueRunnerThread-q-0" in str(exc)
        assert "QueueRunnerThread-q-1" not in str(exc)
    finally:
        release.set()


def runner_threads(queue_name: str) -> list[threading.Thread]:
    """The live producer threads of runners named ``queue_name``."""
    prefix = f"QueueRunnerThread-{queue_name}-"
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def assert_threads_end(threads: list[threading.Thread]) -> None:
    """Each thread ends (a thread the coordinator abandoned would stay blocked)."""
    for t in threads:
        t.join(GUARD)
        assert not t.is_alive(), f"{t.name} is still running"


async def drill_outside_cancellation() -> None:
    """Cancelling the block from outside tears every producer down and propagates the
    cancellation (the code after the block never runs)."""
    q = int_queue(2, name="drill-outside")
    async_cancelled = threading.Event()

    async def produce() -> int:
        try:
            await anyio.sleep_forever()
        finally:
            async_cancelled.set()
        return 0  # pragma: no cover

    after_block = False
    with aqueue_warnings() as logged, anyio.fail_after(GUARD):
        with anyio.CancelScope() as outer:
            async with Coordinator(stop_grace_period=LONG_GRACE) as coord:
                # the thread fills the queue, then blocks in enqueue
                coord.start(QueueRunner(q, [produce, lambda: 1]))
                await poll(lambda: q.size() == 2)
                threads = runner_threads(q.name)
                assert len(threads) == 1
                outer.cancel()
                await anyio.sleep_forever()
            after_block = True  # pragma: no cover
    assert outer.cancelled_caught
    assert not after_block
    assert async_cancelled.is_set()
    assert logged == []  # no producer was abandoned
    assert_threads_end(threads)
    assert q.closed
    assert coord.should_stop()


async def drill_runner_never_started() -> None:
    """TF's most common silent hang: inside a coordinator's block that forgot
    ``coord.start_queue_runners()``, a consumer blocked on the queue of a registered
    runner gets a warning naming the queue (within about a second), from the
    coordinator."""
    q = int_queue(name="never-fed")
    with aqueue_warnings() as logged, anyio.fail_after(GUARD):
        add_queue_runner(QueueRunner(q, [range(3)]))
        try:
            # ... and no coord.start_queue_runners():
            async with Coordinator(), anyio.create_task_group() as tg:
                tg.start_soon(q.dequeue)
                await poll(lambda: any("never-fed" in m for m in logged))
                tg.cancel_scope.cancel()
        finally:
            take_registered_runners()  # (the test's context outlives it)
    [message] = [m for m in logged if "never-fed" in m]
    assert "queue 'never-fed'" in message
    assert "never started" in message
    assert "start_queue_runners" in message


FAULT_DRILLS: dict[str, Callable[[], Awaitable[None]]] = {
    **{
        f"raises-{kind}": (lambda kind=kind: drill_producer_raises_at_item_k(kind))  # type: ignore[misc]
        for kind in PRODUCER_KINDS
    },
    "thread-hangs": drill_thread_producer_hangs,
    "outside-cancellation": drill_outside_cancellation,
    "runner-never-started": drill_runner_never_started,
}


@pytest.mark.anyio
@pytest.mark.parametrize("drill", list(FAULT_DRILLS))
async def test_fault_drill(drill: str) -> None:
    """Each fault drill, on asyncio and on trio."""
    await FAULT_DRILLS[drill]()


# -- native asyncio cancellation ------------------------------------------------------


async def _produce_two() -> int:
    await anyio.lowlevel.checkpoint()
    return 2


# pytest-asyncio: native task.cancel() on the host task is the subject.
@pytest.mark.asyncio
async def test_task_cancel_propagates_and_tears_down(caplog: pytest.LogCaptureFixture) -> None:
    """asyncio task.cancel() on the host task: CancelledError leaves the block and the
    producers (thread and task) are gone."""
    q = int_queue(3, name="task-cancel")
    entered = asyncio.Event()

    async def host() -> None:
        async with Coordinator(stop_grace_period=LONG_GRACE) as coord:
            coord.start(QueueRunner(q, [lambda: 1, _produce_two]))
            entered.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(host())
    await entered.wait()
    await poll(lambda: q.size() == 3)
    threads = runner_threads(q.name)
    assert len(threads) == 1
    task.cancel()
    with caplog.at_level(logging.WARNING, logger="aqueue"), pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, GUARD)
    assert q.closed
    assert "abandoned" not in caplog.text
    assert_threads_end(threads)


# pytest-asyncio: asyncio.timeout (a native cancellation it converts) is the subject.
@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is new in 3.11")
@pytest.mark.asyncio
async def test_asyncio_timeout_around_the_block_is_honoured(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """asyncio.timeout around the block: TimeoutError, not a swallowed cancellation."""
    q = int_queue(3, name="asyncio-timeout")
    ran_after = False

    threads: list[threading.Thread] = []

    async def block() -> None:
        nonlocal ran_after
        async with asyncio.timeout(GUARD / 4) as timeout:  # type: ignore[attr-defined,unused-ignore]
            async with Coordinator(stop_grace_period=LONG_GRACE) as coord:
                coord.start(QueueRunner(q, [lambda: 1, _produce_two]))
                await poll(lambda: q.size() == 3)
                threads.extend(runner_threads(q.name))
                timeout.reschedule(asyncio.get_running_loop().time())  # expire now
                await asyncio.sleep(3600)
            ran_after = True  # pragma: no cover

    with caplog.at_level(logging.WARNING, logger="aqueue"):
        assert type(await raised(block)) is TimeoutError
    assert not ran_after
    assert "abandoned" not in caplog.text
    assert len(threads) == 1
    assert_threads_end(threads)


# pytest-asyncio: native task.cancel() on the host task is the subject.
@pytest.mark.asyncio
async def test_host_cancellation_wins_over_a_recorded_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """If the host task is cancelled while an error is recorded, the cancellation still
    propagates (never swallowed) and the error is logged, not lost."""
    q = int_queue()
    started = asyncio.Event()

    async def host() -> None:
        async with Coordinator() as coord:
            started.set()
            try:
                await asyncio.sleep(3600)
            finally:
                coord.request_stop(KeyError("recorded"))

    task = asyncio.create_task(host())
    await started.wait()
    task.cancel()
    with caplog.at_level(logging.ERROR, logger="aqueue"), pytest.raises(asyncio.CancelledError):
        await task
    assert "recorded" in caplog.text
    assert not q.closed


# -- clean stop -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_request_stop_is_clean_and_releases_producers_blocked_on_a_full_queue() -> None:
    """request_stop(): should_stop() turns true, producers blocked on a full queue are
    released, the body is not cancelled and leaving raises nothing."""
    q = int_queue(2)

    async def produce() -> int:
        return 1

    runner = QueueRunner(q, [produce, range(100)])
    async with Coordinator(stop_grace_period=LONG_GRACE) as coord:
        coord.start(runner)
        await poll(lambda: q.statistics().tasks_waiting_enqueue == 2)
        assert not coord.should_stop()
        coord.request_stop()
        assert coord.should_stop()
        await anyio.lowlevel.checkpoint()  # the body keeps running after a clean stop
        await poll(lambda: not runner.running)
        assert q.closed
        assert len(await q.dequeue_up_to(5)) == 2  # what was queued stays and drains
    assert coord.exceptions == ()
    assert runner.exceptions_raised == []


@pytest.mark.anyio
async def test_leaving_normally_stops_producers_within_the_grace_period() -> None:
    """Leaving the block requests a stop; cooperative producers end on their own, the
    uncooperative async one is cancelled after the grace period."""
    q = int_queue(100)
    started = cancelled = False

    async def stubborn() -> int:
        nonlocal started, cancelled
        started = True
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        return 0  # pragma: no cover

    async with Coordinator(stop_grace_period=0.05) as coord:
        coord.start(QueueRunner(q, [range(10**9), stubborn]))
        await q.dequeue_many(5)
        await poll(lambda: started)
    assert cancelled
    assert q.closed


@pytest.mark.anyio
async def test_clean_stop_exception_types() -> None:
    """OutOfRangeError (the default) is a clean stop; a custom tuple replaces the default
    (TF testJoinIgnoresOutOfRange, testJoinIgnoresMyExceptionType)."""
    async with Coordinator() as coord:
        coord.request_stop(OutOfRangeError("no more data"))
        await anyio.lowlevel.checkpoint()
    assert coord.should_stop()
    assert coord.exceptions == ()

    async with Coordinator(clean_stop_exception_types=(ValueError,)) as coord:
        coord.request_stop(ValueError("fine"))
    assert coord.exceptions == ()

    async def custom() -> None:
        async with Coordinator(clean_stop_exception_types=(ValueError,)) as coord:
            coord.request_stop(OutOfRangeError("no more data"))
            await anyio.sleep_forever()

    assert type(await raised(custom)) is OutOfRangeError


@pytest.mark.anyio
async def test_out_of_range_leaving_the_body_ends_the_block_quietly() -> None:
    """The TF training loop ends with OutOfRangeError when the input is exhausted: the
    block ends quietly and the code after it runs."""
    q = int_queue()
    steps = 0
    async with Coordinator() as coord:
        coord.start(QueueRunner(q, [range(10)]))
        while True:
            await q.dequeue_many(3)
            steps += 1
    assert steps == 3
    assert coord.should_stop()


# -- errors ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_first_exception_wins_and_the_others_become_notes() -> None:
    """request_stop(ex) after an earlier exception keeps the earlier one; both are in
    coord.exceptions; the later one is attached to the first as a note."""
    first, second = KeyError("first"), ValueError("too late")
    coord = Coordinator()

    async def block() -> None:
        async with coord:
            coord.request_stop(first)
            coord.request_stop(second)
            await anyio.sleep_forever()

    assert await raised(block) is first
    assert coord.exceptions == (first, second)
    assert any("too late" in note for note in getattr(first, "__notes__", ()))


@pytest.mark.anyio
async def test_request_stop_with_an_error_cancels_the_body() -> None:
    """A non-clean exception cancels everything in the scope, the body included."""
    reached = False
    error = ZeroDivisionError()

    async def block() -> None:
        nonlocal reached
        async with Coordinator() as coord:
            coord.request_stop(error)
            await anyio.lowlevel.checkpoint()
            reached = True  # pragma: no cover

    assert await raised(block) is error
    assert not reached


@pytest.mark.anyio
async def test_stop_on_exception_reports_and_suppresses() -> None:
    """stop_on_exception() catches the error, reports it and lets the code after the
    ``with`` run; the error leaves the block (TF testJoinRaiseReportExceptionUsingHandler)."""
    after = False
    requested: list[Exception] = []

    async def block() -> None:
        nonlocal after
        async with Coordinator() as coord:
            with coord.stop_on_exception():
                raise IndexError("reported")
            after = True
            try:
                coord.raise_requested_exception()
            except IndexError as exc:
                requested.append(exc)
            await anyio.lowlevel.checkpoint()

    exc = await raised(block)
    assert type(exc) is IndexError
    assert after
    assert requested == [exc]


@pytest.mark.anyio
async def test_body_exception_leaves_as_itself_and_producers_are_stopped() -> None:
    """An exception raised by the body leaves unwrapped; producers are torn down."""
    q = int_queue(2)
    error = LookupError("from the body")

    async def block() -> None:
        async with Coordinator(stop_grace_period=LONG_GRACE) as coord:
            coord.start(QueueRunner(q, [range(10**9)]))
            await q.dequeue()
            raise error

    assert await raised(block) is error
    assert q.closed


@pytest.mark.anyio
async def test_start_soon_supervises_tasks() -> None:
    """A supervised task's error leaves the block; a clean-stop one requests a stop;
    the coordinator waits for supervised tasks at exit."""

    async def worker(n: int) -> None:
        await anyio.lowlevel.checkpoint()
        raise ArithmeticError(n)

    async def block() -> None:
        async with Coordinator() as coord:
            coord.start_soon(worker, 3, name="worker-3")
            await anyio.sleep_forever()

    exc = await raised(block)
    assert type(exc) is ArithmeticError
    assert exc.args == (3,)
    assert any("worker-3" in note for note in getattr(exc, "__notes__", ()))

    async def exhausted() -> None:
        raise OutOfRangeError("no more data")

    async with Coordinator() as coord:
        coord.start_soon(exhausted)
        assert await coord.wait_for_stop(GUARD)

    finished = []

    async def cooperative(c: Coordinator) -> None:
        while not c.should_stop():  # noqa: ASYNC110 - the polling loop a TF user writes
            await anyio.sleep(0.001)
        finished.append(True)

    async with Coordinator(stop_grace_period=LONG_GRACE) as coord:
        coord.start_soon(cooperative, coord)
    assert finished == [True]


@pytest.mark.anyio
async def test_wait_for_stop() -> None:
    """wait_for_stop(t) returns False on timeout and True once stopped, also when the
    stop comes from another thread (TF testStopAPI, testStopAsync)."""
    async with Coordinator() as coord:
        assert not await coord.wait_for_stop(0.01)
        thread = threading.Thread(target=coord.request_stop)
        thread.start()
        assert await coord.wait_for_stop(GUARD)
        thread.join()
        assert coord.should_stop()
        assert await coord.wait_for_stop()


@pytest.mark.anyio
async def test_error_reported_from_another_thread_leaves_the_block() -> None:
    """request_stop(exc) from a foreign thread cancels the body and the error leaves."""
    error = OSError("from a thread")

    async def block() -> None:
        async with Coordinator() as coord:
            threading.Thread(target=coord.request_stop, args=(error,)).start()
            await anyio.sleep_forever()

    assert await raised(block) is error


@pytest.mark.anyio
async def test_usage_errors() -> None:
    """Misuse raises clear errors: start outside the block, entering twice, reporting
    after the block is left (TF testRequestStopRaisesIfJoined), bad arguments."""
    coord = Coordinator()
    q = int_queue()
    with pytest.raises(RuntimeError, match="async with Coordinator"):
        coord.start(QueueRunner(q, [range(3)]))
    with pytest.raises(RuntimeError, match="running coordinator"):
        await coord.wait_for_stop()
    async with coord:
        with pytest.raises(TypeError, match="QueueRunner"):
            coord.start(q)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="only once"):
        async with coord:
            pass  # pragma: no cover
    late = ValueError("late")
    with pytest.raises(ValueError, match="late"):
        coord.request_stop(late)
    coord.request_stop()  # a plain stop after the block is harmless
    with pytest.raises(ValueError, match="stop_grace_period"):
        Coordinator(stop_grace_period=-1)
    with pytest.raises(ValueError, match="watchdog"):
        Coordinator(watchdog=-1.0)
    with pytest.raises(TypeError, match="clean_stop_exception_types"):
        Coordinator(clean_stop_exception_types=[OutOfRangeError])  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_ignore_live_threads_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    """With ignore_live_threads=True a hung producer thread is abandoned with a warning."""
    release, entered = threading.Event(), threading.Event()

    def stuck() -> bool:
        entered.set()
        return release.wait(GUARD)

    q = int_queue()
    try:
        with caplog.at_level(logging.WARNING, logger="aqueue"):
            async with Coordinator(stop_grace_period=0.05, ignore_live_threads=True) as coord:
                coord.start(QueueRunner(q, [stuck]))
                await poll(entered.is_set)
        assert "still running" in caplog.text
    finally:
        release.set()


def test_a_stuck_producer_thread_does_not_block_process_exit(tmp_path: Any) -> None:
    """Producer threads are daemons: a process whose producer is stuck forever exits."""
    script = tmp_path / "stuck.py"
    script.write_text(
        "import threading, anyio, numpy as np\n"
        "from aqueue import Coordinator, FIFOQueue, QueueRunner\n"
        "async def main():\n"
        "    q = FIFOQueue(2, np.int64, ())\n"
        "    async with Coordinator(stop_grace_period=0.05, ignore_live_threads=True) as c:\n"
        "        c.start(QueueRunner(q, [threading.Event().wait]))\n"
        "anyio.run(main)\n"
        "print('exited')\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=GUARD * 2
    )
    assert done.returncode == 0, done.stderr
    assert "exited" in done.stdout


# -- watchdog and report --------------------------------------------------------------


@pytest.mark.anyio
async def test_watchdog_warns_about_a_stalled_dequeue(caplog: pytest.LogCaptureFixture) -> None:
    """A watched queue with a blocked consumer and no progress is reported, naming the
    queue, the blocked side and the runners' state."""
    q = int_queue(name="frames")
    with caplog.at_level(logging.WARNING, logger="aqueue"):
        async with Coordinator(watchdog=0.05) as coord:
            coord.watch(q)
            with anyio.move_on_after(GUARD):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(q.dequeue)
                    await poll(lambda: "made no progress" in caplog.text)
                    tg.cancel_scope.cancel()
    assert "queue 'frames'" in caplog.text
    assert "blocked side: dequeue" in caplog.text
    assert "no QueueRunner" in caplog.text


@pytest.mark.anyio
async def test_watchdog_names_producers_blocked_in_enqueue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Producers blocked on a full queue nobody drains: the warning names them."""
    q = int_queue(1, name="full")

    async def produce() -> int:
        return 1

    with caplog.at_level(logging.WARNING, logger="aqueue"):
        async with Coordinator(watchdog=0.05) as coord:
            coord.start(QueueRunner(q, [produce, range(5)], name="loader"))
            await poll(lambda: "made no progress" in caplog.text)
    assert "blocked side: enqueue" in caplog.text
    assert "QueueRunner 'loader': 2 of 2 producers alive" in caplog.text
    assert "blocked in enqueue: producer 0" in caplog.text


@pytest.mark.anyio
async def test_report_lists_queues_and_the_input_bound_fraction() -> None:
    """report() shows each queue's size/capacity, totals and waiting times, plus the
    fraction of the body's time spent waiting for input."""
    a = int_queue(4, "files")
    b = int_queue(8, "batches")

    async def slow() -> int:
        await anyio.sleep(0.002)
        return 1

    async with Coordinator() as coord:
        coord.start(QueueRunner(a, [slow]))
        coord.start(QueueRunner(b, [a]))
        for _ in range(5):
            await b.dequeue_many(4)
        text = coord.report()
    lines = text.splitlines()
    assert lines[0].split() == [
        "queue",
        "size/capacity",
        "enqueued",
        "dequeued",
        "time_full_s",
        "time_empty_s",
        "runners",
    ]
    assert any(line.startswith("'files'") for line in lines)
    assert any(line.startswith("'batches'") and "/8" in line for line in lines)
    # 'files' feeds another runner, so the body's input is 'batches'
    m = re.fullmatch(
        r"input-bound: (\d+)% \(the body waited ([0-9.]+) s of ([0-9.]+) s on 'batches'\)",
        lines[-1],
    )
    assert m is not None, lines[-1]
    percent, waited, body = int(m[1]), float(m[2]), float(m[3])
    assert waited == pytest.approx(b.statistics().time_empty_s, abs=2e-3)
    assert waited >= 0.002  # it waited at least for the first slow item
    # the seconds are printed to the millisecond, the percentage from the exact values
    rounding = 100 * 0.0005 * (1 / body + waited / body**2)
    assert abs(percent - 100 * waited / body) <= 0.5 + rounding + 1e-9


@pytest.mark.anyio
async def test_report_without_input_queues() -> None:
    """report() of a coordinator that saw no queue says so."""
    async with Coordinator() as coord:
        pass
    assert coord.report().splitlines()[-1] == "input-bound: n/a (no input queue seen)"


def test_names_are_exported() -> None:
    """The runner and coordinator API is importable from the package."""
    for name in ("Coordinator", "QueueRunner", "add_queue_runner"):
        assert name in aqueue.__all__
        assert getattr(aqueue, name).__module__ == "aqueue"


@pytest.mark.anyio
async def test_report_counts_no_stopped_producer_as_alive() -> None:
    """After one producer thread failed and the coordinator stopped the rest, report()
    shows none of them alive, although the stopped threads were busy in their producer
    call when the stop came (they used to write their state back after it)."""
    q = int_queue(4, "q")

    def bad() -> int:
        time.sleep(0.05)
        raise RuntimeError("boom")

    def slow() -> int:
        time.sleep(0.2)
        return 1

    coord = Coordinator(stop_grace_period=2.0)

    async def run() -> None:
        async with coord:
            coord.start(QueueRunner(q, [bad, slow, slow, slow], name="r"))
            await anyio.sleep(5)

    with pytest.raises(RuntimeError, match="boom"):
        await run()
    assert "'r' 0/4 alive" in coord.report()
