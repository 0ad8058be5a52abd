"""Cancellation safety (docs/semantics.md, the queues' rules, point 7): anyio cancel
scopes on asyncio and trio, and
native asyncio cancellation (task.cancel(), asyncio.timeout, asyncio.wait_for).

A cancelled dequeue consumes nothing (claims are restored, in order); a cancelled enqueue
admitted nothing; a cancelled enqueue_many leaves exactly a prefix admitted; a
woken-then-cancelled waiter passes the wake-up on. Nothing is lost or duplicated.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import anyio
import numpy as np
import pytest
from support import KINDS, Kind, blocked_task, drain_nowait, ints, settle, spawn, task_outcome

import aqueue

pytestmark = pytest.mark.timeout(30)

needs_asyncio_timeout = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="asyncio.timeout and Task.cancelling are new in 3.11"
)


# ======================================================================================
# anyio cancel scopes, both backends
# ======================================================================================


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.label)
@pytest.mark.parametrize("op_name", ["dequeue", "dequeue_many", "dequeue_up_to"])
async def test_scope_cancelled_dequeue_consumes_nothing(kind: Kind, op_name: str) -> None:
    """A blocked dequeue cancelled by its scope takes nothing; the next waiter gets the
    element instead."""
    q = kind.make(4)
    args = () if op_name == "dequeue" else (2,)
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, getattr(q, op_name), *args)
        await settle()
        other = spawn(tg, q.dequeue)
        await settle()
        if op_name != "dequeue":
            q.enqueue_nowait(kind.elem(1))  # not enough for the victim's 2
            await settle()
        assert victim.pending
        victim.scope.cancel()
        await settle()
        assert victim.cancelled
        if op_name == "dequeue":
            q.enqueue_nowait(kind.elem(1))
        q.enqueue_nowait(kind.elem(2))
        await settle()
        got = [kind.value(other.result())]
    got += drain_nowait(q, kind)
    kind.check(got, [1, 2])
    assert q.statistics().tasks_waiting_dequeue == 0


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.label)
async def test_scope_cancelled_enqueue_admits_nothing(kind: Kind) -> None:
    """A blocked enqueue cancelled by its scope admits nothing; the enqueuer behind it
    takes the freed slot."""
    q = kind.make(1)
    q.enqueue_nowait(kind.elem(0))
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, q.enqueue, kind.elem(1))
        await settle()
        other = spawn(tg, q.enqueue, kind.elem(2))
        await settle()
        victim.scope.cancel()
        await settle()
        assert victim.cancelled
        assert kind.value(q.dequeue_nowait()) == 0
        await settle()
        assert other.returned
    assert drain_nowait(q, kind) == [2]
    assert q.statistics().enqueued_total == 2


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.label)
async def test_scope_cancelled_enqueue_many_leaves_a_prefix(kind: Kind) -> None:
    """A cancelled enqueue_many leaves exactly the prefix it had admitted."""
    q = kind.make(2)
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, q.enqueue_many, kind.batch(range(6)))
        await settle()
        first = kind.value(q.dequeue_nowait())
        await settle()  # one more element admitted into the freed slot
        victim.scope.cancel()
        await settle()
    assert victim.cancelled
    assert q.statistics().enqueued_total == 3
    kind.check([first, *drain_nowait(q, kind)], [0, 1, 2])
    q.enqueue_nowait(kind.elem(9))
    assert drain_nowait(q, kind) == [9]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.label)
async def test_scope_cancelled_dequeue_many_restores_claims_in_order(kind: Kind) -> None:
    """A cancelled dequeue_many that had claimed elements puts them all back, in order."""
    q = kind.make(3)
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, q.dequeue_many, 6)
        await settle()
        q.enqueue_many_nowait(kind.batch([0, 1, 2]))
        await settle()
        q.enqueue_nowait(kind.elem(3))
        await settle()
        assert q.size() == 0  # all four are claimed
        victim.scope.cancel()
        await settle()
    assert victim.cancelled
    assert q.size() == 4
    assert q.statistics().dequeued_total == 0
    q.close()
    kind.check(kind.values(await q.dequeue_up_to(10), 4), [0, 1, 2, 3])


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.label)
async def test_restored_claims_can_exceed_capacity(kind: Kind) -> None:
    """Claims restored after the slots were refilled push size above capacity; enqueuers
    stay blocked until it falls below, and restored elements come first."""
    q = kind.make(2)
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, q.dequeue_many, 5)
        await settle()
        q.enqueue_many_nowait(kind.batch([0, 1]))
        await settle()
        assert q.size() == 0
        victim.scope.cancel()  # cancel first, then refill before it runs
        q.enqueue_many_nowait(kind.batch([2, 3]))
        await settle()
        assert victim.cancelled
        assert q.size() == 4
        assert q.statistics().peak_size >= 4
        with pytest.raises(aqueue.QueueFull):
            q.enqueue_nowait(kind.elem(4))
        producer = spawn(tg, q.enqueue, kind.elem(4))
        await settle()
        got = [kind.value(q.dequeue_nowait()) for _ in range(2)]
        await settle()
        assert producer.pending  # size 2 == capacity: still full
        got.append(kind.value(q.dequeue_nowait()))
        await settle()
        assert producer.returned
    got += drain_nowait(q, kind)
    if kind.ordered:
        assert got == [0, 1, 2, 3, 4]
    else:
        assert sorted(got) == [0, 1, 2, 3, 4]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.label)
async def test_scope_cancelled_dequeue_up_to_restores_claims(kind: Kind) -> None:
    """dequeue_up_to cancelled while holding claims restores them too."""
    q = kind.make(2)
    async with anyio.create_task_group() as tg:
        victim = spawn(tg, q.dequeue_up_to, 3)
        await settle()
        q.enqueue_many_nowait(kind.batch([0, 1]))
        await settle()
        victim.scope.cancel()
        await settle()
    assert victim.cancelled
    kind.check(drain_nowait(q, kind), [0, 1])


@pytest.mark.anyio
async def test_timed_out_dequeues_consume_nothing_and_queue_stays_usable() -> None:
    """TF testReusableAfterTimeout: two timed-out dequeues consume nothing; a later
    enqueue/dequeue pair returns the value."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    for _ in range(2):
        with anyio.move_on_after(0.01) as scope:
            await q.dequeue()
        assert scope.cancelled_caught
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.01):
            await q.dequeue_many(2)
    assert q.statistics().tasks_waiting_dequeue == 0
    await q.enqueue(37)
    assert int(await q.dequeue()) == 37


_OPS_IN_A_CANCELLED_SCOPE = [
    "dequeue",
    "dequeue_many",
    "dequeue_up_to",
    "dequeue_burst",
    "enqueue",
    "enqueue_many",
]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.label)
@pytest.mark.parametrize("op_name", _OPS_IN_A_CANCELLED_SCOPE)
async def test_op_in_an_already_cancelled_scope_raises_and_changes_nothing(
    kind: Kind, op_name: str
) -> None:
    """An operation called inside a scope that is already cancelled raises at its
    checkpoint and changes nothing, even when another task makes it ready in the same
    event-loop iteration (a dequeue woken by an enqueue, an enqueue by a dequeue)."""
    q = kind.make(2)
    if op_name.startswith("enqueue"):
        q.enqueue_many_nowait(kind.batch([0, 1]))  # full: the enqueue must wait
    outcome: list[str] = []

    async def victim() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            if op_name == "dequeue":
                await q.dequeue()
            elif op_name == "dequeue_many":
                await q.dequeue_many(1)
            elif op_name == "dequeue_up_to":
                await q.dequeue_up_to(1)
            elif op_name == "dequeue_burst":
                await q.dequeue_burst(1)
            elif op_name == "enqueue":
                await q.enqueue(kind.elem(7))
            else:
                await q.enqueue_many(kind.batch([7]))
            outcome.append("returned")
        if scope.cancelled_caught:
            outcome.append("cancelled")

    async def helper() -> None:
        if op_name.startswith("enqueue"):
            q.dequeue_nowait()  # frees a slot
        else:
            q.enqueue_nowait(kind.elem(7))

    async with anyio.create_task_group() as tg:
        tg.start_soon(victim)
        tg.start_soon(helper)  # its first step runs right after the victim's
    assert outcome == ["cancelled"]
    if op_name.startswith("enqueue"):
        assert q.size() == 1  # the helper took one; the cancelled enqueue added nothing
    else:
        assert kind.values(q.dequeue_many_nowait(1), 1) == [7]  # still there


async def _call(q: Any, kind: Kind, op_name: str, count: int) -> Any:
    """``op_name`` on ``q`` with ``count`` elements (1 for the single-element ops)."""
    if op_name == "dequeue":
        return await q.dequeue()
    if op_name == "enqueue":
        return await q.enqueue(kind.elem(7))
    if op_name == "enqueue_many":
        return await q.enqueue_many(kind.batch(range(100, 100 + count)))
    return await getattr(q, op_name)(count)


def _counts(op_name: str, capacity: int) -> list[int]:
    """The edge counts an operation takes: 0, 1 and the capacity (1 for single ones)."""
    return [1] if op_name in ("dequeue", "enqueue") else [0, 1, capacity]


def _state(q: Any) -> tuple[Any, ...]:
    s = q.statistics()
    return (
        s.size,
        s.enqueued_total,
        s.dequeued_total,
        s.tasks_waiting_enqueue,
        s.tasks_waiting_dequeue,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.label)
@pytest.mark.parametrize("op_name", _OPS_IN_A_CANCELLED_SCOPE)
async def test_every_count_checkpoints_in_a_cancelled_scope(kind: Kind, op_name: str) -> None:
    """Counts 0, 1 and the capacity, with and without another call of the same
    direction parked: in a scope already cancelled the operation raises at its
    checkpoint and changes nothing, like every async operation (a batch dequeue of 0
    behind a parked dequeue once returned an empty batch without checkpointing). The
    queue could serve the call at once when nothing is parked: the checkpoint comes
    before the step."""
    capacity = 3
    dequeues = op_name.startswith("dequeue")
    for count in _counts(op_name, capacity):
        for parked in (False, True):
            q = kind.make(capacity)
            if dequeues != parked:  # a dequeue finds data, an enqueue finds room
                q.enqueue_many_nowait(kind.batch(range(capacity)))
            async with anyio.create_task_group() as tg:
                if parked:
                    if dequeues:
                        spawn(tg, q.dequeue_many, capacity)
                    else:
                        spawn(tg, q.enqueue, kind.elem(99))
                    await settle()
                before = _state(q)
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    await _call(q, kind, op_name, count)
                assert scope.cancelled_caught, f"{op_name}({count}), parked: {parked}"
                assert _state(q) == before
                tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_scope_cancelled_waiter_before_wakeup_is_skipped() -> None:
    """Cancel one of two waiting dequeuers, then enqueue: the live one gets the element."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    async with anyio.create_task_group() as tg:
        first = spawn(tg, q.dequeue)
        await settle()
        second = spawn(tg, q.dequeue)
        await settle()
        first.scope.cancel()
        q.enqueue_nowait(5)
        await settle()
    assert first.cancelled
    assert int(second.result()) == 5
    assert q.size() == 0


# ======================================================================================
# native asyncio cancellation (pytest-asyncio)
# ======================================================================================


# pytest-asyncio: native task.cancel() is the subject.
@pytest.mark.asyncio
@pytest.mark.parametrize("op_name", ["dequeue", "dequeue_many", "dequeue_up_to", "dequeue_burst"])
async def test_task_cancel_blocked_dequeue_consumes_nothing(op_name: str) -> None:
    """task.cancel() on a blocked dequeue (holding claims, for batches) loses nothing."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    args = () if op_name == "dequeue" else (3,)
    task = await blocked_task(getattr(q, op_name)(*args))
    if op_name not in ("dequeue", "dequeue_burst"):
        q.enqueue_many_nowait(np.array([0, 1]))
        await anyio.wait_all_tasks_blocked()
        assert not task.done()
    task.cancel()
    assert await task_outcome(task) == "cancelled"
    if op_name in ("dequeue", "dequeue_burst"):
        assert q.size() == 0
    else:
        assert ints(q.dequeue_up_to_nowait(5)) == [0, 1]
    assert q.statistics().tasks_waiting_dequeue == 0


# pytest-asyncio: native task.cancel() between wake-up and run is the subject.
@pytest.mark.asyncio
async def test_woken_then_cancelled_dequeuer_passes_the_wakeup_on() -> None:
    """Enqueue wakes the first waiter, which is then cancelled before it runs: the second
    waiter gets the element (gh-108042)."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    first = await blocked_task(q.dequeue())
    second = await blocked_task(q.dequeue())
    q.enqueue_nowait(7)
    first.cancel()
    assert await task_outcome(first) == "cancelled"
    assert int(await asyncio.wait_for(second, 5)) == 7
    assert q.size() == 0


# pytest-asyncio: native task.cancel() between wake-up and run is the subject.
@pytest.mark.asyncio
async def test_woken_then_cancelled_enqueuer_passes_the_wakeup_on() -> None:
    """A dequeue wakes the first blocked enqueuer, which is then cancelled: it admitted
    nothing and the second enqueuer takes the slot."""
    q = aqueue.FIFOQueue(1, np.int64, ())
    q.enqueue_nowait(0)
    first = await blocked_task(q.enqueue(1))
    second = await blocked_task(q.enqueue(2))
    assert int(q.dequeue_nowait()) == 0
    first.cancel()
    assert await task_outcome(first) == "cancelled"
    await asyncio.wait_for(second, 5)
    assert ints(q.dequeue_up_to_nowait(5)) == [2]


# pytest-asyncio: native task.cancel() between wake-up and run is the subject.
@pytest.mark.asyncio
async def test_woken_then_cancelled_dequeue_many_restores_in_order() -> None:
    """A dequeue_many holding claims, woken by new elements and cancelled before it runs,
    restores everything in order (size may exceed capacity)."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    task = await blocked_task(q.dequeue_many(5))
    q.enqueue_many_nowait(np.array([0, 1]))
    await anyio.wait_all_tasks_blocked()
    q.enqueue_many_nowait(np.array([2, 3]))
    task.cancel()
    assert await task_outcome(task) == "cancelled"
    assert q.size() == 4
    assert ints(q.dequeue_up_to_nowait(10)) == [0, 1, 2, 3]
    assert q.statistics().dequeued_total == 4


# pytest-asyncio: native task.cancel() between wake-up and run is the subject.
@pytest.mark.asyncio
async def test_woken_then_cancelled_dequeue_many_passes_the_wakeup_on() -> None:
    """The next dequeuer is served once a woken batch dequeuer is cancelled."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    first = await blocked_task(q.dequeue_many(2))
    second = await blocked_task(q.dequeue())
    q.enqueue_many_nowait(np.array([0, 1]))
    first.cancel()
    assert await task_outcome(first) == "cancelled"
    assert int(await asyncio.wait_for(second, 5)) == 0
    assert ints(q.dequeue_up_to_nowait(5)) == [1]


# pytest-asyncio: native task.cancel() is the subject.
@pytest.mark.asyncio
async def test_task_cancel_enqueue_many_leaves_a_prefix() -> None:
    """task.cancel() on a pending enqueue_many leaves exactly the admitted prefix."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    task = await blocked_task(q.enqueue_many(np.arange(10, 16)))
    assert int(q.dequeue_nowait()) == 10
    task.cancel()  # woken by the freed slot, cancelled before it runs
    assert await task_outcome(task) == "cancelled"
    rest = ints(q.dequeue_up_to_nowait(5))
    assert [10, *rest] == list(range(10, 10 + 1 + len(rest)))
    assert q.statistics().enqueued_total == 1 + len(rest)


# pytest-asyncio: native task.cancel() at the checkpoint is the subject.
@pytest.mark.asyncio
async def test_task_cancel_at_the_checkpoint_changes_nothing() -> None:
    """A task cancelled before its first step (at the checkpoint) changes nothing,
    even when the op would not have to wait."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    q.enqueue_many_nowait(np.array([0, 1]))
    for coro in (q.enqueue(5), q.enqueue_many(np.array([5, 6])), q.dequeue(), q.dequeue_many(2)):
        task = asyncio.ensure_future(coro)
        await asyncio.sleep(0)  # the task starts and parks at its checkpoint
        task.cancel()
        assert await task_outcome(task) == "cancelled"
        assert q.size() == 2
    assert ints(q.dequeue_many_nowait(2)) == [0, 1]


# pytest-asyncio: a native cancellation pending when the call starts is the subject.
@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.label)
@pytest.mark.parametrize("op_name", _OPS_IN_A_CANCELLED_SCOPE)
async def test_every_count_checkpoints_with_a_pending_task_cancel(kind: Kind, op_name: str) -> None:
    """``task.cancel()`` pending when an operation starts (the task cancelled itself, as
    a cancellation that arrives while it runs): counts 0, 1 and the capacity, with and
    without another call of the same direction parked, each raise CancelledError at the
    checkpoint and change nothing."""
    capacity = 3
    dequeues = op_name.startswith("dequeue")
    for count in _counts(op_name, capacity):
        for parked in (False, True):
            q = kind.make(capacity)
            if dequeues != parked:
                q.enqueue_many_nowait(kind.batch(range(capacity)))
            other = None
            if parked:
                other = await blocked_task(
                    q.dequeue_many(capacity) if dequeues else q.enqueue(kind.elem(99))
                )
            before = _state(q)
            returned: list[int] = []

            async def victim(
                q: Any = q, count: int = count, returned: list[int] = returned
            ) -> None:
                task = asyncio.current_task()
                assert task is not None
                task.cancel()
                await _call(q, kind, op_name, count)
                returned.append(count)  # (a task that returns is still marked cancelled)

            outcome = await task_outcome(asyncio.ensure_future(victim()))
            assert (outcome, returned) == ("cancelled", []), f"{op_name}({count}), {parked}"
            assert _state(q) == before
            if other is not None:
                other.cancel()
                assert await task_outcome(other) == "cancelled"


# pytest-asyncio: asyncio.timeout is the subject.
@needs_asyncio_timeout
@pytest.mark.asyncio
async def test_asyncio_timeout_on_blocked_ops() -> None:
    """asyncio.timeout on blocked dequeue/dequeue_many/enqueue: TimeoutError, nothing
    lost, the queue stays usable."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await q.dequeue()
    q.enqueue_nowait(0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await q.dequeue_many(3)  # claims 0, then times out
    q.enqueue_nowait(1)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await q.enqueue(2)
    assert ints(q.dequeue_many_nowait(2)) == [0, 1]
    await q.enqueue(3)
    assert int(await q.dequeue()) == 3


# pytest-asyncio: asyncio.timeout is the subject.
@needs_asyncio_timeout
@pytest.mark.asyncio
@pytest.mark.parametrize("offset", [-1e-4, 0.0, 1e-4])
@pytest.mark.parametrize("op_name", ["dequeue", "dequeue_many", "dequeue_burst"])
async def test_asyncio_timeout_racing_an_arrival(offset: float, op_name: str) -> None:
    """An element arriving at (about) the deadline is either returned or left queued,
    never lost (anchors 3.1: anyio streams lose it here)."""
    loop = asyncio.get_running_loop()
    for _ in range(20):
        q = aqueue.FIFOQueue(4, np.int64, ())
        when = loop.time() + 0.002
        got: list[int] = []

        async def consume(q: Any = q, when: float = when, got: list[int] = got) -> None:
            async with asyncio.timeout_at(when):
                if op_name == "dequeue":
                    got.append(int(await q.dequeue()))
                elif op_name == "dequeue_burst":
                    got.extend(ints(await q.dequeue_burst(2)))
                else:
                    got.extend(ints(await q.dequeue_many(2)))

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0)
        if op_name == "dequeue_many":
            q.enqueue_nowait(0)
        loop.call_at(when + offset, q.enqueue_nowait, 1)
        outcome = await task_outcome(task)
        await asyncio.sleep(0.001)
        remaining = ints(q.dequeue_up_to_nowait(5)) if q.size() else []
        want = [1] if op_name in ("dequeue", "dequeue_burst") else [0, 1]
        assert sorted(got + remaining) == want, outcome
        assert (outcome == "returned") == (got == want)


# pytest-asyncio: asyncio.wait_for is the subject.
@pytest.mark.asyncio
async def test_wait_for_timeouts_consume_nothing() -> None:
    """asyncio.wait_for around dequeue ops: a timeout consumes nothing and restores claims."""
    q = aqueue.FIFOQueue(2, np.int64, ())
    # asyncio.TimeoutError is the builtin TimeoutError from 3.11 on; wait_for raises it.
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(q.dequeue(), 0.01)
    q.enqueue_many_nowait(np.array([0, 1]))
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(q.dequeue_many(3), 0.01)
    assert q.size() == 2
    assert ints(await asyncio.wait_for(q.dequeue_many(2), 5)) == [0, 1]


# pytest-asyncio: asyncio.wait_for is the subject.
@pytest.mark.asyncio
async def test_wait_for_zero_timeout_conserves() -> None:
    """wait_for(..., 0) either completes the op or leaves the queue as it was."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    q.enqueue_many_nowait(np.arange(3))
    got: list[int] = []
    for _ in range(3):
        try:
            got.append(int(await asyncio.wait_for(q.dequeue(), 0)))
        except asyncio.TimeoutError:
            pass
    assert got + ints(q.dequeue_up_to_nowait(5)) == [0, 1, 2]


# pytest-asyncio: asyncio's cancel count (Task.cancelling) is the subject.
@needs_asyncio_timeout
@pytest.mark.asyncio
async def test_cancel_does_not_swallow_cancellation() -> None:
    """A cancelled op re-raises CancelledError and leaves the task's cancel count intact,
    so asyncio.timeout still converts it to TimeoutError."""
    q = aqueue.FIFOQueue(1, np.int64, ())

    async def waiter() -> int:
        task = asyncio.current_task()
        assert task is not None
        try:
            await q.dequeue()
        except asyncio.CancelledError:
            return task.cancelling()
        raise AssertionError("dequeue returned")

    task = await blocked_task(waiter())
    task.cancel()
    assert await task == 1


def test_checkpoint_follows_the_backend_across_runs() -> None:
    """The fast paths try the backend seen last first; switching between asyncio and
    trio runs in one thread (both directions, twice) keeps every op a real checkpoint:
    a cancel scope cancelled beforehand stops the op there, and nothing changes."""
    trio = pytest.importorskip("trio")
    q = aqueue.FIFOQueue(8, np.int64, ())

    async def round_trip(tag: int) -> None:
        await q.enqueue(tag)
        await q.enqueue_many(np.array([tag + 1, tag + 2]))
        with anyio.CancelScope() as scope:
            scope.cancel()
            await q.enqueue(-1)  # cancelled at its checkpoint: admits nothing
        assert scope.cancelled_caught
        with anyio.CancelScope() as scope:
            scope.cancel()
            await q.dequeue()  # cancelled at its checkpoint: consumes nothing
        assert scope.cancelled_caught
        assert int(await q.dequeue()) == tag
        assert ints(await q.dequeue_many(2)) == [tag + 1, tag + 2]

    for tag in (0, 10, 20, 30):
        if tag % 20:
            trio.run(round_trip, tag)
        else:
            asyncio.run(round_trip(tag))
    assert q.size() == 0
