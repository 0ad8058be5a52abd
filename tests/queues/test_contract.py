"""The queue contract: behaviour every queue class shares (docs/semantics.md,
the queues' rules, points 1-7).

Every test runs over FIFOQueue, RandomShuffleQueue(min_after_dequeue=0),
PaddingFIFOQueue with fully defined shapes and PriorityQueue (fed ascending priorities,
so its order is FIFO too), and the other element forms of ``KINDS``, on asyncio and on
trio through anyio's pytest plugin. Order is checked exactly for the ordered kinds and as
a multiset for the shuffle queue (see ``Kind`` in support.py). Priority-specific batching
(waiting for n <= capacity to get a globally sorted batch) is in test_priority.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import random
import re
from typing import Any

import anyio
import pytest
import trio
from support import KINDS, Kind, drain_nowait, settle, spawn

import aqueue

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=KINDS, ids=lambda k: k.label)
def kind(request: pytest.FixtureRequest) -> Kind:
    """Each queue class of the contract."""
    return request.param  # type: ignore[no-any-return]


async def _dequeue_all(q: Any, kind: Kind, n: int) -> list[int]:
    return [kind.value(await q.dequeue()) for _ in range(n)]


@pytest.mark.anyio
class TestContract:
    """The shared behaviour, on each backend of the ``anyio_backend`` fixture."""

    async def test_runs_on_the_backend_named(self, anyio_backend: str) -> None:
        """The contract really runs on asyncio and on trio."""
        if anyio_backend == "trio":
            trio.lowlevel.current_trio_token()  # raises RuntimeError outside trio
        else:
            asyncio.get_running_loop()  # raises RuntimeError outside asyncio

    # -- point 1: order, slicing, stacking ---------------------------------------------------

    async def test_single_ops_keep_order(self, kind: Kind) -> None:
        """Single enqueues come back in enqueue order; size and len track them."""
        q = kind.make(10)
        for v in range(5):
            await q.enqueue(kind.elem(v))
        assert q.size() == 5
        assert len(q) == 5
        kind.check(await _dequeue_all(q, kind, 5), range(5))
        assert q.size() == 0

    async def test_enqueue_many_slices_and_dequeue_many_stacks(self, kind: Kind) -> None:
        """enqueue_many slices along axis 0; dequeue_many(n) stacks a leading dimension n."""
        q = kind.make(10)
        await q.enqueue_many(kind.batch(range(6)))
        assert q.size() == 6
        first = kind.values(await q.dequeue_many(4), 4)
        rest = await _dequeue_all(q, kind, 2)
        kind.check(first + rest, range(6))
        assert q.size() == 0

    async def test_dequeue_up_to_on_open_queue_waits_for_n(self, kind: Kind) -> None:
        """On an open queue dequeue_up_to waits for the full n, like dequeue_many."""
        q = kind.make(10)
        q.enqueue_many_nowait(kind.batch(range(2)))
        async with anyio.create_task_group() as tg:
            op = spawn(tg, q.dequeue_up_to, 3)
            await settle()
            assert op.pending
            q.enqueue_nowait(kind.elem(2))
            await settle()
            kind.check(kind.values(op.result(), 3), range(3))

    async def test_interleaved_single_and_batch_ops_keep_global_order(self, kind: Kind) -> None:
        """Randomly interleaved single and batch ops in one task keep one global order."""
        rng = random.Random(20261121)
        q = kind.make(400)
        produced = 0
        got: list[int] = []
        for _ in range(80):
            r = rng.random()
            if r < 0.25:
                await q.enqueue(kind.elem(produced))
                produced += 1
            elif r < 0.5:
                k = rng.randint(0, 6)
                await q.enqueue_many(kind.batch(range(produced, produced + k)))
                produced += k
            elif r < 0.75 and q.size() > 0:
                got.append(kind.value(await q.dequeue()))
            elif q.size() > 0:
                k = rng.randint(0, q.size())
                got += kind.values(await q.dequeue_many(k), k)
        got += kind.values(await q.dequeue_many(q.size()))
        kind.check(got, range(produced))

    async def test_concurrent_mixed_producer_and_consumer_keep_order(self, kind: Kind) -> None:
        """A producer mixing enqueue/enqueue_many (some larger than the capacity) and a
        consumer mixing dequeue/dequeue_many see one global order."""
        rng = random.Random(7)
        sizes = [rng.randint(0, 7) for _ in range(40)]
        total = sum(sizes)
        takes: list[int] = []
        left = total
        while left:
            k = min(left, rng.randint(1, 7))
            takes.append(k)
            left -= k
        q = kind.make(4)
        got: list[int] = []

        async def produce() -> None:
            v = 0
            for k in sizes:
                if k == 1:
                    await q.enqueue(kind.elem(v))
                else:
                    await q.enqueue_many(kind.batch(range(v, v + k)))
                v += k

        async def consume() -> None:
            for k in takes:
                if k == 1:
                    got.append(kind.value(await q.dequeue()))
                else:
                    got.extend(kind.values(await q.dequeue_many(k), k))

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            tg.start_soon(consume)
        kind.check(got, range(total))
        assert q.size() == 0

    async def test_dequeue_burst_waits_for_one_then_takes_what_is_there(self, kind: Kind) -> None:
        """dequeue_burst(n) waits for the first element, then takes 1..n at once: all
        that is there, up to n, in queue order."""
        q = kind.make(10)
        async with anyio.create_task_group() as tg:
            op = spawn(tg, q.dequeue_burst, 4)
            await settle()
            assert op.pending
            q.enqueue_nowait(kind.elem(0))
            await settle()
            kind.check(kind.values(op.result(), 1), [0])
        q.enqueue_many_nowait(kind.batch(range(1, 7)))
        first = kind.values(await q.dequeue_burst(4), 4)
        rest = kind.values(await q.dequeue_burst(4), 2)
        kind.check(first + rest, range(1, 7))
        assert q.size() == 0

    async def test_dequeue_burst_ends_on_a_closed_empty_queue(self, kind: Kind) -> None:
        """A closed queue gives its remainder, then OutOfRangeError; a waiting burst is
        woken by the close."""
        q = kind.make(4)
        q.enqueue_many_nowait(kind.batch([0, 1]))
        q.close()
        kind.check(kind.values(await q.dequeue_burst(8), 2), [0, 1])
        with pytest.raises(aqueue.OutOfRangeError):
            await q.dequeue_burst(8)
        q2 = kind.make(4)
        async with anyio.create_task_group() as tg:
            op = spawn(tg, q2.dequeue_burst, 2)
            await settle()
            q2.close()
            await settle()
            with pytest.raises(aqueue.OutOfRangeError):
                op.result()

    async def test_dequeue_burst_queues_behind_a_waiting_batch(self, kind: Kind) -> None:
        """A burst never passes a batch dequeue that waits ahead of it."""
        q = kind.make(10)
        async with anyio.create_task_group() as tg:
            batch = spawn(tg, q.dequeue_many, 3)
            await settle()
            burst = spawn(tg, q.dequeue_burst, 5)
            await settle()
            q.enqueue_many_nowait(kind.batch([0, 1]))
            await settle()
            assert batch.pending
            assert burst.pending
            q.enqueue_many_nowait(kind.batch([2, 3, 4]))
            await settle()
            got = kind.values(batch.result(), 3) + kind.values(burst.result(), 2)
        kind.check(got, range(5))

    # -- point 2: blocking and head of line --------------------------------------------------

    async def test_dequeue_waits_while_empty(self, kind: Kind) -> None:
        """dequeue parks on an empty queue and returns the next element enqueued."""
        q = kind.make(3)
        async with anyio.create_task_group() as tg:
            op = spawn(tg, q.dequeue)
            await settle()
            assert op.pending
            assert q.statistics().tasks_waiting_dequeue == 1
            q.enqueue_nowait(kind.elem(7))
            await settle()
            assert kind.value(op.result()) == 7
        assert q.size() == 0
        assert q.statistics().tasks_waiting_dequeue == 0

    async def test_enqueue_waits_while_full_and_lands_last(self, kind: Kind) -> None:
        """enqueue parks on a full queue; the blocked element lands after the others."""
        q = kind.make(2)
        await q.enqueue_many(kind.batch([0, 1]))
        async with anyio.create_task_group() as tg:
            op = spawn(tg, q.enqueue, kind.elem(2))
            await settle()
            assert op.pending
            assert q.size() == 2
            assert q.statistics().tasks_waiting_enqueue == 1
            first = kind.value(await q.dequeue())
            await settle()
            assert op.returned
        kind.check([first, *drain_nowait(q, kind)], [0, 1, 2])
        assert q.statistics().tasks_waiting_enqueue == 0

    async def test_dequeuers_are_served_in_arrival_order(self, kind: Kind) -> None:
        """Blocked dequeuers are served head of line, in the order they arrived."""
        q = kind.make(5)
        async with anyio.create_task_group() as tg:
            d1 = spawn(tg, q.dequeue)
            await settle()
            d2 = spawn(tg, q.dequeue_many, 2)
            await settle()
            d3 = spawn(tg, q.dequeue)
            await settle()
            assert q.statistics().tasks_waiting_dequeue == 3
            await q.enqueue_many(kind.batch(range(4)))
            await settle()
            got = [kind.value(d1.result()), *kind.values(d2.result(), 2), kind.value(d3.result())]
        kind.check(got, range(4))

    async def test_pending_enqueue_many_stays_contiguous(self, kind: Kind) -> None:
        """A pending enqueue_many is finished before a later enqueue gets a slot."""
        q = kind.make(2)
        await q.enqueue_many(kind.batch([0, 1]))
        got: list[int] = []
        async with anyio.create_task_group() as tg:
            e1 = spawn(tg, q.enqueue_many, kind.batch([10, 11, 12]))
            await settle()
            e2 = spawn(tg, q.enqueue, kind.elem(20))
            await settle()
            # e1 admits one element per freed slot; e2 waits behind it.
            for _ in range(2):
                got.append(kind.value(await q.dequeue()))
                await settle()
                assert e1.pending
                assert e2.pending
            got.append(kind.value(await q.dequeue()))
            await settle()
            assert e1.returned
            assert e2.pending
            got.append(kind.value(await q.dequeue()))
            await settle()
            assert e2.returned
        got += drain_nowait(q, kind)
        kind.check(got, [0, 1, 10, 11, 12, 20])

    # -- point 3: big batches ----------------------------------------------------------------

    async def test_enqueue_many_larger_than_capacity_is_admitted_progressively(
        self, kind: Kind
    ) -> None:
        """enqueue_many(10) into capacity 5 fills the queue, stays pending while consumers
        drain it and returns once its last element is in."""
        q = kind.make(5)
        got: list[int] = []
        async with anyio.create_task_group() as tg:
            op = spawn(tg, q.enqueue_many, kind.batch(range(10)))
            await settle()
            assert op.pending
            assert q.size() == 5
            for i in range(5):
                got.append(kind.value(await q.dequeue()))
                await settle()
                assert q.size() == 5
                assert op.pending == (i < 4)
        got += await _dequeue_all(q, kind, 5)
        kind.check(got, range(10))
        assert q.statistics().enqueued_total == 10

    async def test_dequeue_many_larger_than_capacity_claims_progressively(self, kind: Kind) -> None:
        """dequeue_many(5) from capacity 2 claims elements as they arrive and returns with 5."""
        q = kind.make(2)
        async with anyio.create_task_group() as tg:
            op = spawn(tg, q.dequeue_many, 5)
            await settle()
            for v in range(5):
                await q.enqueue(kind.elem(v))
            await settle()
            kind.check(kind.values(op.result(), 5), range(5))
        assert q.size() == 0

    # -- point 4: zero sizes and bad counts --------------------------------------------------

    async def test_zero_sizes(self, kind: Kind) -> None:
        """Empty enqueue_many is a no-op; dequeue_many(0)/dequeue_up_to(0) return an empty
        batch at once, whether or not elements are present."""
        q = kind.make(3)
        await q.enqueue_many(kind.batch([]))
        q.enqueue_many_nowait(kind.batch([]))
        assert q.size() == 0
        assert q.statistics().enqueued_total == 0
        for _ in range(2):
            assert kind.values(await q.dequeue_many(0), 0) == []
            assert kind.values(await q.dequeue_up_to(0), 0) == []
            assert kind.values(q.dequeue_many_nowait(0), 0) == []
            assert kind.values(q.dequeue_up_to_nowait(0), 0) == []
            await q.enqueue(kind.elem(1))
            assert q.size() == 1
            await q.dequeue()
        q.close()
        assert kind.values(await q.dequeue_many(0), 0) == []
        assert kind.values(await q.dequeue_up_to(0), 0) == []

    async def test_negative_counts_raise(self, kind: Kind) -> None:
        """dequeue_many/dequeue_up_to with n < 0 (or not an int) raise ElementSpecError
        and change nothing."""
        q = kind.make(3)
        q.enqueue_nowait(kind.elem(1))
        with pytest.raises(aqueue.ElementSpecError):
            await q.dequeue_many(-1)
        with pytest.raises(aqueue.ElementSpecError):
            await q.dequeue_up_to(-2)
        with pytest.raises(aqueue.ElementSpecError):
            q.dequeue_many_nowait(-1)
        with pytest.raises(aqueue.ElementSpecError):
            q.dequeue_up_to_nowait(-1)
        for bad in (1.0, "1", None):
            with pytest.raises(aqueue.ElementSpecError):
                await q.dequeue_many(bad)
        assert q.size() == 1
        assert q.statistics().dequeued_total == 0

    # -- point 5: close ----------------------------------------------------------------------

    async def test_close_rejects_new_enqueues(self, kind: Kind) -> None:
        """After close every enqueue form raises QueueClosedError; close is idempotent."""
        q = kind.make(3)
        await q.enqueue(kind.elem(0))
        assert not q.closed
        q.close()
        q.close()
        assert q.closed
        assert q.statistics().closed
        with pytest.raises(aqueue.QueueClosedError):
            await q.enqueue(kind.elem(1))
        with pytest.raises(aqueue.QueueClosedError):
            await q.enqueue_many(kind.batch([1, 2]))
        with pytest.raises(aqueue.QueueClosedError):
            q.enqueue_nowait(kind.elem(1))
        with pytest.raises(anyio.ClosedResourceError):
            q.enqueue_many_nowait(kind.batch([1]))
        assert q.size() == 1

    async def test_close_drains_in_order_then_out_of_range(self, kind: Kind) -> None:
        """A closed queue yields what it holds, then OutOfRangeError with TF's message."""
        q = kind.make(5, name="drain")
        await q.enqueue_many(kind.batch(range(3)))
        q.close()
        kind.check(await _dequeue_all(q, kind, 3), range(3))
        msg = "queue 'drain' is closed and has insufficient elements (requested 1, current size 0)"
        with pytest.raises(aqueue.OutOfRangeError, match=re.escape(msg)):
            await q.dequeue()
        with pytest.raises(anyio.EndOfStream):
            q.dequeue_nowait()

    async def test_dequeue_many_on_closed_queue_with_too_few_consumes_nothing(
        self, kind: Kind
    ) -> None:
        """dequeue_many(3) on a closed queue holding 1 raises without consuming it."""
        q = kind.make(5, name="few")
        await q.enqueue_many(kind.batch(range(4)))
        q.close()
        first = kind.values(await q.dequeue_many(3), 3)
        few = re.escape("(requested 3, current size 1)")
        with pytest.raises(aqueue.OutOfRangeError, match=few):
            await q.dequeue_many(3)
        with pytest.raises(aqueue.OutOfRangeError):
            q.dequeue_many_nowait(2)
        assert q.size() == 1
        kind.check([*first, kind.value(await q.dequeue())], range(4))

    async def test_dequeue_up_to_after_close_returns_remainder(self, kind: Kind) -> None:
        """dequeue_up_to(3) after close returns 3, then 1, then raises OutOfRangeError."""
        q = kind.make(5)
        await q.enqueue_many(kind.batch(range(4)))
        q.close()
        a = kind.values(await q.dequeue_up_to(3), 3)
        b = kind.values(await q.dequeue_up_to(3), 1)
        kind.check(a + b, range(4))
        empty = re.escape("(requested 3, current size 0)")
        with pytest.raises(aqueue.OutOfRangeError, match=empty):
            await q.dequeue_up_to(3)
        with pytest.raises(aqueue.OutOfRangeError):
            q.dequeue_up_to_nowait(3)

    async def test_dequeue_up_to_nowait_after_close_returns_remainder(self, kind: Kind) -> None:
        """dequeue_up_to_nowait after close returns min(n, remaining)."""
        q = kind.make(5)
        q.enqueue_many_nowait(kind.batch(range(3)))
        q.close()
        kind.check(kind.values(q.dequeue_up_to_nowait(5), 3), range(3))

    async def test_close_wakes_every_blocked_consumer(self, kind: Kind) -> None:
        """Close wakes all blocked consumers: each either gets what remains (in arrival
        order) or raises OutOfRangeError; nobody hangs."""
        q = kind.make(3)
        q.enqueue_nowait(kind.elem(0))
        async with anyio.create_task_group() as tg:
            many = spawn(tg, q.dequeue_many, 2)
            await settle()
            one = spawn(tg, q.dequeue)
            await settle()
            up_to = spawn(tg, q.dequeue_up_to, 2)
            await settle()
            last = spawn(tg, q.dequeue)
            await settle()
            assert all(op.pending for op in (many, one, up_to, last))
            q.close()
            await settle()
        assert isinstance(many.error, aqueue.OutOfRangeError)
        assert kind.value(one.result()) == 0
        assert isinstance(up_to.error, aqueue.OutOfRangeError)
        assert isinstance(last.error, aqueue.OutOfRangeError)
        assert q.size() == 0

    async def test_close_is_queued_behind_pending_enqueues(self, kind: Kind) -> None:
        """A pending enqueue still completes after close as space frees; new ones fail."""
        q = kind.make(2)
        await q.enqueue_many(kind.batch([10, 20]))
        async with anyio.create_task_group() as tg:
            pending = spawn(tg, q.enqueue_many, kind.batch([30, 40]))
            await settle()
            q.close()
            with pytest.raises(aqueue.QueueClosedError):
                await q.enqueue(kind.elem(50))
            await settle()
            assert pending.pending
            got = await _dequeue_all(q, kind, 4)
            await settle()
            assert pending.returned
        kind.check(got, [10, 20, 30, 40])
        with pytest.raises(aqueue.OutOfRangeError):
            await q.dequeue()

    async def test_pending_enqueue_can_satisfy_dequeue_many_after_close(self, kind: Kind) -> None:
        """After close, a dequeue_many that a pending enqueue can still supply waits for it."""
        q = kind.make(2)
        await q.enqueue_many(kind.batch([10, 20]))
        async with anyio.create_task_group() as tg:
            pending = spawn(tg, q.enqueue_many, kind.batch([30, 40]))
            await settle()
            q.close()
            got = kind.values(await q.dequeue_many(4), 4)
            await settle()
            assert pending.returned
        kind.check(got, [10, 20, 30, 40])

    async def test_close_cancel_pending_enqueues(self, kind: Kind) -> None:
        """close(cancel_pending_enqueues=True) fails pending enqueues at once; elements a
        pending enqueue_many had already admitted stay."""
        q = kind.make(2)
        async with anyio.create_task_group() as tg:
            batch_op = spawn(tg, q.enqueue_many, kind.batch([0, 1, 2, 3]))
            await settle()
            single_op = spawn(tg, q.enqueue, kind.elem(9))
            await settle()
            first = kind.value(await q.dequeue())
            await settle()  # batch_op admits 2 into the freed slot
            assert batch_op.pending
            q.close(cancel_pending_enqueues=True)
            await settle()
        assert isinstance(batch_op.error, aqueue.QueueClosedError)
        assert isinstance(single_op.error, aqueue.QueueClosedError)
        assert q.closed
        rest = await _dequeue_all(q, kind, 2)
        kind.check([first, *rest], [0, 1, 2])
        with pytest.raises(aqueue.OutOfRangeError):
            await q.dequeue()

    async def test_close_can_escalate_to_cancel_pending_enqueues(self, kind: Kind) -> None:
        """After a plain close, close(cancel_pending_enqueues=True) still fails the
        enqueues that were allowed to wait (the shutdown escalation)."""
        q = kind.make(1)
        q.enqueue_nowait(kind.elem(0))
        async with anyio.create_task_group() as tg:
            pending = spawn(tg, q.enqueue, kind.elem(1))
            await settle()
            q.close()
            await settle()
            assert pending.pending
            q.close(cancel_pending_enqueues=True)
            await settle()
        assert isinstance(pending.error, aqueue.QueueClosedError)
        assert drain_nowait(q, kind) == [0]
        assert q.statistics().tasks_waiting_enqueue == 0

    async def test_dequeue_up_to_after_close_waits_for_pending_enqueues(self, kind: Kind) -> None:
        """A closed queue is final only once no enqueue is pending: dequeue_up_to takes what
        a pending enqueue_many still brings (TF waits for pending enqueues to resolve)."""
        q = kind.make(2)
        q.enqueue_many_nowait(kind.batch([0, 1]))
        async with anyio.create_task_group() as tg:
            pending = spawn(tg, q.enqueue_many, kind.batch([2, 3]))
            await settle()
            q.close()
            got = kind.values(await q.dequeue_up_to(2), 2)
            got += kind.values(await q.dequeue_up_to(5), 2)
            await settle()
            assert pending.returned
        kind.check(got, range(4))
        with pytest.raises(aqueue.OutOfRangeError):
            await q.dequeue_up_to(5)

    # -- point 6: partial batch restored on close --------------------------------------------

    async def test_partial_batch_is_restored_on_close(self, kind: Kind) -> None:
        """A dequeue_many blocked holding claimed elements puts them back (in order) when
        the queue closes, and raises OutOfRangeError."""
        q = kind.make(2)
        async with anyio.create_task_group() as tg:
            op = spawn(tg, q.dequeue_many, 4)
            await settle()
            q.enqueue_nowait(kind.elem(0))
            q.enqueue_nowait(kind.elem(1))
            await settle()
            await q.enqueue(kind.elem(2))
            await settle()
            assert op.pending
            assert q.size() == 0  # claimed elements are not counted
            q.close()
            await settle()
        assert isinstance(op.error, aqueue.OutOfRangeError)
        assert "requested 4" in str(op.error)
        assert q.size() == 3
        kind.check(await _dequeue_all(q, kind, 3), [0, 1, 2])
        assert q.statistics().dequeued_total == 3

    # -- point 7 (basic; see test_cancellation.py) -------------------------------------------

    async def test_every_async_op_checkpoints_before_acting(self, kind: Kind) -> None:
        """Each async op is a cancellation point even when it need not wait, and a call
        cancelled there changes nothing."""
        q = kind.make(4)
        q.enqueue_many_nowait(kind.batch([0, 1]))
        calls = [
            (q.enqueue, kind.elem(5)),
            (q.enqueue_many, kind.batch([5, 6])),
            (q.dequeue,),
            (q.dequeue_many, 2),
            (q.dequeue_up_to, 1),
        ]
        for fn, *args in calls:
            with anyio.CancelScope() as scope:
                scope.cancel()
                await fn(*args)
            assert scope.cancelled_caught, fn
            assert q.size() == 2
        kind.check(drain_nowait(q, kind), [0, 1])
        stats = q.statistics()
        assert (stats.enqueued_total, stats.dequeued_total) == (2, 2)

    # -- concurrency -------------------------------------------------------------------------

    async def test_parallel_producers_and_consumers_deliver_exactly_once(self, kind: Kind) -> None:
        """10 producers x 100 and 10 consumers x 100 on capacity 50: every element once."""
        q = kind.make(50)
        got: list[int] = []

        async def produce(p: int) -> None:
            rng = random.Random(p)
            v = p * 100
            while v < (p + 1) * 100:
                k = min(rng.randint(1, 8), (p + 1) * 100 - v)
                if k == 1:
                    await q.enqueue(kind.elem(v))
                else:
                    await q.enqueue_many(kind.batch(range(v, v + k)))
                v += k

        async def consume(c: int) -> None:
            rng = random.Random(1000 + c)
            left = 100
            while left:
                k = min(rng.randint(1, 8), left)
                if k == 1:
                    got.append(kind.value(await q.dequeue()))
                else:
                    got.extend(kind.values(await q.dequeue_many(k), k))
                left -= k

        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(produce, i)
                tg.start_soon(consume, i)
        assert sorted(got) == list(range(1000))
        stats = q.statistics()
        assert (stats.size, stats.enqueued_total, stats.dequeued_total) == (0, 1000, 1000)
        assert stats.peak_size <= 50

    # -- iteration and context managers ------------------------------------------------------

    async def test_async_for_ends_when_closed_and_drained(self, kind: Kind) -> None:
        """async for yields every element and ends cleanly once closed and drained."""
        q = kind.make(3)
        got: list[int] = []

        async def produce() -> None:
            for v in range(7):
                await q.enqueue(kind.elem(v))
            q.close()

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            async for element in q:
                got.append(kind.value(element))
        kind.check(got, range(7))

    async def test_batches_iterator(self, kind: Kind) -> None:
        """q.batches(n) is an iterator object yielding n-batches; the short remainder
        stays queued, or comes as a final batch with allow_smaller_final_batch."""
        q = kind.make(20)
        q.enqueue_many_nowait(kind.batch(range(10)))
        q.close()
        it = q.batches(4)
        assert not inspect.isasyncgen(it)
        assert hasattr(type(it), "__anext__")
        assert it.__aiter__() is it
        full = [kind.values(b, 4) async for b in it]
        assert len(full) == 2
        assert q.size() == 2
        tail = [kind.values(b) async for b in q.batches(4, allow_smaller_final_batch=True)]
        assert [len(b) for b in tail] == [2]
        kind.check([v for b in full + tail for v in b], range(10))
        for bad in (0, -1):
            with pytest.raises(aqueue.ElementSpecError):
                q.batches(bad)

    async def test_async_with_and_aclose_close(self, kind: Kind) -> None:
        """``async with q`` closes on exit; ``await q.aclose()`` closes; both idempotent."""
        q = kind.make(2)
        async with q as entered:
            assert entered is q
            await q.enqueue(kind.elem(1))
        assert q.closed
        assert kind.value(await q.dequeue()) == 1
        q2 = kind.make(2)
        await q2.aclose()
        await q2.aclose()
        assert q2.closed

    # -- nowait twins ------------------------------------------------------------------------

    async def test_nowait_twins(self, kind: Kind) -> None:
        """_nowait ops never wait: QueueFull/QueueEmpty when they would, all-or-nothing."""
        q = kind.make(3)
        with pytest.raises(aqueue.QueueEmpty):
            q.dequeue_nowait()
        with pytest.raises(aqueue.QueueEmpty):
            q.dequeue_up_to_nowait(2)
        q.enqueue_many_nowait(kind.batch([0, 1]))
        with pytest.raises(aqueue.QueueFull):
            q.enqueue_many_nowait(kind.batch([2, 3]))
        assert q.size() == 2
        with pytest.raises(aqueue.QueueEmpty):
            q.dequeue_many_nowait(3)
        assert q.size() == 2
        q.enqueue_nowait(kind.elem(2))
        with pytest.raises(aqueue.QueueFull):
            q.enqueue_nowait(kind.elem(3))
        first = kind.values(q.dequeue_many_nowait(1), 1)
        rest = kind.values(q.dequeue_up_to_nowait(5), 2)
        kind.check(first + rest, [0, 1, 2])
        assert q.statistics().enqueued_total == 3

    async def test_all_or_nothing_batch_goes_in_when_a_waiting_dequeue_makes_room(
        self, kind: Kind
    ) -> None:
        """enqueue_many_nowait of a batch larger than the free space succeeds when the
        waiting dequeue_many will take enough to bring the size back within capacity,
        and fails (admitting nothing) when it would not."""
        q = kind.make(4)
        q.enqueue_many_nowait(kind.batch([0, 1, 2]))
        async with anyio.create_task_group() as tg:
            d = spawn(tg, q.dequeue_many, 4)
            await settle()
            with pytest.raises(aqueue.QueueFull):  # 3 + 6 - 4 = 5 > capacity 4
                q.enqueue_many_nowait(kind.batch(range(3, 9)))
            q.enqueue_many_nowait(kind.batch(range(3, 8)))  # 3 + 5 - 4 = 4: fits after
            await settle()
            taken = kind.values(d.result(), 4)
        assert q.size() == 4
        rest = kind.values(q.dequeue_many_nowait(4), 4)
        kind.check(taken + rest, list(range(8)))

    async def test_nowait_queues_behind_waiters_of_its_direction(self, kind: Kind) -> None:
        """A _nowait op fails while waiters of its own direction are queued (no overtaking)."""
        q = kind.make(2)
        async with anyio.create_task_group() as tg:
            d = spawn(tg, q.dequeue)
            await settle()
            q.enqueue_nowait(kind.elem(5))
            with pytest.raises(aqueue.QueueEmpty):
                q.dequeue_nowait()
            await settle()
            assert kind.value(d.result()) == 5

            q.enqueue_many_nowait(kind.batch([0, 1]))
            e = spawn(tg, q.enqueue, kind.elem(2))
            await settle()
            first = kind.value(q.dequeue_nowait())
            with pytest.raises(aqueue.QueueFull):
                q.enqueue_nowait(kind.elem(3))
            await settle()
            assert e.returned
        kind.check([first, *drain_nowait(q, kind)], [0, 1, 2])

    # -- statistics --------------------------------------------------------------------------

    async def test_statistics_counters(self, kind: Kind) -> None:
        """statistics() is a frozen snapshot with size, capacity, totals and peak_size."""
        q = kind.make(4)
        s0 = q.statistics()
        assert isinstance(s0, aqueue.QueueStatistics)
        assert (s0.size, s0.capacity, s0.closed) == (0, 4, False)
        assert (s0.enqueued_total, s0.dequeued_total, s0.peak_size) == (0, 0, 0)
        assert (s0.tasks_waiting_enqueue, s0.tasks_waiting_dequeue) == (0, 0)
        assert (s0.time_full_s, s0.time_empty_s) == (0.0, 0.0)
        await q.enqueue_many(kind.batch([0, 1, 2]))
        await q.dequeue_many(2)
        await q.enqueue(kind.elem(3))
        s1 = q.statistics()
        assert (s1.size, s1.enqueued_total, s1.dequeued_total, s1.peak_size) == (2, 4, 2, 3)
        assert s0.size == 0  # a snapshot, not a live view
        with pytest.raises(dataclasses.FrozenInstanceError):
            s1.size = 9
        q.close()
        assert q.statistics().closed

    async def test_statistics_waiting_tasks_and_blocked_time(self, kind: Kind) -> None:
        """tasks_waiting_* count parked tasks; time_empty_s / time_full_s grow while
        someone is blocked and stop growing when nobody is."""
        q = kind.make(1)
        async with anyio.create_task_group() as tg:
            d1 = spawn(tg, q.dequeue)
            d2 = spawn(tg, q.dequeue)
            await settle()
            s = q.statistics()
            assert s.tasks_waiting_dequeue == 2
            await anyio.sleep(0.02)
            t1 = q.statistics().time_empty_s
            assert t1 > s.time_empty_s
            d1.scope.cancel()
            await settle()
            assert q.statistics().tasks_waiting_dequeue == 1
            await anyio.sleep(0.02)
            assert q.statistics().time_empty_s > t1
            q.enqueue_nowait(kind.elem(1))
            await settle()
            assert kind.value(d2.result()) == 1
            s = q.statistics()
            assert s.tasks_waiting_dequeue == 0
            await anyio.sleep(0.02)
            assert q.statistics().time_empty_s == s.time_empty_s
            assert s.time_full_s == 0.0

            q.enqueue_nowait(kind.elem(2))
            e = spawn(tg, q.enqueue, kind.elem(3))
            await settle()
            s = q.statistics()
            assert s.tasks_waiting_enqueue == 1
            await anyio.sleep(0.02)
            t2 = q.statistics().time_full_s
            assert t2 > s.time_full_s
            assert kind.value(q.dequeue_nowait()) == 2
            await settle()
            assert e.returned
            s = q.statistics()
            assert s.tasks_waiting_enqueue == 0
            assert s.time_full_s >= t2
            await anyio.sleep(0.02)
            assert q.statistics().time_full_s == s.time_full_s
