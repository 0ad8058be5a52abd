"""The thread view (``table.blocking()``): threads and tasks on one table, wake-ups in
both directions, time-outs that change nothing, close waking blocked threads, one
arrival order for threads and tasks, and the refusal to block an event loop."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import numpy as np
import pytest
from replay_support import SHAPE, MakeTable, counters, item, items, until, values, waiting
from support import poll, spawn

import aqueue

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class Worker:
    """Runs ``fn`` in a thread; ``result()`` joins it and returns or raises."""

    def __init__(self, fn: Any, *args: Any) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True)
        self.thread.start()

    def _run(self, fn: Any, *args: Any) -> None:
        try:
            self.value = fn(*args)
        except BaseException as exc:
            self.error = exc

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def result(self) -> Any:
        self.thread.join(10)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error
        return self.value


async def test_waiting_methods_refuse_the_event_loop_thread(make_table: MakeTable) -> None:
    """insert, insert_many and sample of the view raise RuntimeError on the loop's
    thread; the non-waiting ones work there."""
    t = await make_table(4, np.float32, SHAPE)
    view = t.blocking()
    for call in (
        lambda: view.insert(item(0)),
        lambda: view.insert_many(items([0])),
        lambda: view.sample(1),
    ):
        with pytest.raises(RuntimeError, match="event-loop thread"):
            call()
    assert view.update_priorities([0], [1.0]).tolist() == [False]
    assert view.delete([0]).tolist() == [False]
    assert (await t.statistics()).size == 0
    assert view.table is t


async def test_thread_insert_wakes_a_task_sample_and_back(make_table: MakeTable) -> None:
    """A task waiting to sample is woken by a thread's insert; a thread waiting to
    sample by a task's insert."""
    t = await make_table(8, np.float32, SHAPE, sampler=aqueue.Fifo(), max_times_sampled=1)
    view = t.blocking()
    async with anyio.create_task_group() as tg:
        sample = spawn(tg, t.sample, 1)
        await waiting(t, samples=1)
        await anyio.to_thread.run_sync(view.insert, item(3))
        await poll(lambda: sample.finished)
        assert values(sample.result().data) == [3]
    worker = Worker(view.sample, 2)
    await until(t, lambda st: st.samples_waiting == 1)
    await t.insert_many(items([4, 5]))
    await poll(lambda: worker.done)
    assert values(worker.result().data) == [4, 5]


async def test_thread_insert_waits_for_a_task_sample(make_table: MakeTable) -> None:
    """A thread waiting to insert (held back by the limiter) is let through by a task's
    sample."""
    t = await make_table(8, np.float32, SHAPE, rate_limiter=aqueue.RateLimiter(1.0, 1, -8.0, 1.0))
    view = t.blocking()
    await t.insert(item(0))
    worker = Worker(view.insert_many, items([1]))
    await until(t, lambda st: st.inserts_waiting == 1)
    await t.sample(1)
    await poll(lambda: worker.done)
    assert worker.result().tolist() == [1]


async def test_thread_timeouts_change_nothing(make_table: MakeTable) -> None:
    """A timed-out insert, insert_many or sample raises TimeoutError naming the call and
    the table, and changes nothing."""
    limiter = aqueue.RateLimiter(1.0, 1, -8.0, 2.0)
    t = await make_table(8, np.float32, SHAPE, rate_limiter=limiter, max_times_sampled=1)
    await t.insert_many(items([0, 1]))  # inserts wait for samples; 2 draws are left
    view = t.blocking()
    before = await counters(t)

    def attempts() -> list[str]:
        out = []
        for call in (
            lambda: view.insert(item(2), timeout=0.01),
            lambda: view.insert_many(items([2, 3]), timeout=0.0),
            lambda: view.sample(3, timeout=0.01),
        ):
            try:
                call()
                out.append("returned")
            except TimeoutError as exc:
                out.append(str(exc))
        return out

    got = await anyio.to_thread.run_sync(attempts)
    assert got[0] == (
        f"BlockingReplayTable.insert() on replay table '{t.name}' timed out after 0.01 s"
    )
    assert "insert_many()" in got[1]
    assert "sample()" in got[2]
    assert await counters(t) == before
    st = await t.statistics()
    assert (st.inserts_waiting, st.samples_waiting) == (0, 0)


async def test_close_wakes_blocked_threads(make_table: MakeTable) -> None:
    """Closing the table fails a thread waiting to insert (QueueClosedError) and one
    waiting to sample (OutOfRangeError)."""
    limiter = aqueue.RateLimiter(1.0, 3, -8.0, 2.0)
    t = await make_table(8, np.float32, SHAPE, rate_limiter=limiter, max_times_sampled=2)
    view = t.blocking()
    sampler = Worker(view.sample, 1)
    await until(t, lambda st: st.samples_waiting == 1)
    await t.insert_many(items([0, 1, 2]))
    await poll(lambda: sampler.done)
    inserter = Worker(view.insert, item(3))
    taker = Worker(view.sample, 6)  # 5 draws are left
    await until(t, lambda st: (st.inserts_waiting, st.samples_waiting) == (1, 1))
    view.close()
    await poll(lambda: inserter.done and taker.done)
    with pytest.raises(aqueue.QueueClosedError):
        inserter.result()
    with pytest.raises(aqueue.OutOfRangeError):
        taker.result()
    assert (await t.statistics()).inserts == 3


async def test_threads_and_tasks_share_one_arrival_order(make_table: MakeTable) -> None:
    """A thread's sample that arrived first is served before a task's that arrived
    later, and the other way round."""
    t = await make_table(8, np.float32, SHAPE, sampler=aqueue.Fifo(), max_times_sampled=1)
    view = t.blocking()
    first = Worker(view.sample, 1)
    await until(t, lambda st: st.samples_waiting == 1)
    async with anyio.create_task_group() as tg:
        second = spawn(tg, t.sample, 1)
        await waiting(t, samples=2)
        third = Worker(view.sample, 1)
        await until(t, lambda st: st.samples_waiting == 3)
        await t.insert_many(items([10, 11, 12]))
        await poll(lambda: third.done and second.finished)
    assert values(first.result().data) == [10]
    assert values(second.result().data) == [11]
    assert values(third.result().data) == [12]


async def test_actor_threads_feed_a_task_learner_under_a_ratio(make_table: MakeTable) -> None:
    """Four actor threads insert through the view while a task learns: every item goes
    in once, the learner samples exactly what it asked, the ratio holds."""
    limiter = aqueue.SampleToInsertRatio(2.0, 16, 24.0)
    t = await make_table(10_000, np.float32, SHAPE, rate_limiter=limiter, seed=4)
    view = t.blocking()
    per = 150

    def actor(base: int) -> list[int]:
        return [view.insert(item(base + j), timeout=10) for j in range(per)]

    workers = [Worker(actor, 1000 * a) for a in range(4)]
    # 600 inserts need 600 * 2 - 56 = 1144 samples to get in; then at most 1192 are left
    for _ in range(73):
        s = await t.sample(16)
        assert len(s) == 16
    await poll(lambda: all(w.done for w in workers))
    keys = sorted(k for w in workers for k in w.result())
    assert keys == list(range(4 * per))
    st = await t.statistics()
    assert st.inserts == 4 * per
    assert limiter.min_diff <= st.inserts * 2.0 - st.samples <= limiter.max_diff


def test_a_view_works_before_any_event_loop_and_from_plain_threads() -> None:
    """A table and its view made and used without any event loop, from threads."""
    t = aqueue.ReplayTable(8, np.float32, SHAPE, sampler=aqueue.Fifo())
    view = t.blocking()
    assert view.insert(item(0)) == 0
    assert view.insert_many(items([1, 2]), priorities=[2.0, 3.0]).tolist() == [1, 2]
    assert view.insert_many(items([])).tolist() == []
    s = view.sample(2)
    assert s.keys.tolist() == [0, 0]
    assert view.update_priorities([0, 9], [4.0, 1.0], timeout=1).tolist() == [True, False]
    assert view.delete([0]).tolist() == [True]
    assert view.statistics().size == 2
    with pytest.raises(aqueue.ElementSpecError, match="timeout must be >= 0"):
        view.sample(1, timeout=-1)
    assert repr(view).startswith("<BlockingReplayTable of <ReplayTable 'replay_table'")
