"""A trajectory table's thread view (``table.blocking()``): a learner thread sampling,
updating priorities and iterating ``samples(n)`` while a task's writer appends; a
thread's wait ended by ``close()`` or its timeout; the refusal to block an event loop;
and bad arguments refused as the async calls refuse them, changing nothing. Each is
set against ``aqueue.ReplayTable``'s view, which the trajectory view must match."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest
from support import poll, spawn

import aqueue
from aqueue import TrajectoryTable

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def steps_table(**kw: Any) -> TrajectoryTable[np.ndarray]:
    return TrajectoryTable(kw.pop("max_steps", 400), np.int64, (), length=3, seed=1, **kw)


async def test_a_learner_thread_samples_while_a_task_writer_appends() -> None:
    """Under a sample-to-insert ratio the writer cannot run more than the limiter's band
    ahead of the learner thread, so the two interleave: every window the thread
    samples is three consecutive steps, every key it updates is found, and its
    ``samples(4)`` iterator ends once the table is closed and cannot serve more."""
    limiter = aqueue.SampleToInsertRatio(1.0, 4, 8.0)  # the band: [-4, 12]
    t = steps_table(sampler=aqueue.Prioritized(1.0), rate_limiter=limiter)
    view = t.blocking()
    assert view.table is t

    given: dict[int, float] = {}  # each key's last priority from the thread

    def learner() -> int:
        calls = 0
        for s in view.samples(4, timeout=30):
            for row in s.data.tolist():
                assert row == [row[0], row[0] + 1, row[0] + 2]
            priorities = np.arange(1.0, 5.0) + calls
            found = view.update_priorities(s.keys, priorities, timeout=30)
            assert found.tolist() == [True] * 4
            given.update(zip(s.keys.tolist(), priorities.tolist(), strict=True))
            calls += 1
        return calls

    async with anyio.create_task_group() as tg:
        thread = spawn(tg, anyio.to_thread.run_sync, learner)
        async with t.writer() as w:
            for i in range(200):
                await w.append(i)
        t.close()
    calls = thread.result()
    st = view.statistics()
    assert isinstance(st, aqueue.TrajectoryStatistics)
    assert (st.inserts, st.steps_appended) == (198, 200)
    assert st.samples == 4 * calls
    assert 198 - 12 <= st.samples <= 198 + 4  # the learner sampled through the whole run
    assert view.size() == t.size() == 198
    snap = t.snapshot().items
    held = dict(zip(snap.keys.tolist(), snap.priorities.tolist(), strict=True))
    assert given
    assert {k: held[k] for k in given} == given


async def _wait_then_close(table: Any, call: Callable[[], Any]) -> Any:
    """Run ``call`` in a thread, close ``table`` once it waits to sample, and return its
    Op (finished)."""
    async with anyio.create_task_group() as tg:
        op = spawn(tg, anyio.to_thread.run_sync, call)
        await poll(lambda: table.statistics().samples_waiting == 1)
        table.close()
    return op


async def test_close_ends_a_thread_waiting_to_sample_as_for_a_replay_table() -> None:
    """A thread waiting in ``sample`` raises OutOfRangeError at ``close()``, exactly as a
    ReplayTable view's does; a thread in ``samples(n)`` sees its iterator end; nothing
    was sampled."""
    errors = []
    for table in (steps_table(), aqueue.ReplayTable(8, np.int64, ())):
        view = table.blocking()
        op = await _wait_then_close(table, lambda v=view: v.sample(2))
        assert op.finished
        assert op.error is not None
        errors.append(op.error)
        assert table.statistics().samples == 0
    assert [type(e) for e in errors] == [aqueue.OutOfRangeError] * 2
    t = steps_table()
    view = t.blocking()
    op = await _wait_then_close(t, lambda: list(view.samples(2)))
    assert op.result() == []
    st = t.statistics()
    assert (st.samples, st.samples_waiting) == (0, 0)


async def test_a_thread_sample_times_out_changing_nothing() -> None:
    """``timeout=`` ends a thread's wait with TimeoutError naming the view and the
    table, and the table is as before (no sample counted, nobody left waiting)."""
    t = steps_table(name="frames", rate_limiter=aqueue.MinSize(3))
    async with t.writer() as w:
        await w.append_many(np.arange(4))  # 2 windows: too few for MinSize(3)
    before = t.statistics()
    view = t.blocking()
    with pytest.raises(TimeoutError) as got:
        await anyio.to_thread.run_sync(lambda: view.sample(1, timeout=0.01))
    assert str(got.value) == (
        "BlockingTrajectoryTable.sample() on trajectory table 'frames' timed out after 0.01 s"
    )
    after = t.statistics()
    assert after.sample_wait_s > 0  # (the wait is counted: the only change)
    assert dataclasses.replace(after, sample_wait_s=before.sample_wait_s) == before


async def test_the_view_refuses_the_event_loop_thread_as_a_replay_table_view() -> None:
    """``sample`` and ``samples`` raise RuntimeError on the loop's thread with the
    ReplayTable view's message (the names aside) and change nothing; the calls that
    never wait work there."""
    t = steps_table(name="frames")
    async with t.writer() as w:
        keys = await w.append_many(np.arange(5))
    r = aqueue.ReplayTable(4, np.int64, (), name="frames")
    for what, call in (("sample", lambda v: v.sample(1)), ("samples", lambda v: v.samples(1))):
        messages = []
        for table in (t, r):
            with pytest.raises(RuntimeError, match="event-loop thread") as got:
                call(table.blocking())
            messages.append(str(got.value))
        assert messages[0] == messages[1].replace(
            "BlockingReplayTable", "BlockingTrajectoryTable"
        ).replace("replay table", "trajectory table")
        assert f"BlockingTrajectoryTable.{what}() of trajectory table 'frames'" in messages[0]
    view = t.blocking()
    assert t.statistics().samples == 0
    assert view.update_priorities(keys, [2.0, 3.0, 4.0]).tolist() == [True] * 3
    assert view.delete([int(keys[0]), 99]).tolist() == [True, False]
    assert view.statistics().size == view.size() == 2
    assert repr(view) == f"<BlockingTrajectoryTable of {t!r}>"


BAD_CALLS: list[tuple[str, tuple[Any, ...]]] = [
    ("sample", (0,)),
    ("sample", (2.0,)),
    ("sample", ("4",)),
    ("sample", (10**9,)),
    ("update_priorities", ([0], [-1.0])),
    ("update_priorities", ([0], [float("nan")])),
    ("update_priorities", ([0, 1], [1.0])),
    ("update_priorities", ([[0]], [1.0])),
    ("update_priorities", (["a"], [1.0])),
    ("delete", ([[0]],)),
    ("delete", (["a"],)),
]


@pytest.mark.parametrize(("what", "args"), BAD_CALLS, ids=[f"{w}{a}" for w, a in BAD_CALLS])
async def test_bad_arguments_are_refused_as_the_async_calls_refuse_them(
    what: str, args: tuple[Any, ...]
) -> None:
    """Each bad call raises the async call's ElementSpecError, word for word, from a
    thread; the table is as before."""
    t = steps_table(max_steps=8)
    async with t.writer() as w:
        await w.append_many(np.arange(5))
    before = t.snapshot().items.priorities.tolist(), t.statistics()
    with pytest.raises(aqueue.ElementSpecError) as by_task:
        await getattr(t, what)(*args)
    view = t.blocking()
    with pytest.raises(aqueue.ElementSpecError) as by_thread:
        await anyio.to_thread.run_sync(lambda: getattr(view, what)(*args))
    assert str(by_thread.value) == str(by_task.value)
    if what == "sample":  # samples(n) checks n at once
        with pytest.raises(aqueue.ElementSpecError) as by_iter:
            await anyio.to_thread.run_sync(lambda: view.samples(*args))
        assert str(by_iter.value) == str(by_task.value)
    assert (t.snapshot().items.priorities.tolist(), t.statistics()) == before


async def test_a_bad_timeout_is_refused_before_anything_changes() -> None:
    """A negative or non-number timeout is refused (naming the table's call) before the
    step, by every method of the view."""
    t = steps_table(name="frames")
    async with t.writer() as w:
        keys = await w.append_many(np.arange(5))
    before = t.statistics()
    view = t.blocking()
    calls = {
        "sample": lambda: view.sample(1, timeout=-1.0),
        "samples": lambda: view.samples(1, timeout="1"),
        "update_priorities": lambda: view.update_priorities(keys, [1.0] * 3, timeout=-1.0),
        "delete": lambda: view.delete(keys, timeout=-1.0),
    }
    for what, call in calls.items():
        with pytest.raises(aqueue.ElementSpecError, match=f"TrajectoryTable 'frames'.{what}"):
            await anyio.to_thread.run_sync(call)
    assert t.statistics() == before
