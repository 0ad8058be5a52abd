"""A Redis trajectory table's appends and samples waiting for the rate limiter, closed
under them, cancelled before they send and while they wait (anyio scopes on asyncio and
trio, native asyncio ``task.cancel`` and ``wait_for``), and bad input: nothing on the
server changes (every key of the table compared, but the wait clocks), no waiter stays
registered, and the table serves the next operation."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import RedisProc, table_state, until
from traj_util import check_trajectory

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.1) as server:
        yield server


def step(v: int) -> dict[str, Any]:
    return {"obs": np.full((2,), v, np.float32), "t": np.int64(v)}


async def blocked(srv: aqueue.redis.RedisServer, op: str) -> tuple[Any, Any]:
    """A table and a writer on which ``op`` waits: an append completing a window waits
    for a sample (the limiter admits 2 windows ahead); a sample(2) waits for a third
    window (MinSize(3))."""
    name = f"tc-{uuid.uuid4().hex[:12]}"
    if op == "sample":
        limiter: aqueue.RateLimiter = aqueue.MinSize(3)
    else:
        limiter = aqueue.RateLimiter(1.0, 1, -8.0, 2.0)
    t = await srv.trajectory_table(
        name, 16, (np.float32, np.int64), ((2,), ()), ("obs", "t"), length=2, rate_limiter=limiter
    )
    w = t.writer()
    await w.append_many({"obs": np.zeros((3, 2), np.float32), "t": np.arange(3)})
    return t, w


CALLS: dict[str, Callable[[Any, Any], Awaitable[Any]]] = {
    "append": lambda t, w: w.append(step(7)),
    "append_many": lambda t, w: w.append_many(
        {"obs": np.ones((2, 2), np.float32), "t": np.array([7, 8])}
    ),
    "sample": lambda t, w: t.sample(2),
}


async def waiting(t: Any) -> bool:
    st = await t.statistics()
    return bool(st.inserts_waiting or st.samples_waiting)


async def unblock(t: Any, w: Any, op: str) -> None:
    if op == "sample":
        await w.append(step(9))
    else:
        await t.sample(2)


@pytest.mark.parametrize("op", sorted(CALLS))
async def test_cancelled_before_sending_or_while_waiting_changes_nothing(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc, op: str
) -> None:
    t, w = await blocked(srv, op)
    with redis_server.client() as c:
        before = table_state(c, t.name)
    with anyio.CancelScope() as scope:  # cancelled at the first await: nothing sent
        scope.cancel()
        await CALLS[op](t, w)
    async with anyio.create_task_group() as tg:  # cancelled while it waits
        tg.start_soon(CALLS[op], t, w)
        await until(lambda: waiting(t))
        tg.cancel_scope.cancel()
    with anyio.move_on_after(0.05) as timed:  # timed out while it waits
        await CALLS[op](t, w)
    assert timed.cancelled_caught
    with redis_server.client() as c:
        assert table_state(c, t.name) == before
        assert check_trajectory(c, t.name) == []
    assert not await waiting(t)
    await unblock(t, w, op)
    with anyio.fail_after(10):
        await CALLS[op](t, w)  # the table and the writer work on
    with redis_server.client() as c:
        assert check_trajectory(c, t.name) == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("how", ["at-once", "task.cancel", "wait_for"])
@pytest.mark.parametrize("op", sorted(CALLS))
async def test_native_asyncio_cancellation_changes_nothing(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc, op: str, how: str
) -> None:
    t, w = await blocked(srv, op)
    with redis_server.client() as c:
        before = table_state(c, t.name)
    if how == "wait_for":
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(CALLS[op](t, w), 0.05)
    else:
        task = asyncio.ensure_future(CALLS[op](t, w))
        if how == "task.cancel":
            await until(lambda: waiting(t))
        else:
            await asyncio.sleep(0)  # (it runs to its first await, and is cancelled there)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    with redis_server.client() as c:
        assert table_state(c, t.name) == before
    assert not await waiting(t)
    await unblock(t, w, op)
    with anyio.fail_after(10):
        await CALLS[op](t, w)


async def test_an_append_waits_for_the_limiter_and_closing_fails_it(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc
) -> None:
    """A step completing no window never waits; one completing a window waits while the
    limiter holds inserts, goes on after a sample, and fails (writing nothing) when the
    table is closed under it; end_episode and the writer's close still work."""
    t, w = await blocked(srv, "append")
    other = t.writer()
    assert (await other.append(step(1))).tolist() == []  # (completes no window)
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.append, step(7))
        await until(lambda: waiting(t))
        await t.sample(1)  # (room for one window more)
    assert (await t.statistics()).inserts == 3
    with redis_server.client() as c:
        before = table_state(c, t.name)
    failed: list[BaseException] = []

    async def doomed() -> None:
        try:
            await w.append(step(8))
        except aqueue.QueueClosedError as e:
            failed.append(e)

    async with anyio.create_task_group() as tg:
        tg.start_soon(doomed)
        await until(lambda: waiting(t))
        await t.aclose()
    assert "closed while this append waited" in str(failed[0])
    with redis_server.client() as c:
        after = table_state(c, t.name)
        after[f"aq:{{{t.name}}}:meta"].pop(b"closed")
        before[f"aq:{{{t.name}}}:meta"].pop(b"closed")
        assert after == before
    with pytest.raises(aqueue.QueueClosedError, match="is closed"):
        await other.append(step(2))
    await w.end_episode()
    await w.aclose()
    await other.aclose()
    stats = await t.statistics()
    assert stats.closed
    assert stats.writers == 0
    assert stats.steps_held == 4  # (the items')
    with pytest.raises(aqueue.QueueClosedError, match="needs an open writer"):
        await w.append(step(3))
    with redis_server.client() as c:
        assert check_trajectory(c, t.name) == []


BAD = [
    ({"obs": np.zeros((3,), np.float32), "t": np.int64(0)}, "shape"),
    ({"obs": np.zeros((2,), np.float32), "t": np.float64(0.5)}, "dtype|int64"),
    ({"obs": np.zeros((2,), np.float32), "x": np.int64(0)}, "names|'t'"),
    ((np.zeros((2,), np.float32), np.int64(0)), "dict with keys"),
]


@pytest.mark.parametrize(("bad", "match"), BAD)
async def test_bad_steps_are_refused_by_name_and_change_nothing(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc, bad: Any, match: str
) -> None:
    t, w = await blocked(srv, "sample")
    with redis_server.client() as c:
        before = table_state(c, t.name)
    with pytest.raises(aqueue.ElementSpecError, match=match):
        await w.append(bad)
    with pytest.raises(aqueue.ElementSpecError, match="priority"):
        await w.append(step(1), priority=-1.0)
    with pytest.raises(aqueue.ElementSpecError):
        await w.append_many({"obs": np.zeros((2, 3), np.float32), "t": np.arange(2)})
    with pytest.raises(aqueue.ElementSpecError):
        await t.sample(-1)
    with pytest.raises(TypeError, match="writer"):
        await t.insert(np.zeros(2, np.int64))
    with redis_server.client() as c:
        assert table_state(c, t.name) == before
    assert (await w.append(step(3))).tolist() == [2]  # (the writer goes on where it was)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"length": 0}, "length"),
        ({"length": 9}, "length must be <= max_steps"),
        ({"stride": 0}, "stride"),
        ({"max_steps": 0}, "max_steps"),
        ({"dtypes": object}, "dtype"),
    ],
)
async def test_bad_settings_are_refused_by_name(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc, kwargs: dict[str, Any], match: str
) -> None:
    name = f"tc-{uuid.uuid4().hex[:12]}"
    args: dict[str, Any] = {"max_steps": 8, "dtypes": np.float32, "shapes": (2,), "length": 2}
    with pytest.raises(aqueue.ElementSpecError, match=match):
        await srv.trajectory_table(name, **{**args, **kwargs})
    with redis_server.client() as c:
        assert table_state(c, name) == {}
