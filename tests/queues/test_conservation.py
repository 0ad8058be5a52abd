"""Conservation under concurrency and random cancellation.

Hypothesis draws a queue kind and capacity, several producers (random batch sizes, some
larger than the capacity) and consumers (random dequeue / dequeue_many / dequeue_up_to /
dequeue_burst); counts are often 0, 1 or the capacity, the edges. For each operation it
draws a cancellation: none, a cancel scope cancelled after k checkpoints or before the
call, and on asyncio also native ``task.cancel()`` after k checkpoints or before the
call (pending when it starts), or ``asyncio.timeout(0)``. Some runs close with
``cancel_pending_enqueues=True`` half way. Then:

- an operation whose cancellation was pending when it started raised it at its
  checkpoint, whatever its count, and changed nothing (no element taken or admitted);

- produced == consumed + remaining, with ``produced`` the admitted elements;
- nothing is duplicated; a cancelled or closed-out enqueue_many admitted exactly a prefix
  of its batch, a completed one all of it, a cancelled single enqueue nothing;
- the statistics totals agree; for FIFO with one consumer, each producer's order holds;
- the engine's invariants (``Engine.check_invariants()``) hold after every operation of
  each producer and consumer returns or is cancelled, and at the end.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import aqueue

pytestmark = pytest.mark.timeout(60)

CANCELS_BOTH = ["none", "none", "scope", "scope-before"]
CANCELS_ASYNCIO = [*CANCELS_BOTH, "task", "task-before"] + (
    ["timeout0"] if sys.version_info >= (3, 11) else []
)
BEFORE = ("scope-before", "task-before")  # cancelled before the call: it must not run


def counts(capacity: int) -> st.SearchStrategy[int]:
    """A batch count: often an edge (0, 1, the capacity), else any up to 2 * capacity + 1."""
    return st.one_of(st.sampled_from([0, 1, capacity]), st.integers(0, 2 * capacity + 1))


@dataclass
class Scenario:
    """One drawn run."""

    kind: str
    capacity: int
    min_after_dequeue: int
    producers: list[list[tuple[int, str, int]]]
    """Per producer: (batch size, cancel mode, checkpoints before cancelling)."""
    consumers: list[list[tuple[str, int, str, int]]]
    """Per consumer: (op, n, cancel mode, checkpoints before cancelling)."""
    early_cancel_close: bool


def scenarios(cancels: list[str]) -> st.SearchStrategy[Scenario]:
    """Small scenarios: up to 3 producers and 3 consumers, a handful of ops each."""

    @st.composite
    def build(draw: st.DrawFn) -> Scenario:
        kind = draw(st.sampled_from(["fifo", "shuffle", "padding", "priority"]))
        capacity = draw(st.integers(1, 6))
        mad = draw(st.integers(0, capacity - 1)) if kind == "shuffle" else 0
        mode = st.sampled_from(cancels)
        pmode = st.sampled_from([*cancels, "nowait"])  # producers also try the _nowait twins
        delay = st.integers(0, 4)
        producers = draw(
            st.lists(
                st.lists(st.tuples(counts(capacity), pmode, delay), max_size=6),
                min_size=1,
                max_size=3,
            )
        )
        op = st.sampled_from(["dequeue", "dequeue_many", "dequeue_up_to", "dequeue_burst"])
        consumers = draw(
            st.lists(
                st.lists(st.tuples(op, counts(capacity), mode, delay), max_size=8),
                min_size=1,
                max_size=3,
            )
        )
        return Scenario(kind, capacity, mad, producers, consumers, draw(st.booleans()))

    return build()


def _make(s: Scenario) -> Any:
    if s.kind == "fifo":
        return aqueue.FIFOQueue(s.capacity, np.int64, ())
    if s.kind == "shuffle":
        return aqueue.RandomShuffleQueue(s.capacity, s.min_after_dequeue, np.int64, (), seed=0)
    if s.kind == "padding":
        return aqueue.PaddingFIFOQueue(s.capacity, np.int64, [()])
    return aqueue.PriorityQueue(s.capacity, np.int64, ())


@dataclass
class Ledger:
    """What the tasks observed."""

    batches: list[tuple[int, list[int], str]] = field(default_factory=list)
    """Each enqueue attempt: its producer, its values and 'done', 'cancelled', 'closed' or
    'full' (an enqueue_many_nowait refused as a whole)."""
    consumed: list[int] = field(default_factory=list)
    per_consumer: list[list[int]] = field(default_factory=list)
    cancelled_dequeues: int = 0


async def _run_cancellable(
    fn: Callable[[], Awaitable[Any]], mode: str, delay: int
) -> tuple[str, Any]:
    """Run ``fn()`` under cancellation ``mode``; return ('done', value), ('cancelled',
    None) or ('error', exception)."""
    if mode == "none":
        try:
            return "done", await fn()
        except aqueue.QueueError as exc:
            return "error", exc
    if mode in BEFORE:
        return await _run_cancelled_before(fn, mode)
    if mode == "scope":
        outcome: list[tuple[str, Any]] = []

        async def victim(scope: anyio.CancelScope) -> None:
            with scope:
                try:
                    outcome.append(("done", await fn()))
                except aqueue.QueueError as exc:
                    outcome.append(("error", exc))

        async def killer(scope: anyio.CancelScope) -> None:
            for _ in range(delay):
                await anyio.lowlevel.checkpoint()
            scope.cancel()

        scope = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            tg.start_soon(victim, scope)
            tg.start_soon(killer, scope)
        return outcome[0] if outcome else ("cancelled", None)
    # Native asyncio cancellation: a plain task, cancelled by task.cancel() or a timeout.
    if mode == "timeout0":

        async def timed() -> Any:
            async with asyncio.timeout(0):
                return await fn()

        task = asyncio.ensure_future(timed())
    else:
        task = asyncio.ensure_future(fn())
        for _ in range(delay):
            await asyncio.sleep(0)
        task.cancel()
    try:
        return "done", await task
    except (asyncio.CancelledError, TimeoutError):
        if task.cancelled() or isinstance(task.exception(), TimeoutError):
            return "cancelled", None
        raise
    except aqueue.QueueError as exc:
        return "error", exc


async def _run_cancelled_before(fn: Callable[[], Awaitable[Any]], mode: str) -> tuple[str, Any]:
    """Run ``fn()`` with its cancellation already pending: in a cancel scope cancelled
    beforehand, or (native asyncio) in a task that cancelled itself. Every operation
    checkpoints before its step, so it must raise there, whatever it was asked to do:
    ('cancelled', None), or the test fails."""
    ran: list[Any] = []
    if mode == "scope-before":
        with anyio.CancelScope() as scope:
            scope.cancel()
            ran.append(await fn())
        assert not ran, f"{fn} ran in a cancelled scope: {ran}"
        assert scope.cancelled_caught
        return "cancelled", None

    async def victim() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        ran.append(await fn())  # (the task would end cancelled even if this returned)

    task = asyncio.ensure_future(victim())
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not ran, f"{fn} ran with a cancellation pending: {ran}"
    return "cancelled", None


def _values(kind: str, result: Any) -> list[int]:
    if kind == "priority":
        p, v = result
        assert np.asarray(p).tolist() == np.asarray(v).tolist()
        result = v
    return [int(x) for x in np.atleast_1d(np.asarray(result))]


async def _scenario(s: Scenario) -> None:
    q = _make(s)
    check = q._engine.check_invariants  # (takes the lock; no step is half done here)
    ledger = Ledger(per_consumer=[[] for _ in s.consumers])
    next_value = [0]

    def fresh(k: int) -> list[int]:
        vals = list(range(next_value[0], next_value[0] + k))
        next_value[0] += k
        return vals

    async def produce(p: int, plan: list[tuple[int, str, int]]) -> None:
        for size, mode, delay in plan:
            vals = fresh(size)
            arr = np.asarray(vals, dtype=np.int64)
            if mode == "nowait":  # all-or-nothing, never waits
                item: Any = (arr, arr) if s.kind == "priority" else arr
                try:
                    q.enqueue_many_nowait(item)
                    status = "done"
                except aqueue.QueueFull:
                    status = "full"
                except aqueue.QueueClosedError:
                    status = "closed"
                check()
                ledger.batches.append((p, vals, status))
                await anyio.lowlevel.checkpoint()
                if status == "closed":
                    return
                continue
            if size == 1:
                element: Any = (vals[0], vals[0]) if s.kind == "priority" else vals[0]
                status, res = await _run_cancellable(partial(q.enqueue, element), mode, delay)
            else:
                batch: Any = (arr, arr) if s.kind == "priority" else arr
                status, res = await _run_cancellable(partial(q.enqueue_many, batch), mode, delay)
            check()
            if status == "error":
                assert isinstance(res, aqueue.QueueClosedError), res
                ledger.batches.append((p, vals, "closed"))
                return
            ledger.batches.append((p, vals, status))

    async def consume(c: int, plan: list[tuple[str, int, str, int]]) -> None:
        i = 0
        while True:
            # Follow the plan, then keep draining with dequeue_up_to until closed.
            op, n, mode, delay = plan[i] if i < len(plan) else ("dequeue_up_to", 3, "none", 0)
            i += 1
            if op == "dequeue":
                status, res = await _run_cancellable(q.dequeue, mode, delay)
            else:
                status, res = await _run_cancellable(partial(getattr(q, op), n), mode, delay)
            check()
            if status == "error":
                assert isinstance(res, aqueue.OutOfRangeError), res
                if i > len(plan):
                    return
                continue
            if status == "cancelled":
                ledger.cancelled_dequeues += 1
            if status == "done":
                got = _values(s.kind, res)
                if op == "dequeue_burst":
                    assert 1 <= len(got) <= n or n == 0 == len(got)
                elif op != "dequeue_up_to" or not q.closed:
                    assert len(got) == (1 if op == "dequeue" else n)
                ledger.consumed += got
                ledger.per_consumer[c] += got

    async def closer() -> None:
        if s.early_cancel_close:
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            q.close(cancel_pending_enqueues=True)
            check()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as consumers:
            for c, wants in enumerate(s.consumers):
                consumers.start_soon(consume, c, wants)
            async with anyio.create_task_group() as producers:
                producers.start_soon(closer)
                for p, plan in enumerate(s.producers):
                    producers.start_soon(produce, p, plan)
            q.close()
            check()

    check()
    remaining: list[int] = []
    while q.size():
        remaining += _values(s.kind, q.dequeue_up_to_nowait(q.size()))
        check()

    cancelled_enqueues = sum(status == "cancelled" for _, _, status in ledger.batches)
    event(f"cancelled enqueues: {min(cancelled_enqueues, 3)}")
    event(f"cancelled dequeues: {min(ledger.cancelled_dequeues, 3)}")
    event(f"kind: {s.kind}, early close: {s.early_cancel_close}")
    everything = ledger.consumed + remaining
    assert len(everything) == len(set(everything)), "an element was duplicated"
    present = set(everything)
    produced: set[int] = set()
    for _, vals, status in ledger.batches:
        admitted = [v for v in vals if v in present]
        if status == "done":
            assert admitted == vals, "a completed enqueue lost elements"
        elif status == "full" or len(vals) == 1:
            assert admitted == [], "a cancelled or refused enqueue admitted its element"
        assert admitted == vals[: len(admitted)], "admitted elements are not a prefix"
        produced |= set(admitted)
    assert present == produced, "an element appeared that no enqueue admitted"
    stats = q.statistics()
    assert stats.enqueued_total == len(produced)
    assert stats.dequeued_total == len(ledger.consumed)
    assert stats.size == 0
    assert (stats.tasks_waiting_enqueue, stats.tasks_waiting_dequeue) == (0, 0)
    if s.kind in ("fifo", "padding") and len(s.consumers) == 1:
        # Each producer allocates increasing values; with one consumer a FIFO queue
        # (restores going back to the front in order) must deliver them increasing.
        order = ledger.per_consumer[0] + remaining
        for p in range(len(s.producers)):
            mine = {v for q_, vals, _ in ledger.batches if q_ == p for v in vals}
            seq = [v for v in order if v in mine]
            assert seq == sorted(seq), f"FIFO order broken for producer {p}"


SETTINGS = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@SETTINGS
@given(scenarios(CANCELS_ASYNCIO))
def test_conservation_on_asyncio(s: Scenario) -> None:
    """asyncio: scope and native cancellations never lose or duplicate an element."""
    anyio.run(_scenario, s, backend="asyncio")


@SETTINGS
@given(scenarios(CANCELS_BOTH))
def test_conservation_on_trio(s: Scenario) -> None:
    """trio: scope cancellations never lose or duplicate an element."""
    anyio.run(_scenario, s, backend="trio")
