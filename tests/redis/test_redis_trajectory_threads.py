"""The thread views of a Redis trajectory table: the table's (``table.blocking()``) and a
writer's (``w.blocking()``). A writer thread appends while a learner thread samples
under a sample-to-insert ratio; a thread's append waits while the limiter holds
inserts and ends, writing nothing, on its timeout or when the table is closed under
it; a thread's sample ends on ``close()``; the views refuse an event loop's thread
with the in-process views' messages and refuse bad arguments as the async calls do,
sending nothing."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pytest
from redis_util import RedisProc, table_state, until
from support import spawn
from traj_util import check_trajectory, whole_windows

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.1) as server:
        yield server


async def steps_table(srv: aqueue.redis.RedisServer, **kw: Any) -> Any:
    name = kw.pop("name", f"tt-{uuid.uuid4().hex[:12]}")
    return await srv.trajectory_table(name, kw.pop("max_steps", 400), np.int64, (), length=3, **kw)


def state(redis_server: RedisProc, name: str) -> dict[str, Any]:
    """Every key of the table but the wait clocks (``table_state``)."""
    with redis_server.client() as c:
        return table_state(c, name)


async def test_a_writer_thread_and_a_learner_thread_share_the_limiter(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc
) -> None:
    """Under SampleToInsertRatio(1.0, 4, 8.0) the writer thread cannot run more than the
    band ahead of the learner thread: every statistics snapshot the learner takes keeps
    ``inserts - samples`` in [-4, 12]; every window is three consecutive steps of one
    episode; every key updated is found; ``samples(4)`` ends once the table is closed
    and cannot serve more."""
    t = await steps_table(
        srv, sampler=aqueue.Prioritized(1.0), rate_limiter=aqueue.SampleToInsertRatio(1.0, 4, 8.0)
    )
    view = t.blocking()
    assert view.table is t
    w = t.writer()
    wv = w.blocking()
    assert wv.writer is w
    diffs: list[int] = []

    def actor() -> int:
        keys = 0
        for episode in range(4):
            for pos in range(40):
                keys += len(wv.append(np.int64(episode * 1000 + pos), priority=1.0, timeout=30))
            wv.end_episode()
        wv.close()
        return keys

    def learner() -> int:
        calls = 0
        for s in view.samples(4, timeout=30):
            whole_windows(s.data, 3, 1)
            assert view.update_priorities(s.keys, np.arange(1.0, 5.0)).tolist() == [True] * 4
            st = view.statistics()
            diffs.append(st.inserts - st.samples)
            calls += 1
        return calls

    async with anyio.create_task_group() as tg:
        learning = spawn(tg, anyio.to_thread.run_sync, learner)
        assert await anyio.to_thread.run_sync(actor) == 4 * 38
        await t.aclose()
    calls = learning.result()
    st = await t.statistics()
    assert isinstance(view.statistics(), aqueue.TrajectoryStatistics)
    assert (st.inserts, st.steps_appended, st.samples, st.writers) == (152, 160, 4 * calls, 0)
    assert 152 - 12 <= st.samples <= 152 + 4  # the learner sampled through the whole run
    assert diffs
    assert all(-4 <= d <= 12 for d in diffs), (min(diffs), max(diffs))
    assert view.size() == st.size == 152
    with redis_server.client() as c:
        assert check_trajectory(c, t.name) == []


async def test_a_thread_append_waits_then_times_out_or_is_failed_by_close(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc
) -> None:
    """A thread's append that completes a window the limiter holds back waits: on its
    ``timeout`` it raises TimeoutError naming the view and the writer, on ``close()``
    QueueClosedError; either way nothing was written and no waiter is left; a sample
    lets the next one through; a task's call meanwhile is refused (one call at a
    time)."""
    t = await steps_table(srv, rate_limiter=aqueue.RateLimiter(1.0, 1, -8.0, 2.0))
    w = t.writer()
    wv = w.blocking()
    assert (await anyio.to_thread.run_sync(lambda: wv.append_many(np.arange(4)))).tolist() == [0, 1]
    before = state(redis_server, t.name)
    with pytest.raises(TimeoutError) as got:
        await anyio.to_thread.run_sync(lambda: wv.append(np.int64(4), timeout=0.2))
    assert str(got.value) == (
        f"BlockingTrajectoryWriter.append() of writer 0 of trajectory table '{t.name}' "
        "timed out after 0.2 s"
    )
    assert state(redis_server, t.name) == before
    assert (await t.statistics()).inserts_waiting == 0
    async with anyio.create_task_group() as tg:
        waiter = spawn(tg, anyio.to_thread.run_sync, lambda: wv.append(np.int64(4)))
        await until(lambda: _waiting(t))
        with pytest.raises(RuntimeError, match="in flight"):
            await w.append(np.int64(5))
        await t.sample(1)  # (room for one window more)
    assert waiter.result().tolist() == [2]
    before = state(redis_server, t.name)
    async with anyio.create_task_group() as tg:
        doomed = spawn(tg, anyio.to_thread.run_sync, lambda: wv.append_many(np.arange(5, 7)))
        await until(lambda: _waiting(t))
        await anyio.to_thread.run_sync(t.blocking().close)
    assert isinstance(doomed.error, aqueue.QueueClosedError)
    assert "closed while this append waited" in str(doomed.error)
    after = state(redis_server, t.name)
    for s in (before, after):
        s[f"aq:{{{t.name}}}:meta"].pop(b"closed")
    assert after == before
    assert not await _waiting(t)
    await anyio.to_thread.run_sync(wv.end_episode)  # (works on a closed table)
    await anyio.to_thread.run_sync(wv.close)
    with pytest.raises(aqueue.QueueClosedError, match="needs an open writer"):
        await anyio.to_thread.run_sync(lambda: wv.append(np.int64(9)))
    assert (await t.statistics()).writers == 0
    with redis_server.client() as c:
        assert check_trajectory(c, t.name) == []


async def _waiting(t: Any) -> bool:
    st = await t.statistics()
    return bool(st.inserts_waiting or st.samples_waiting)


async def test_close_ends_a_thread_waiting_to_sample(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc
) -> None:
    """A thread waiting in ``sample`` raises OutOfRangeError at ``close()``, a thread in
    ``samples(n)`` sees its iterator end, a ``timeout`` raises TimeoutError naming the
    view and the table; nothing was sampled."""
    t = await steps_table(srv, name=f"frames-{uuid.uuid4().hex[:8]}")
    view = t.blocking()
    with pytest.raises(TimeoutError) as got:
        await anyio.to_thread.run_sync(lambda: view.sample(1, timeout=0.05))
    assert str(got.value) == (
        f"BlockingTrajectoryTable.sample() on trajectory table '{t.name}' timed out after 0.05 s"
    )
    async with anyio.create_task_group() as tg:
        one = spawn(tg, anyio.to_thread.run_sync, lambda: view.sample(2))
        every = spawn(tg, anyio.to_thread.run_sync, lambda: list(view.samples(2)))
        await until(lambda: _two_waiting(t))
        view.close()
    assert isinstance(one.error, aqueue.OutOfRangeError)
    assert every.result() == []
    st = await t.statistics()
    assert (st.samples, st.samples_waiting, st.closed) == (0, 0, True)


async def _two_waiting(t: Any) -> bool:
    return bool((await t.statistics()).samples_waiting == 2)


async def test_the_views_refuse_the_event_loop_thread_as_in_process(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc
) -> None:
    """``sample``, ``samples``, ``append`` and ``append_many`` raise RuntimeError on the
    loop's thread, with the in-process views' messages (the tables' names aside, and
    the writer's id), and send nothing; the calls that never wait work there."""
    name = f"frames-{uuid.uuid4().hex[:8]}"
    t = await steps_table(srv, name=name)
    w = t.writer()
    keys = await w.append_many(np.arange(5))
    local = aqueue.TrajectoryTable(400, np.int64, (), length=3, name=name)
    lw = local.writer()
    before = state(redis_server, t.name)
    calls = {
        "sample": lambda table, writer: table.blocking().sample(1),
        "samples": lambda table, writer: table.blocking().samples(1),
        "append": lambda table, writer: writer.blocking().append(np.int64(5)),
        "append_many": lambda table, writer: writer.blocking().append_many(np.arange(5, 7)),
    }
    for what, call in calls.items():
        messages = []
        for table, writer in ((t, w), (local, lw)):
            with pytest.raises(RuntimeError, match="event-loop thread") as got:
                call(table, writer)
            messages.append(re.sub(r"writer \d+", "writer N", str(got.value)))
        assert messages[0].removesuffix(" there") == messages[1].removesuffix(" there")
        assert f".{what}() of " in messages[0]
    assert state(redis_server, t.name) == before
    view = t.blocking()
    assert view.update_priorities(keys, [2.0, 3.0, 4.0]).tolist() == [True] * 3
    assert view.delete([int(keys[0]), 99]).tolist() == [True, False]
    assert view.statistics().size == view.size() == 2
    assert repr(view) == f"<BlockingRedisTrajectoryTable of {t!r}>"
    assert repr(w.blocking()) == f"<BlockingRedisTrajectoryWriter of {w!r}>"
    lw.close()


BAD_CALLS: list[tuple[str, tuple[Any, ...]]] = [
    ("sample", (0,)),
    ("sample", ("4",)),
    ("sample", (10**9,)),
    ("update_priorities", ([0], [-1.0])),
    ("update_priorities", ([0, 1], [1.0])),
    ("delete", ([[0]],)),
]
BAD_APPENDS: list[tuple[str, tuple[Any, ...]]] = [
    ("append", (np.zeros(2, np.int64),)),
    ("append", (np.float64(1.0),)),
    ("append", (np.int64(1), -1.0)),
    ("append_many", (np.zeros((2, 2), np.int64),)),
    ("append_many", (np.arange(2), [1.0])),
]


@pytest.mark.parametrize(
    ("what", "args"),
    BAD_CALLS + BAD_APPENDS,
    ids=[f"{w}{a}" for w, a in BAD_CALLS + BAD_APPENDS],
)
async def test_bad_arguments_are_refused_as_the_async_calls_refuse_them(
    srv: aqueue.redis.RedisServer, redis_server: RedisProc, what: str, args: tuple[Any, ...]
) -> None:
    """Each bad call raises the async call's ElementSpecError, word for word, from a
    thread; nothing is sent (every key of the table as before)."""
    t = await steps_table(srv, max_steps=8)
    w = t.writer()
    await w.append_many(np.arange(5))
    obj, view = (w, w.blocking()) if what.startswith("append") else (t, t.blocking())
    before = state(redis_server, t.name)
    with pytest.raises(aqueue.ElementSpecError) as by_task:
        await getattr(obj, what)(*args)
    with pytest.raises(aqueue.ElementSpecError) as by_thread:
        await anyio.to_thread.run_sync(lambda: getattr(view, what)(*args))
    assert str(by_thread.value) == str(by_task.value)
    if what == "sample":  # samples(n) checks n at once
        with pytest.raises(aqueue.ElementSpecError) as by_iter:
            await anyio.to_thread.run_sync(lambda: view.samples(*args))
        assert str(by_iter.value) == str(by_task.value)
    if what.startswith("append"):
        bad_timeout = lambda: w.blocking().append(np.int64(5), timeout=-1)  # noqa: E731
    else:
        bad_timeout = lambda: t.blocking().sample(1, timeout="1")  # noqa: E731
    with pytest.raises(aqueue.ElementSpecError, match="timeout"):
        await anyio.to_thread.run_sync(bad_timeout)
    assert state(redis_server, t.name) == before
