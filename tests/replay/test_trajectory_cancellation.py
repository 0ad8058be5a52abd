"""Trajectory tables: cancellation and time-outs at every await point. A cancelled or
timed-out append wrote nothing (no step stored or evicted, no window inserted, no
counter moved, the writer's episode where it was); a cancelled sample sampled nothing
(no counter, no ``times_sampled``, the random state untouched); the next waiter is
served. anyio cancel scopes and timeouts on asyncio and trio; native asyncio
``task.cancel()`` and ``asyncio.timeout``; the thread view's ``timeout=``.

The await points of an append or a sample: its checkpoint (a scope already cancelled
when it starts), its wait (cancelled while blocked), and the moment after its wake-up
(woken, then cancelled before it ran: it completes whole or passes the wake-up on).
Counts: 0 and 1 steps, and the most the table takes at once (``MAX_STEPS`` steps, up to
as many windows as the rate limiter admits at once); samples of 1 and of the most the
limiter allows at once.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import numpy as np
import pytest
from support import blocked_task, poll, settle, spawn, task_outcome

import aqueue

pytestmark = pytest.mark.timeout(30)

MAX_STEPS = 8
# admits windows while inserts - samples <= 2 (so 2 at first); allows samples while
# inserts - samples >= -8, at most 10 at once
LIMITER = aqueue.RateLimiter(1.0, 1, -8.0, 2.0)


def steps(first: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    tags = np.arange(first, first + k, dtype=np.int64)
    return tags, np.stack([tags, -tags], axis=1).astype(np.float32)


def step(tag: int) -> tuple[np.int64, np.ndarray]:
    return np.int64(tag), np.array([tag, -tag], dtype=np.float32)


def contents(t: aqueue.TrajectoryTable[Any]) -> tuple[Any, ...]:
    """Everything a table holds (its snapshot) but the seconds waited."""
    snap = t.snapshot()
    it = snap.items
    st = it.statistics
    return (
        it.keys.tolist(),
        it.priorities.tolist(),
        it.times_sampled.tolist(),
        it.items[0].tolist(),
        it.next_key,
        (st.inserts, st.samples, st.deletes, st.evictions, st.size),
        repr(it.rng_state),
        snap.ids.tolist(),
        [f.tolist() for f in snap.fields],
        snap.slots.tolist(),
        snap.free.tolist(),
        snap.next_id,
        sorted(snap.counters.items()),
        [(w[0], w[1], w[2], w[3].tolist()) for w in snap.writers],
    )


async def blocked_append_setup() -> tuple[Any, Any]:
    """A table and a writer whose next step waits: two windows of 2 are in, and the
    limiter admits no third until a sample."""
    t = aqueue.TrajectoryTable(
        MAX_STEPS, (np.int64, np.float32), ((), (2,)), length=2, rate_limiter=LIMITER, seed=5
    )
    w = t.writer()
    await w.append_many(steps(0, 3))
    return t, w


async def blocked_sample_setup() -> tuple[Any, Any]:
    """A table whose sample waits: it needs 3 windows, 2 are held (each is sampled once
    at most: of two sample(2) after a third comes, one only can be served)."""
    t = aqueue.TrajectoryTable(
        MAX_STEPS,
        (np.int64, np.float32),
        ((), (2,)),
        length=2,
        sampler=aqueue.Prioritized(0.5),
        max_times_sampled=1,
        rate_limiter=aqueue.MinSize(3),
        seed=6,
    )
    w = t.writer()
    await w.append_many(steps(0, 3), priorities=[0.0, 1.0, 2.0])
    return t, w


def _cases() -> dict[str, tuple[Callable[..., Awaitable[Any]], Any, Any]]:
    async def ready_append(t: Any, w: Any) -> None:
        await t.sample(1)

    async def ready_sample(t: Any, w: Any) -> None:
        await w.append(step(50))

    return {
        "append": (lambda t, w: w.append(step(7)), blocked_append_setup, ready_append),
        "append_many": (
            lambda t, w: w.append_many(steps(7, 1)),
            blocked_append_setup,
            ready_append,
        ),
        "sample": (lambda t, w: t.sample(2), blocked_sample_setup, ready_sample),
    }


CASES = _cases()


@pytest.mark.anyio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_cancelled_while_waiting_changes_nothing(op: str) -> None:
    """A waiting append or sample cancelled by its scope changes nothing at all; the
    table then serves the next call as if it never came."""
    call, setup, ready = CASES[op]
    t, w = await setup()
    before = contents(t)
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, call, t, w)
        await settle()
        assert victim.pending
        victim.scope.cancel()
        await settle()
    assert victim.cancelled
    assert contents(t) == before
    st = t.statistics()
    assert (st.inserts_waiting, st.samples_waiting) == (0, 0)
    await ready(t, w)
    got = await call(t, w)  # the table works on
    assert len(got) in (1, 2)


@pytest.mark.anyio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_timed_out_changes_nothing(op: str) -> None:
    """move_on_after and fail_after around a waiting append or sample: nothing changed."""
    call, setup, _ = CASES[op]
    t, w = await setup()
    before = contents(t)
    with anyio.move_on_after(0.01) as scope:
        await call(t, w)
    assert scope.cancelled_caught
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.01):
            await call(t, w)
    assert contents(t) == before


# Every operation, with its edge counts: 0 steps, 1, and MAX_STEPS steps (7 windows of
# 2, within the limiter's 10 at once); samples of 1 and 10 (the most at once).
ALL_OPS: dict[str, Callable[[Any, Any, Any], Awaitable[Any]]] = {
    "append": lambda t, w, f: w.append(step(7)),
    "append-no-window": lambda t, w, f: f.append(step(7)),  # (a fresh writer: could go at once)
    "append_many-0": lambda t, w, f: w.append_many(steps(7, 0)),
    "append_many-1": lambda t, w, f: w.append_many(steps(7, 1)),
    "append_many-max": lambda t, w, f: w.append_many(steps(7, MAX_STEPS)),
    "end_episode": lambda t, w, f: w.end_episode(),
    "sample-1": lambda t, w, f: t.sample(1),
    "sample-10": lambda t, w, f: t.sample(10),
    "update_priorities-0": lambda t, w, f: t.update_priorities([], []),
    "update_priorities-2": lambda t, w, f: t.update_priorities([0, 1], [5.0, 5.0]),
    "delete-0": lambda t, w, f: t.delete([]),
    "delete-1": lambda t, w, f: t.delete([0]),
}


@pytest.mark.anyio
@pytest.mark.parametrize("op", sorted(ALL_OPS))
async def test_cancelled_at_the_checkpoint_changes_nothing(op: str) -> None:
    """Any operation called in a scope already cancelled raises at its checkpoint and
    changes nothing, even when it could complete, or another task makes it ready in
    the same loop iteration (an append, by a sample)."""
    t, w = await blocked_append_setup()
    fresh = t.writer()
    outcome: list[str] = []

    async def victim() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await ALL_OPS[op](t, w, fresh)
            outcome.append("returned")
        if scope.cancelled_caught:
            outcome.append("cancelled")

    async def helper() -> None:
        await t.sample(1)

    async with anyio.create_task_group() as tg:
        reference = contents(t)
        tg.start_soon(victim)
        tg.start_soon(helper)
    assert outcome == ["cancelled"]
    after = contents(t)
    # the helper's sample is the only change: one sample counted, times_sampled moved
    assert after[5][0] == reference[5][0]  # inserts
    assert after[5][1] == reference[5][1] + 1  # samples
    assert after[7:] == reference[7:]  # the steps, the writers, their counters
    st = t.statistics()
    assert (st.inserts_waiting, st.samples_waiting) == (0, 0)


@pytest.mark.asyncio
@pytest.mark.parametrize("op", sorted(ALL_OPS))
async def test_pending_task_cancel_at_the_checkpoint_changes_nothing(op: str) -> None:
    """Any operation started by a task whose ``task.cancel()`` is pending raises
    CancelledError at its checkpoint and changes nothing, even with another append
    waiting (from another writer)."""
    t, w = await blocked_append_setup()
    other = t.writer()
    await other.append(step(100))  # (completes no window: never waits)
    parked = await blocked_task(other.append(step(101)))
    fresh = t.writer()
    reference = contents(t)
    ran: list[str] = []

    async def victim() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await ALL_OPS[op](t, w, fresh)
        ran.append(op)

    assert await task_outcome(asyncio.ensure_future(victim())) == "cancelled"
    assert ran == []
    assert contents(t) == reference
    assert t.statistics().inserts_waiting == 1  # (the parked one)
    parked.cancel()
    assert await task_outcome(parked) == "cancelled"
    assert t.statistics().inserts_waiting == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_native_cancel_while_waiting_changes_nothing(op: str) -> None:
    """``task.cancel()`` of a waiting append or sample, and ``asyncio.timeout`` around
    one: nothing changed, and the call works afterwards."""
    call, setup, ready = CASES[op]
    t, w = await setup()
    before = contents(t)
    task = await blocked_task(call(t, w))
    task.cancel()
    assert await task_outcome(task) == "cancelled"
    assert contents(t) == before
    if sys.version_info >= (3, 11):
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await call(t, w)
        assert contents(t) == before
    await ready(t, w)
    await call(t, w)


@pytest.mark.anyio
@pytest.mark.parametrize("op", sorted(CASES))
async def test_woken_then_cancelled_completes_whole_or_passes_the_wakeup_on(op: str) -> None:
    """The first of two waiters (two writers, or two samplers) is woken, then its scope
    is cancelled before it runs: either it completed whole, or it changed nothing and
    the second was served; never half, never both lost."""
    call, setup, ready = CASES[op]
    t, w = await setup()
    w2 = t.writer()
    if op != "sample":
        await w2.append(step(200))  # (its next step completes a window)
    async with anyio.create_task_group() as tg:
        first = spawn(tg, call, t, w)
        await settle()
        second = spawn(tg, call, t, w2)
        await settle()
        before = t.statistics()
        await ready(t, w)  # wakes the first
        first.scope.cancel()
        await settle()
        served = [o for o in (first, second) if o.returned]
        assert len(served) == 1, (first, second)
        if first.returned:
            assert second.pending
            second.scope.cancel()
            await settle()
    after = t.statistics()
    if op == "sample":  # ready() appended one window; one waiter sampled 2
        assert (after.inserts, after.samples) == (before.inserts + 1, before.samples + 2)
    else:  # ready() sampled one; one waiter's window went in
        assert (after.inserts, after.samples) == (before.inserts + 1, before.samples + 1)
    assert (after.inserts_waiting, after.samples_waiting) == (0, 0)


@pytest.mark.anyio
async def test_closing_fails_a_waiting_append_that_wrote_nothing() -> None:
    """close() while an append waits: QueueClosedError, nothing written; later appends
    are refused, end_episode and writer.close() still work, samples still served."""
    t, w = await blocked_append_setup()
    before = contents(t)
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, w.append, step(7))
        await settle()
        t.close()
        await settle()
    assert isinstance(victim.error, aqueue.QueueClosedError)
    assert "nothing was written" in str(victim.error)
    assert contents(t)[:7] == before[:7]
    assert contents(t)[7:] == before[7:]
    with pytest.raises(aqueue.QueueClosedError, match="is closed"):
        await w.append(step(8))
    with pytest.raises(aqueue.QueueClosedError, match="writer"):
        t.writer()
    assert len(await t.sample(1)) == 1
    await w.end_episode()
    w.close()
    with pytest.raises(aqueue.QueueClosedError, match="writer 0 of trajectory table"):
        await w.append(step(9))


def test_a_thread_append_that_times_out_wrote_nothing() -> None:
    """The thread view's append with ``timeout=``: TimeoutError, nothing written; with
    a sample from another thread meanwhile, it goes in."""

    async def setup() -> tuple[Any, Any]:
        return await blocked_append_setup()

    t, w = anyio.run(setup)
    view = w.blocking()
    before = contents(t)
    with pytest.raises(TimeoutError):
        view.append(step(7), timeout=0.02)
    assert contents(t) == before
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(view.append(step(7), timeout=20)))
    thread.start()

    async def sample() -> None:
        await poll(lambda: t.statistics().inserts_waiting > 0)
        await t.sample(1)

    anyio.run(sample)
    thread.join(20)
    assert [k.tolist() for k in got] == [[2]]
