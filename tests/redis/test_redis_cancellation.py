"""Random cancellations never lose or duplicate an element (Redis queues).

Producers and consumers run under random deadlines, so cancellations land during
function calls (the take, the ack, the enqueue), during waits and in between. After a
final drain, every element a completed enqueue admitted came out exactly once; of a
cancelled enqueue_many, exactly a prefix came out; nothing came out twice. Both anyio
cancel scopes (asyncio and trio) and native asyncio cancellation (``task.cancel()`` and
``asyncio.timeout``, or ``asyncio.wait_for`` before 3.11) are exercised.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from collections.abc import Coroutine
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import RedisProc, payload_keys

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("payload_storage")]

DELAYS = [0.0, 0.0002, 0.0005, 0.001, 0.002, 0.004, 0.5]
# The scope body requires more cancelled puts than this (a module that reuses the body
# where puts rarely wait, and covers them elsewhere, may lower it).
MIN_PUT_CANCELS = 5


def verify(calls: list[tuple[list[int], bool]], out: list[int]) -> None:
    """Conservation: no duplicates, nothing foreign, completed calls whole, cancelled
    enqueue_many calls a prefix."""
    counts = Counter(out)
    assert not [v for v, c in counts.items() if c > 1], "duplicated elements"
    produced = {v for vals, _ in calls for v in vals}
    assert set(out) <= produced, "elements nobody enqueued"
    seen = set(out)
    for vals, completed in calls:
        present = [v in seen for v in vals]
        if completed:
            assert all(present), f"lost elements of a completed enqueue: {vals}"
        else:
            k = sum(present)
            assert present == [True] * k + [False] * (len(vals) - k), "not a prefix"


async def open_q(srv: Any, kind: str, name: str) -> Any:
    if kind == "fifo":
        return await srv.fifo_queue(name, 6, np.int64, (2,))
    return await srv.random_shuffle_queue(name, 6, 2, np.int64, (2,), seed=5)


def elems(vals: list[int]) -> Any:
    arr = np.array(vals, dtype=np.int64)
    return np.stack([arr, arr], axis=1)


def values(batch: Any) -> list[int]:
    arr = np.asarray(batch)
    assert (arr[..., 0] == arr[..., 1]).all()
    return [int(v) for v in arr.reshape(-1, 2)[:, 0]]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
async def test_random_scope_cancellations(
    url: str, redis_server: RedisProc, qname: str, kind: str
) -> None:
    rng = random.Random(11)
    calls: list[tuple[list[int], bool]] = []
    out: list[int] = []
    stats = Counter[str]()
    async with aqueue.redis.connect(url, lease_time=5.0, wait_timeout=0.05) as srv:
        q = await open_q(srv, kind, qname)
        counter = iter(range(10**6))
        producers_left = 2

        async def produce() -> None:
            nonlocal producers_left
            for _ in range(50):
                vals = [next(counter) for _ in range(rng.randint(0, 4))]  # 0: an empty batch
                with anyio.move_on_after(rng.choice(DELAYS)) as scope:
                    if len(vals) == 1:
                        await q.enqueue(elems(vals)[0])
                    else:
                        await q.enqueue_many(elems(vals))
                    calls.append((vals, True))
                if scope.cancelled_caught:
                    stats["put cancelled"] += 1
                    calls.append((vals, len(vals) == 1 and False))
            producers_left -= 1

        async def consume() -> None:
            while producers_left:
                how = rng.choice(["one", "many", "upto", "big", "burst"])
                with anyio.move_on_after(rng.choice(DELAYS)) as scope:
                    if how == "one":
                        got = values(await q.dequeue())
                    elif how == "big":  # n > capacity: claims progressively
                        got = values(await q.dequeue_many(8))
                    elif how == "many":  # 0, 1, and the capacity drawn too
                        got = values(await q.dequeue_many(rng.choice([0, 1, 2, 3, 6])))
                    elif how == "burst":
                        got = values(await q.dequeue_burst(rng.randint(0, 4)))
                    else:
                        got = values(await q.dequeue_up_to(rng.choice([0, 1, 2, 3, 6])))
                    out.extend(got)
                stats["get cancelled"] += scope.cancelled_caught

        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(produce)
            for _ in range(2):
                tg.start_soon(consume)
        await q.aclose()
        while True:
            try:
                out.extend(values(await q.dequeue_up_to(10)))
            except aqueue.OutOfRangeError:
                break
        assert (await q.statistics()).size == 0
    # single-element enqueues that were cancelled may or may not be in: a prefix too
    verify(calls, out)
    assert payload_keys(redis_server, qname) == []  # none staged, leased or put back left
    assert stats["put cancelled"] > MIN_PUT_CANCELS
    assert stats["get cancelled"] > 5


async def within(delay: float, call: Coroutine[Any, Any, None]) -> None:
    """asyncio.timeout where it exists (3.11+), asyncio.wait_for before."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(delay):
            await call
    else:
        await asyncio.wait_for(call, delay)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
async def test_random_native_asyncio_cancellations(
    url: str, redis_server: RedisProc, qname: str, kind: str
) -> None:
    """task.cancel() and asyncio.timeout at random moments: nothing lost or duplicated.
    A native cancellation that arrives during a server call takes effect when the call
    returns, so an enqueue may have admitted its element although it raised."""
    rng = random.Random(7)
    calls: list[tuple[list[int], bool]] = []
    out: list[int] = []
    stats = Counter[str]()
    async with aqueue.redis.connect(url, lease_time=5.0, wait_timeout=0.05) as srv:
        q = await open_q(srv, kind, qname)
        counter = iter(range(10**6))

        async def put(vals: list[int]) -> None:
            await q.enqueue_many(elems(vals))
            calls[-1] = (vals, True)

        async def get() -> None:
            how = rng.choice(["one", "many", "big", "burst"])
            if how == "one":
                out.extend(values(await q.dequeue()))
            elif how == "big":
                out.extend(values(await q.dequeue_many(8)))
            elif how == "burst":
                out.extend(values(await q.dequeue_burst(rng.randint(0, 4))))
            else:  # 0, 1, and the capacity drawn too
                out.extend(values(await q.dequeue_many(rng.choice([0, 1, 2, 3, 6]))))

        for i in range(150):
            vals = [next(counter) for _ in range(rng.randint(0, 4))]  # 0: an empty batch
            calls.append((vals, False))
            putter = asyncio.ensure_future(put(vals))
            getter = asyncio.ensure_future(get())
            await asyncio.sleep(rng.choice(DELAYS[:-1]))
            for task in (putter, getter) if i % 2 else (getter, putter):
                if rng.random() < 0.6:
                    task.cancel()
            for task in (putter, getter):
                await asyncio.wait([task], timeout=0.02)
                task.cancel()  # (no-op when done) a call that must wait gives up
                try:
                    await task
                except asyncio.CancelledError:
                    stats["cancelled"] += 1
            try:
                await within(rng.choice(DELAYS[:-1]), get())
            except asyncio.TimeoutError:
                stats["timeout"] += 1
        await q.aclose()
        while True:
            try:
                out.extend(values(await q.dequeue_up_to(10)))
            except aqueue.OutOfRangeError:
                break
    verify(calls, out)
    assert payload_keys(redis_server, qname) == []
    assert stats["cancelled"] > 20
    assert stats["timeout"] > 5


ZERO_CALLS = ["enqueue_many", "dequeue_many", "dequeue_up_to", "dequeue_burst", "insert_many"]


async def _zero(q: Any, t: Any, call: str) -> Any:
    """The operation ``call`` with a count of 0 (an empty batch)."""
    if call == "enqueue_many":
        return await q.enqueue_many(np.empty((0, 2), np.int64))
    if call == "insert_many":
        return await t.insert_many(np.empty((0, 2), np.int64))
    return await getattr(q, call)(0)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
@pytest.mark.parametrize("call", ZERO_CALLS)
async def test_a_count_of_zero_checkpoints_while_another_waits(
    url: str, qname: str, kind: str, call: str
) -> None:
    """In an already-cancelled scope, an operation with a count of 0 raises the
    cancellation (it checkpoints once, as every async operation does), also while
    another dequeue (insert) of the same queue (table) waits, and changes nothing."""
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await open_q(srv, kind, qname)
        t = await srv.replay_table(qname + "-t", 4, np.int64, (2,))
        async with anyio.create_task_group() as tg:
            tg.start_soon(q.dequeue_many, 2)  # parked: the queue is empty

            async def parked() -> bool:
                return (await q.statistics()).tasks_waiting_dequeue == 1

            while not await parked():  # noqa: ASYNC110 - the state lives on the server
                await anyio.sleep(0.01)
            with anyio.CancelScope() as scope:
                scope.cancel()
                await _zero(q, t, call)
            assert scope.cancelled_caught, f"{call} with 0 completed in a cancelled scope"
            tg.cancel_scope.cancel()
        assert (await q.statistics()).size == 0
        assert (await t.statistics()).inserts == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("call", ZERO_CALLS)
async def test_a_count_of_zero_obeys_a_pending_native_cancel(
    url: str, qname: str, call: str
) -> None:
    """A pending ``task.cancel()`` (native asyncio) is delivered by an operation with a
    count of 0, which then changes nothing."""
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await open_q(srv, "fifo", qname)
        t = await srv.replay_table(qname + "-t", 4, np.int64, (2,))

        async def cancelled_then_zero() -> None:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # pending: delivered at the next await
            await _zero(q, t, call)

        with pytest.raises(asyncio.CancelledError):
            await asyncio.ensure_future(cancelled_then_zero())
        assert (await q.statistics()).size == 0
        assert (await t.statistics()).inserts == 0
