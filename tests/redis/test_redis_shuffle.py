"""RedisRandomShuffleQueue: the min_after_dequeue floor, seeded reproducibility (a
golden sequence) and uniform takes (chi-square with a fixed seed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import until

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.1) as server:
        yield server


def ints(batch: Any) -> list[int]:
    return [int(v) for v in np.asarray(batch)]


async def test_floor_blocks_until_close(srv: Any, qname: str) -> None:
    """TF testBlockingDequeueFromClosedQueue: with min 2 and 4 elements, two dequeues
    succeed, the third waits; close lifts the floor."""
    q = await srv.random_shuffle_queue(qname, 10, 2, np.int64, (), seed=1)
    await q.enqueue_many(np.arange(4))
    got = [int(await q.dequeue()) for _ in range(2)]
    blocked: list[int] = []

    async def third() -> None:
        blocked.append(int(await q.dequeue()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(third)
        await until(lambda: _waiters(q))
        assert blocked == []
        assert await q.size() == 2
        await q.aclose()
    got += blocked
    got += [int(await q.dequeue())]
    assert sorted(got) == [0, 1, 2, 3]
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue()


async def _waiters(q: Any) -> bool:
    return bool((await q.statistics()).tasks_waiting_dequeue >= 1)


async def test_floor_never_violated_while_open(srv: Any, qname: str) -> None:
    """Concurrent producers and consumers: while open, a take never leaves fewer than
    min_after_dequeue elements behind (sampled size never drops below it once reached)."""
    mad = 20
    q = await srv.random_shuffle_queue(qname, 40, mad, np.int64, (), seed=2)
    sizes: list[int] = []
    out: list[int] = []
    done = anyio.Event()

    async def produce() -> None:
        for i in range(0, 200, 5):
            await q.enqueue_many(np.arange(i, i + 5))
        done.set()

    async def consume(k: int) -> None:
        while not done.is_set():
            with anyio.move_on_after(0.3):
                out.extend(ints(await q.dequeue_many(k)))

    async def watch() -> None:
        await until(lambda: _at_least(q, mad))
        while not done.is_set():
            sizes.append(await q.size())

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        tg.start_soon(consume, 3)
        tg.start_soon(consume, 1)
        tg.start_soon(watch)
    assert sizes
    assert min(sizes) >= mad
    assert await q.size() >= mad
    await q.aclose()
    out += ints(await q.dequeue_up_to(200))
    assert sorted(out) == list(range(200))


async def _at_least(q: Any, n: int) -> bool:
    return bool(await q.size() >= n)


async def _sequence(srv: Any, name: str, seed: int) -> list[int]:
    q = await srv.random_shuffle_queue(name, 100, 0, np.int64, (), seed=seed)
    await q.enqueue_many(np.arange(20))
    got = ints(await q.dequeue_many(5))
    got += [int(await q.dequeue()) for _ in range(3)]
    await q.enqueue_many(np.arange(20, 25))
    got += ints(await q.dequeue_many(17))
    return got


GOLDEN = [12, 5, 0, 17, 13, 15, 8, 9, 19, 22, 20, 16, 11, 21, 14, 1, 7, 4, 2, 6, 23, 10, 18, 24, 3]


def _model(seed: int) -> list[int]:
    """What the server computes: per op, n uniform floats from the queue's seeded
    Generator, each picking slot floor(r * size) with swap-remove."""
    rng = np.random.default_rng(seed)
    pool = list(range(20))
    out: list[int] = []

    def take(n: int) -> None:
        for r in rng.random(n):
            i = int(r * len(pool))
            out.append(pool[i])
            pool[i] = pool[-1]
            pool.pop()

    take(5)
    for _ in range(3):
        take(1)
    pool.extend(range(20, 25))
    take(17)
    return out


async def test_seeded_order_is_pinned(srv: Any, qname: str) -> None:
    """A seeded single consumer sees a pinned order (golden), and the same seed gives
    the same order on a fresh queue; another seed another order."""
    a = await _sequence(srv, qname + "a", 0)
    b = await _sequence(srv, qname + "b", 0)
    c = await _sequence(srv, qname + "c", 1)
    assert a == b
    assert a != c
    assert sorted(a) == list(range(25))
    assert a == GOLDEN
    assert _model(0) == GOLDEN


async def test_takes_are_uniform(srv: Any, qname: str) -> None:
    """Every value is equally likely at every position of a full take (chi-square on a
    10x10 table, fixed seed: deterministic)."""
    q = await srv.random_shuffle_queue(qname, 10, 0, np.int64, (), seed=1234)
    table = np.zeros((10, 10))
    trials = 300
    for _ in range(trials):
        await q.enqueue_many(np.arange(10))
        for pos, v in enumerate(ints(await q.dequeue_many(10))):
            table[pos, v] += 1
    expected = trials / 10
    chi2 = float(((table - expected) ** 2 / expected).sum())
    assert chi2 < 124.8  # df = 81, p = 0.001
    first = table[0]
    assert float(((first - expected) ** 2 / expected).sum()) < 27.88  # df = 9, p = 0.001
