"""Cancellation and time-outs at every await point: a cancelled or timed-out insert
inserted nothing, a cancelled sample sampled nothing; no counter of the limiter moved,
no times_sampled changed, no item evicted, the random state untouched; the next waiter
is served. anyio cancel scopes and timeouts on asyncio and trio; native asyncio
task.cancel(), asyncio.timeout and asyncio.wait_for.

The await points of a waiting operation: its checkpoint (a scope already cancelled
when it starts, even if another task makes it ready in the same loop iteration),
its wait (cancelled while blocked), and the moment after its wake-up (woken, then
cancelled before it ran: it either completes whole or passes the wake-up on).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import numpy as np
import pytest
from replay_support import SHAPE, contents, item, items
from support import blocked_task, settle, spawn, task_outcome

import aqueue

pytestmark = pytest.mark.timeout(30)

needs_asyncio_timeout = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="asyncio.timeout is new in 3.11"
)


def blocked_insert_table() -> aqueue.ReplayTable[Any]:
    """A table whose next insert waits: the limiter admits 2 items until one is sampled."""
    t = aqueue.ReplayTable(
        8, np.float32, SHAPE, rate_limiter=aqueue.RateLimiter(1.0, 1, -8.0, 2.0), seed=5
    )
    return t


async def blocked_insert_setup() -> aqueue.ReplayTable[Any]:
    t = blocked_insert_table()
    await t.insert_many(items([0, 1]), priorities=[1.0, 2.0])
    return t


async def blocked_sample_setup() -> aqueue.ReplayTable[Any]:
    """A table whose sample(2) waits: min_size_to_sample 3, 2 items held (a third was
    sampled out: each item is sampled once)."""
    t = aqueue.ReplayTable(
        8,
        np.float32,
        SHAPE,
        sampler=aqueue.Prioritized(0.5),
        max_times_sampled=1,
        rate_limiter=aqueue.MinSize(3),
        seed=6,
    )
    await t.insert_many(items([0, 1, 2]), priorities=[1.0, 2.0, 3.0])
    await t.sample(1)
    return t


# (what to call, how to set the table up so it waits, how to make it ready)
def _cases() -> dict[str, tuple[Callable[..., Awaitable[Any]], Any, Any]]:
    async def ready_insert(t: Any) -> None:
        await t.sample(1)

    async def ready_sample(t: Any) -> None:
        await t.insert(item(9))

    return {
        "insert": (lambda t: t.insert(item(7)), blocked_insert_setup, ready_insert),
        "insert_many": (lambda t: t.insert_many(items([7])), blocked_insert_setup, ready_insert),
        "sample": (lambda t: t.sample(2), blocked_sample_setup, ready_sample),
    }


CASES = _cases()


@pytest.mark.anyio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_cancelled_while_waiting_changes_nothing(op: str) -> None:
    """A waiting operation cancelled by its scope changes nothing at all; the table
    then serves the next one as if it never came."""
    call, setup, ready = CASES[op]
    t = await setup()
    before = contents(t)
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, call, t)
        await settle()
        assert victim.pending
        victim.scope.cancel()
        await settle()
    assert victim.cancelled
    assert contents(t) == before
    st = await t.statistics()
    assert (st.inserts_waiting, st.samples_waiting) == (0, 0)
    await ready(t)
    await call(t)  # the table works on


@pytest.mark.anyio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_timed_out_changes_nothing(op: str) -> None:
    """move_on_after and fail_after around a waiting operation: nothing changed."""
    call, setup, _ = CASES[op]
    t = await setup()
    before = contents(t)
    with anyio.move_on_after(0.01) as scope:
        await call(t)
    assert scope.cancelled_caught
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.01):
            await call(t)
    assert contents(t) == before


# Every operation, with the edge counts it takes: 0 (batches may be empty), 1, and the
# largest the table (max_size 8) and its limiter (RateLimiter(1.0, 1, -8.0, 2.0): a
# sample of at most 10, an insert_many of at most 10) accept.
ALL_OPS: dict[str, Callable[[Any], Awaitable[Any]]] = {
    "insert": lambda t: t.insert(item(7)),
    "insert_many-0": lambda t: t.insert_many(items([])),
    "insert_many-1": lambda t: t.insert_many(items([7])),
    "insert_many-2": lambda t: t.insert_many(items([7, 8])),
    "insert_many-8": lambda t: t.insert_many(items(range(8))),
    "enqueue_many-0": lambda t: t.enqueue_many(items([])),
    "enqueue_many-8": lambda t: t.enqueue_many(items(range(8))),
    "sample-1": lambda t: t.sample(1),
    "sample-8": lambda t: t.sample(8),
    "update_priorities-0": lambda t: t.update_priorities([], []),
    "update_priorities-2": lambda t: t.update_priorities([0, 1], [5.0, 5.0]),
    "delete-0": lambda t: t.delete([]),
    "delete-1": lambda t: t.delete([0]),
}


@pytest.mark.anyio
@pytest.mark.parametrize("op", sorted(ALL_OPS))
async def test_cancelled_at_the_checkpoint_changes_nothing(op: str) -> None:
    """Any operation called in a scope already cancelled raises at its checkpoint and
    changes nothing, even when it could complete (a sample) or another task makes it
    ready in the same loop iteration (an insert, by a sample)."""
    t = blocked_insert_table()
    await t.insert_many(items([0, 1]))
    before = await t.statistics()
    reference = contents(t)
    outcome: list[str] = []

    async def victim() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await ALL_OPS[op](t)
            outcome.append("returned")
        if scope.cancelled_caught:
            outcome.append("cancelled")

    inserts = op.startswith(("insert", "enqueue"))

    async def helper() -> None:
        if inserts:
            await t.sample(1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(victim)
        tg.start_soon(helper)
    assert outcome == ["cancelled"]
    after = await t.statistics()
    if inserts:
        assert (after.inserts, after.samples) == (before.inserts, before.samples + 1)
    else:
        assert contents(t) == reference


# pytest-asyncio: a native cancellation pending when the call starts is the subject.
@pytest.mark.asyncio
@pytest.mark.parametrize("op", sorted(ALL_OPS))
async def test_pending_task_cancel_at_the_checkpoint_changes_nothing(op: str) -> None:
    """Any operation, at every edge count, started by a task whose ``task.cancel()`` is
    pending (it cancelled itself) raises CancelledError at its checkpoint and changes
    nothing, even with another insert waiting."""
    t = blocked_insert_table()
    await t.insert_many(items([0, 1]))
    parked = await blocked_task(t.insert(item(5)))
    reference = contents(t)
    ran: list[str] = []

    async def victim() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await ALL_OPS[op](t)
        ran.append(op)  # (a task that returns is still marked cancelled)

    assert await task_outcome(asyncio.ensure_future(victim())) == "cancelled"
    assert ran == []
    assert contents(t) == reference
    parked.cancel()
    assert await task_outcome(parked) == "cancelled"


@pytest.mark.anyio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_woken_then_cancelled_completes_whole_or_passes_the_wakeup_on(op: str) -> None:
    """The first of two waiters is woken, then its scope is cancelled before it runs:
    either it completed whole, or it changed nothing and the second was served; never
    half, never both lost."""
    call, setup, ready = CASES[op]
    t = await setup()
    async with anyio.create_task_group() as tg:
        first = spawn(tg, call, t)
        await settle()
        second = spawn(tg, call, t)
        await settle()
        before = await t.statistics()
        await ready(t)  # wakes the first (its step runs when it is scheduled)
        first.scope.cancel()
        await settle()
        served = [o for o in (first, second) if o.returned]
        assert len(served) == 1, (first, second)
        if first.returned:
            assert second.pending
            second.scope.cancel()
            await settle()
    after = await t.statistics()
    # ready() inserted (sampled) one item; exactly one of the two waiters was served
    if op == "sample":
        assert (after.inserts, after.samples) == (before.inserts + 1, before.samples + 2)
    else:
        assert (after.inserts, after.samples) == (before.inserts + 1, before.samples + 1)
    assert (after.inserts_waiting, after.samples_waiting) == (0, 0)


# The randomized run's table: SampleToInsertRatio(2.0, 5, 6.0) keeps inserts * 2 -
# samples in [4, 16] once 5 items are in; the difference starts at 0, so an
# insert_many takes at most 8 items at once (16 / 2), and a sample at most 12: with 0
# and 1 these are the counts drawn most.
INSERT_COUNTS = [0, 1, 8, 2, 3]
SAMPLE_COUNTS = [1, 12, 2, 4]
# How each call is cancelled: a timeout (0: at the checkpoint), a scope cancelled before
# the call, and on asyncio a task.cancel() pending before the call or sent after k loop
# turns.
CANCELS = ["timeout", "timeout", "before"]
CANCELS_ASYNCIO = [*CANCELS, "task-before", "task"]


async def _cancellable(call: Callable[[], Awaitable[Any]], how: str, r: Any) -> Any:
    """Run ``call()`` cancelled as ``how`` says: its result, or None if it was cancelled
    (a call whose cancellation was pending when it started must not have run)."""
    if how == "timeout":
        with anyio.move_on_after(float(r.choice([0.0, 0.001, 0.05]))):
            return await call()
        return None
    if how == "before":
        with anyio.CancelScope() as scope:
            scope.cancel()
            await call()
            raise AssertionError("a call in a cancelled scope ran")
        assert scope.cancelled_caught
        return None
    ran: list[Any] = []

    async def victim() -> None:
        task = asyncio.current_task()
        assert task is not None
        if how == "task-before":
            task.cancel()
        ran.append(await call())

    task = asyncio.ensure_future(victim())
    if how == "task":
        for _ in range(int(r.integers(0, 4))):
            await asyncio.sleep(0)
        task.cancel()
    if await task_outcome(task) == "cancelled":
        assert how == "task" or not ran, "a call with a cancellation pending ran"
        return ran[0] if ran else None  # (cancelled right after it returned)
    return ran[0]


@pytest.mark.anyio
async def test_many_cancellations_and_timeouts_conserve_everything(anyio_backend: str) -> None:
    """Actors and learners with random cancellations (timeouts, scopes cancelled before
    the call, and on asyncio native task.cancel() before or during it) and edge counts,
    tasks and threads: the counters equal exactly what the calls that returned did."""
    t = aqueue.ReplayTable(
        40,
        np.float32,
        SHAPE,
        rate_limiter=aqueue.SampleToInsertRatio(2.0, 5, 6.0),
        max_times_sampled=4,
        seed=8,
    )
    inserted = sampled = 0
    rng = np.random.default_rng(9)
    cancels = CANCELS_ASYNCIO if anyio_backend == "asyncio" else CANCELS

    async def actor(seed: int) -> None:
        nonlocal inserted
        r = np.random.default_rng(seed)
        for j in range(60):
            k = int(r.choice(INSERT_COUNTS))
            how = str(r.choice(cancels))
            batch = items(range(j, j + k))
            keys = await _cancellable(partial(t.insert_many, batch), how, r)
            if keys is not None:
                assert len(keys) == k
                inserted += k

    async def learner(seed: int) -> None:
        nonlocal sampled
        r = np.random.default_rng(seed)
        for _ in range(60):
            n = int(r.choice(SAMPLE_COUNTS))
            s = await _cancellable(partial(t.sample, n), str(r.choice(cancels)), r)
            if s is not None:
                assert len(s) == n
                sampled += n

    def thread_actor() -> int:
        view = t.blocking()
        done = 0
        r = np.random.default_rng(11)
        for j in range(40):
            k = int(r.choice(INSERT_COUNTS))
            try:
                if k == 1:
                    view.insert(item(j), timeout=0.002)
                else:
                    view.insert_many(items(range(j, j + k)), timeout=0.002)
                done += k
            except TimeoutError:
                pass
        return done

    async with anyio.create_task_group() as tg:
        for s in rng.integers(0, 1000, 3):
            tg.start_soon(actor, int(s))
        for s in rng.integers(0, 1000, 2):
            tg.start_soon(learner, int(s))
        by_thread = await anyio.to_thread.run_sync(thread_actor)
    st = await t.statistics()
    assert st.inserts == inserted + by_thread
    assert st.samples == sampled
    assert st.inserts - st.deletes == st.size
    assert (st.inserts_waiting, st.samples_waiting) == (0, 0)
    snap = t.snapshot()
    assert int(snap.times_sampled.sum()) <= st.samples


# -- native asyncio cancellation -----------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_task_cancel_while_waiting_changes_nothing(op: str) -> None:
    """task.cancel() on a waiting operation: cancelled, and nothing changed."""
    call, setup, _ = CASES[op]
    t = await setup()
    before = contents(t)
    task = await blocked_task(call(t))
    task.cancel()
    assert await task_outcome(task) == "cancelled"
    assert contents(t) == before


@pytest.mark.asyncio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_task_cancel_at_the_checkpoint_changes_nothing(op: str) -> None:
    """A task cancelled before its first step (at the checkpoint) changes nothing, even
    if the table could serve it."""
    call, setup, ready = CASES[op]
    t = await setup()
    await ready(t)
    before = contents(t)
    task = asyncio.ensure_future(call(t))
    await asyncio.sleep(0)  # it runs up to its checkpoint
    task.cancel()
    assert await task_outcome(task) == "cancelled"
    assert contents(t) == before


@pytest.mark.asyncio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_woken_then_task_cancelled_passes_the_wakeup_on(op: str) -> None:
    """The first waiter is woken, then task.cancel()-ed before it runs: it changes
    nothing and the second waiter is served instead."""
    call, setup, ready = CASES[op]
    t = await setup()
    first = await blocked_task(call(t))
    second = await blocked_task(call(t))
    await ready(t)
    first.cancel()
    assert await task_outcome(first) == "cancelled"
    assert await task_outcome(asyncio.ensure_future(asyncio.wait_for(second, 5))) == "returned"
    st = await t.statistics()
    assert (st.inserts_waiting, st.samples_waiting) == (0, 0)


@pytest.mark.asyncio
@needs_asyncio_timeout
@pytest.mark.parametrize("op", sorted(CASES))
async def test_asyncio_timeout_and_wait_for_change_nothing(op: str) -> None:
    """asyncio.timeout and asyncio.wait_for around a waiting operation: TimeoutError,
    and nothing changed."""
    call, setup, _ = CASES[op]
    t = await setup()
    before = contents(t)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):  # type: ignore[attr-defined,unused-ignore]
            await call(t)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(call(t), 0.01)
    assert contents(t) == before
