"""A Redis table's inserts and samples cancelled or timed out while they wait, by anyio
scopes (asyncio and trio) and by native asyncio cancellation: nothing on the server
changed (every key of the table compared, but the wait clocks), no waiter stays
registered, and the table serves the next operation."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import RedisProc, check_table, table_state, until

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def items(vs: Any) -> np.ndarray:
    arr = np.asarray(list(vs), dtype=np.float32)
    return np.stack([arr, arr + 0.5, -arr], axis=1)


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.1) as server:
        yield server


async def blocked(srv: aqueue.redis.RedisServer, op: str) -> Any:
    """A table on which ``op`` waits: inserts wait for a sample (the limiter admits 2
    items ahead), a sample(2) waits for a third item (MinSize(3))."""
    name = f"rc-{uuid.uuid4().hex[:12]}"
    if op == "sample":
        t = await srv.replay_table(name, 8, np.float32, (3,), rate_limiter=aqueue.MinSize(3))
        await t.insert_many(items([0, 1]))
        return t
    limiter = aqueue.RateLimiter(1.0, 1, -8.0, 2.0)
    t = await srv.replay_table(
        name, 8, np.float32, (3,), sampler=aqueue.Prioritized(0.5), rate_limiter=limiter
    )
    await t.insert_many(items([0, 1]), priorities=[1.0, 2.0])
    return t


CALLS: dict[str, Callable[[Any], Awaitable[Any]]] = {
    "insert": lambda t: t.insert(items([7])[0]),
    "insert_many": lambda t: t.insert_many(items([7])),
    "enqueue_many": lambda t: t.enqueue_many(items([7, 8])),
    "sample": lambda t: t.sample(2),
}


async def waiting(t: Any) -> bool:
    st = await t.statistics()
    return bool(st.inserts_waiting or st.samples_waiting)


@pytest.mark.parametrize("op", sorted(CALLS))
async def test_cancelled_or_timed_out_while_waiting_changes_nothing(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc, op: str
) -> None:
    t = await blocked(srv, op)
    with redis_server.client() as c:
        before = table_state(c, t.name)
    async with anyio.create_task_group() as tg:
        tg.start_soon(CALLS[op], t)
        await until(lambda: waiting(t))
        tg.cancel_scope.cancel()
    with anyio.move_on_after(0.05) as scope:
        await CALLS[op](t)
    assert scope.cancelled_caught
    with redis_server.client() as c:
        assert table_state(c, t.name) == before
        assert check_table(c, t.name) == []
    assert not await waiting(t)
    if op == "sample":
        await t.insert(items([9])[0])
    else:
        await t.sample(2)  # (room for two more)
    with anyio.fail_after(10):
        await CALLS[op](t)  # the table works on


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("how", ["task.cancel", "wait_for"])
@pytest.mark.parametrize("op", sorted(CALLS))
async def test_native_asyncio_cancellation_changes_nothing(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc, op: str, how: str
) -> None:
    t = await blocked(srv, op)
    with redis_server.client() as c:
        before = table_state(c, t.name)
    if how == "task.cancel":
        task = asyncio.ensure_future(CALLS[op](t))
        await until(lambda: waiting(t))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(CALLS[op](t), 0.05)
    with redis_server.client() as c:
        assert table_state(c, t.name) == before
    assert not await waiting(t)
