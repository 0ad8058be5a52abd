"""stall_guard: a hang becomes StallError naming the stuck queue, its waiting side and
the runners feeding it (or never started); steady progress never fires it; outside
cancellation is never swallowed. Async form on asyncio and trio (anyio) and under
pytest-asyncio with native cancellation; sync form for blocked threads.

Stall thresholds are short (0.3 s) so the suite stays fast; generous limits
(``fail_after``) only protect against hangs.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest
from support import int_queue

import aqueue
from aqueue.testing import StallError, StallGuard, stall_guard

pytestmark = pytest.mark.timeout(60)


async def stall_message(body: Any, seconds: float = 0.3) -> str:
    """Run ``body()`` under ``stall_guard(seconds)``; return the StallError's message."""
    with anyio.fail_after(30):  # hang protection only
        with pytest.raises(StallError) as info:
            async with stall_guard(seconds):
                await body()
    return str(info.value)


@pytest.mark.anyio
async def test_names_a_consumer_blocked_on_an_empty_queue() -> None:
    """The stuck queue is named with its size/capacity and the waiting side; the body was
    cancelled (nothing chained)."""
    q = int_queue(4, "frames")
    with anyio.fail_after(30), pytest.raises(StallError) as info:
        async with stall_guard(0.3) as guard:
            await q.dequeue()
    message = str(info.value)
    assert message.startswith("stall_guard(0.3): no aqueue queue made progress for")
    assert (
        "- queue 'frames' (FIFOQueue, size 0/4, open): 1 consumer blocked in dequeue on an "
        "empty queue; no running QueueRunner fills it" in message
    )
    assert info.value.__cause__ is None
    assert guard.report == message
    assert not q.closed  # the async form cancels; it does not release the queue first


@pytest.mark.anyio
async def test_names_producers_blocked_in_enqueue_from_tasks() -> None:
    """Producer tasks blocked on a full queue: the count, the runner and its blocked
    producers."""
    q = int_queue(2, "replay")

    async def one() -> int:
        return 1

    async def body() -> None:
        async with aqueue.Coordinator() as coord:
            coord.start(aqueue.QueueRunner(q, [one, one], name="actors"))
            await anyio.sleep_forever()

    message = await stall_message(body)
    assert (
        "- queue 'replay' (FIFOQueue, size 2/2, open): 2 producers blocked in enqueue on a "
        "full queue; QueueRunner 'actors': 2 of 2 producers alive, blocked in enqueue: "
        "producer 0 (test_names_producers_blocked_in_enqueue_from_tasks.<locals>.one), "
        "producer 1 (test_names_producers_blocked_in_enqueue_from_tasks.<locals>.one)" in message
    ), message


@pytest.mark.anyio
async def test_names_producers_blocked_in_enqueue_from_a_thread() -> None:
    """A real producer thread blocked in the thread view's enqueue counts as a waiting
    producer; the coordinator then ends cleanly (the thread is released)."""
    q = int_queue(3, "screens")

    def grab_screen() -> int:
        return 7

    async def body() -> None:
        async with aqueue.Coordinator() as coord:
            coord.start(aqueue.QueueRunner(q, [grab_screen], name="game"))
            await anyio.sleep_forever()

    message = await stall_message(body)
    assert (
        "- queue 'screens' (FIFOQueue, size 3/3, open): 1 producer blocked in enqueue on a "
        "full queue; QueueRunner 'game': 1 of 1 producers alive, blocked in enqueue: "
        "producer 0 (test_names_producers_blocked_in_enqueue_from_a_thread.<locals>."
        "grab_screen)" in message
    ), message


@pytest.mark.anyio
async def test_names_a_registered_runner_that_was_never_started() -> None:
    """TF's classic hang: the runner was added with add_queue_runner and never started."""
    q = int_queue(4, "filenames")
    runner = aqueue.QueueRunner(q, [iter(range(3))], name="reader")
    aqueue.add_queue_runner(runner)
    try:
        message = await stall_message(q.dequeue)
    finally:  # start it after all: the registry is context-local, leave it empty
        async with aqueue.Coordinator() as coord:
            coord.start_queue_runners()
    assert (
        "- queue 'filenames' (FIFOQueue, size 0/4, open): 1 consumer blocked in dequeue on "
        "an empty queue; QueueRunner 'reader' that fills it was registered with "
        "add_queue_runner() and never started" in message
    ), message
    assert (
        "registered with add_queue_runner() and never started: QueueRunner 'reader' "
        "(queue 'filenames')" in message
    )


@pytest.mark.anyio
async def test_says_when_no_queue_has_waiters() -> None:
    """A body stuck elsewhere still fires, and the report says so."""
    message = await stall_message(anyio.sleep_forever)
    assert "no in-process queue has a task or thread waiting on it" in message


@pytest.mark.anyio
async def test_steady_progress_never_fires() -> None:
    """A slow but steady producer (one element every 20 ms, 0.6 s in all) under a 0.3 s
    guard: no progress for 0.3 s is a stall, 0.6 s in total is not."""
    q = int_queue(4, "slow")

    async def slowly() -> int:
        await anyio.sleep(0.02)
        return 1

    with anyio.fail_after(30):
        async with stall_guard(0.3) as guard, aqueue.Coordinator() as coord:
            coord.start(aqueue.QueueRunner(q, [slowly]))
            for _ in range(30):
                await q.dequeue()
            coord.request_stop()
    assert guard.report is None


@pytest.mark.anyio
async def test_an_outside_cancellation_is_not_swallowed() -> None:
    """An enclosing scope cancelled while the guard's body waits: the cancellation
    propagates (to that scope), before and while the guard fires."""
    q = int_queue(4, "q")
    with anyio.fail_after(30):
        with anyio.CancelScope() as outer:
            async with stall_guard(5):
                outer.cancel()
                await q.dequeue()
        assert outer.cancelled_caught
        with anyio.CancelScope() as outer:
            async with stall_guard(0.2):
                try:
                    await q.dequeue()
                finally:
                    outer.cancel()  # requested while the guard's cancellation is delivered
        assert outer.cancelled_caught


# pytest-asyncio: native task.cancel() is the subject.
@pytest.mark.asyncio
async def test_native_asyncio_cancellation_is_not_swallowed() -> None:
    """task.cancel() from outside, the guard not having fired, ends the task with
    CancelledError (pytest-asyncio strict mode)."""
    q = int_queue(4, "q")

    async def guarded() -> None:
        async with stall_guard(5):
            await q.dequeue()

    with anyio.fail_after(30):
        task = asyncio.create_task(guarded())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# pytest-asyncio: native task.cancel() racing the guard's own cancellation is the subject.
@pytest.mark.parametrize("then", ["await", "return"])
@pytest.mark.asyncio
async def test_native_cancellation_requested_as_the_guard_fires_wins(then: str) -> None:
    """The guard has fired (its cancellation not yet delivered: the body holds the loop)
    when the task is cancelled natively; the body then awaits (and gets that
    CancelledError) or returns (the cancellation still pending). Either way the task
    ends cancelled, not with StallError."""

    async def guarded() -> None:
        async with stall_guard(0.2) as guard:
            deadline = time.monotonic() + 10
            while guard.report is None and time.monotonic() < deadline:
                time.sleep(0.005)  # noqa: ASYNC251 - hold the loop: the guard's cancel waits
            assert guard.report is not None
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            if then == "await":
                await asyncio.sleep(0)

    with anyio.fail_after(30):
        task = asyncio.create_task(guarded())
        with pytest.raises(asyncio.CancelledError):
            await task


# pytest-asyncio: the guard under pytest-asyncio's own loop is the subject.
@pytest.mark.asyncio
async def test_async_form_under_pytest_asyncio() -> None:
    """The async form fires under pytest-asyncio's loop too."""
    q = int_queue(4, "pa")
    message = await stall_message(q.dequeue)
    assert "queue 'pa' (FIFOQueue, size 0/4, open): 1 consumer blocked in dequeue" in message


def test_sync_form_releases_a_thread_blocked_on_an_empty_queue() -> None:
    """The sync form ends a blocking dequeue by closing its queue; StallError is chained
    to the OutOfRangeError the dequeue got."""
    q = int_queue(4, "sync")
    with pytest.raises(StallError) as info, stall_guard(0.3):
        q.blocking().dequeue()
    assert (
        "- queue 'sync' (FIFOQueue, size 0/4, open): 1 consumer blocked in dequeue on an "
        "empty queue" in str(info.value)
    )
    assert isinstance(info.value.__cause__, aqueue.OutOfRangeError)
    assert q.closed


def test_sync_form_names_producer_threads_blocked_on_a_full_queue() -> None:
    """Two threads blocked in enqueue on a full queue are counted and released (their
    enqueues fail with QueueClosedError); the guarded thread waits for them."""
    q = int_queue(1, "full")
    q.enqueue_nowait(0)
    errors: list[BaseException] = []

    def put() -> None:
        try:
            q.blocking().enqueue(1)
        except BaseException as exc:
            errors.append(exc)

    def start_and_join() -> None:
        threads = [threading.Thread(target=put) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)

    with pytest.raises(StallError) as info, stall_guard(0.3):
        start_and_join()
    assert (
        "- queue 'full' (FIFOQueue, size 1/1, open): 2 producers blocked in enqueue on a "
        "full queue; no running QueueRunner fills it" in str(info.value)
    )
    assert [type(e) for e in errors] == [aqueue.QueueClosedError] * 2


def test_a_guard_leaves_alone_a_queue_an_earlier_test_left_stuck() -> None:
    """A thread an earlier test left blocked in enqueue on a full queue: a later guard
    reports and releases only the queues of its own block, so that thread is neither
    named nor woken with QueueClosedError (which would blame the later test)."""
    left = int_queue(1, "left-behind")
    left.enqueue_nowait(0)
    errors: list[BaseException] = []

    def put() -> None:
        try:
            left.blocking().enqueue(1)
        except BaseException as exc:
            errors.append(exc)

    leaked = threading.Thread(target=put, daemon=True)
    leaked.start()
    deadline = time.monotonic() + 30  # hang protection only
    while left.statistics().tasks_waiting_enqueue == 0 and time.monotonic() < deadline:
        time.sleep(0.005)

    mine = int_queue(4, "mine")  # the later test's own queue, on which its thread waits
    with pytest.raises(StallError) as info, stall_guard(0.3):
        mine.blocking().dequeue()
    text = str(info.value)
    assert "- queue 'mine' (FIFOQueue, size 0/4, open): 1 consumer blocked" in text
    assert "left-behind" not in text
    assert mine.closed
    assert not left.closed
    assert left.statistics().tasks_waiting_enqueue == 1
    assert errors == []
    left.close(cancel_pending_enqueues=True)  # (this test's own clean-up)
    leaked.join(30)
    assert [type(e) for e in errors] == [aqueue.QueueClosedError]


def test_sync_form_without_release_reports_when_the_block_ends() -> None:
    """release=False: the guard cannot end the block; it reports when the block ends (here
    the blocking call's own timeout), chained to what ended it."""
    q = int_queue(4, "timed")
    with pytest.raises(StallError) as info, stall_guard(0.2, release=False):
        q.blocking().dequeue(timeout=0.6)
    assert "queue 'timed' (FIFOQueue, size 0/4, open): 1 consumer blocked" in str(info.value)
    assert isinstance(info.value.__cause__, TimeoutError)
    assert not q.closed


def test_a_body_that_ends_in_time_is_left_alone() -> None:
    """No stall: no exception, no report; the body's own exception passes through."""
    with stall_guard(5) as guard:
        time.sleep(0.01)
    assert guard.report is None
    with pytest.raises(KeyError), stall_guard(5):
        raise KeyError("mine")


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf"), True, "1", None])
def test_bad_seconds_are_refused(seconds: Any) -> None:
    """seconds must be a finite number > 0."""
    with pytest.raises(ValueError, match="stall_guard: seconds must be a number of seconds > 0"):
        stall_guard(seconds)


def test_single_use_and_release_type() -> None:
    """A guard is entered once; release must be a bool."""
    guard = stall_guard(5)
    with guard:
        pass
    with pytest.raises(RuntimeError, match="entered only once"), guard:
        pass
    with pytest.raises(TypeError, match="release must be a bool"):
        StallGuard(5, release=1)  # type: ignore[arg-type]
    assert repr(stall_guard(2)) == "<StallGuard seconds=2 armed>"


def test_the_guard_leaves_the_runner_registry_of_its_context_alone() -> None:
    """Entering a guard does not create its context's add_queue_runner collection (a
    collection created there would be shared by every context copied from it later)."""
    runner = aqueue.QueueRunner(int_queue(4, "elsewhere"), [iter(range(1))])

    async def start_registered() -> list[aqueue.QueueRunner]:
        async with aqueue.Coordinator() as coord:
            return coord.start_queue_runners()

    def in_a_fresh_context() -> list[aqueue.QueueRunner]:
        with stall_guard(5):
            pass
        contextvars.copy_context().run(aqueue.add_queue_runner, runner)  # another context
        return anyio.run(start_registered)

    assert contextvars.Context().run(in_a_fresh_context) == []


class _AwaitedStatistics(aqueue.FIFOQueue[Any]):
    """An in-process queue standing for a shared one: statistics() is a coroutine."""

    async def statistics(self) -> aqueue.QueueStatistics:  # type: ignore[override]
        await anyio.lowlevel.checkpoint()
        return aqueue.FIFOQueue.statistics(self)


@pytest.mark.anyio
async def test_a_queue_whose_statistics_are_awaited_does_not_break_a_guard() -> None:
    """Another in-process queue alive meanwhile (here a subclass whose statistics() must
    be awaited, as a test double of a shared queue left over from an earlier test) is
    read as its engine records it: the guard still names the stuck queue."""
    other = _AwaitedStatistics(4, np.int64, (), name="other")
    await other.enqueue(np.int64(1))
    q = int_queue(2, "stuck")
    message = await stall_message(q.dequeue, 0.2)
    assert "- queue 'stuck' (FIFOQueue, size 0/2, open): 1 consumer blocked in dequeue" in message
    assert "'other'" not in message
    del other
