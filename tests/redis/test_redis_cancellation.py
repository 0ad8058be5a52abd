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
    return np.stack([np.array(vals), np.array(vals)], axis=1)


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
                vals = [next(counter) for _ in range(rng.randint(1, 4))]
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
                    elif how == "many":
                        got = values(await q.dequeue_many(rng.randint(1, 3)))
                    elif how == "burst":
                        got = values(await q.dequeue_burst(rng.randint(1, 4)))
                    else:
                        got = values(await q.dequeue_up_to(rng.randint(1, 3)))
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
    assert stats["put cancelled"] > 5
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
                out.extend(values(await q.dequeue_burst(rng.randint(1, 4))))
            else:
                out.extend(values(await q.dequeue_many(rng.randint(1, 3))))

        for i in range(150):
            vals = [next(counter) for _ in range(rng.randint(1, 4))]
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
