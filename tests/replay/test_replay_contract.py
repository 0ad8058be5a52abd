"""The replay-table contract, one body of tests over every backend (``make_table``).

Keys, element forms, priorities, eviction, max_times_sampled, update and delete with
unknown keys reported, waiting in arrival order, closing, statistics, Reverb's queue
and stack shapes, requests that could never pass, and bad input of every argument
(a clear error, and nothing changed).
"""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest
from replay_support import SHAPE, MakeTable, counters, finished, item, items, values, waiting
from support import settle, spawn

import aqueue

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


async def test_keys_increase_and_are_never_reused(make_table: MakeTable) -> None:
    """insert returns 0, 1, ...; insert_many the next consecutive keys; a key freed by
    eviction or delete is not given again."""
    t = await make_table(3, np.float32, SHAPE)
    assert await t.insert(item(0)) == 0
    assert (await t.insert_many(items([1, 2]))).tolist() == [1, 2]
    await t.delete([1])
    assert (await t.insert_many(items([3, 4, 5]))).tolist() == [3, 4, 5]
    assert await t.insert(item(6)) == 6
    keys = await t.insert_many(items([]))
    assert keys.dtype == np.int64
    assert keys.shape == (0,)


@pytest.mark.parametrize("form", ["bare", "tuple", "dict"])
async def test_sample_returns_the_tables_element_form(make_table: MakeTable, form: str) -> None:
    """One component comes back bare, several as a tuple, named ones as a dict; every
    array of the sample has one entry per draw."""
    if form == "bare":
        t = await make_table(8, np.float32, SHAPE)
        await t.insert_many(items([0, 1, 2]))
    elif form == "tuple":
        t = await make_table(8, (np.float32, np.int64), (SHAPE, ()))
        await t.insert_many((items([0, 1, 2]), np.array([0, 1, 2])))
    else:
        t = await make_table(8, (np.float32, np.int64), (SHAPE, ()), ("obs", "step"))
        await t.insert_many({"obs": items([0, 1, 2]), "step": np.array([0, 1, 2])})
    s = await t.sample(5)
    assert len(s) == 5
    if form == "bare":
        got = values(s.data)
    elif form == "tuple":
        obs, step = s.data
        got = values(obs)
        assert step.dtype == np.int64
        assert step.tolist() == got
    else:
        assert set(s.data) == {"obs", "step"}
        got = values(s.data["obs"])
        assert s.data["step"].tolist() == got
    assert got == s.keys.tolist()  # item v was inserted with key v
    for arr, dtype in (
        (s.keys, np.int64),
        (s.priorities, np.float64),
        (s.probabilities, np.float64),
        (s.times_sampled, np.int64),
    ):
        assert arr.dtype == dtype
        assert arr.shape == (5,)
    assert s.table_size == 3


async def test_default_priority_is_the_largest_held(make_table: MakeTable) -> None:
    """priority=None gives 1.0 in an empty table, else the largest priority held (also
    after the item holding it left)."""
    t = await make_table(8, np.float32, SHAPE, sampler=aqueue.Fifo())
    await t.insert(item(0))  # 1.0
    await t.insert(item(1), priority=5.0)
    await t.insert_many(items([2, 3]))  # 5.0 each
    await t.insert_many(items([4]), priorities=[0.5])
    await t.delete([1, 2, 3])
    await t.insert(item(5))  # the largest left is 1.0 (key 0)
    await t.delete([0, 5])
    await t.insert(item(6))  # 0.5 (key 4)
    await t.delete([4])
    await t.insert(item(7))  # 0.5 (key 6)
    await t.delete([6])
    s = await t.sample(1)
    assert s.keys.tolist() == [7]
    assert s.priorities.tolist() == [0.5]
    await t.delete([7])
    await t.insert(item(8))  # empty again: 1.0
    assert (await t.sample(1)).priorities.tolist() == [1.0]
    await t.update_priorities([8, 8], [9.0, 9.0])  # (a key named twice holds it once)
    await t.insert(item(9), priority=2.0)
    await t.update_priorities([8], [1.0])
    await t.insert(item(10))  # 2.0 (key 9)
    await t.delete([8, 9])
    assert (await t.sample(1)).priorities.tolist() == [2.0]


async def test_fifo_remover_evicts_the_oldest_one_per_insert(make_table: MakeTable) -> None:
    """At max_size each insert evicts the oldest; a batch larger than the table keeps
    its newest items; the counters add up."""
    t = await make_table(4, np.float32, SHAPE, sampler=aqueue.Fifo())
    await t.insert_many(items(range(4)))
    await t.insert(item(4))
    assert (await t.sample(1)).keys.tolist() == [1]
    await t.insert_many(items(range(5, 11)))  # 6 more: 7 through 10 stay
    assert (await t.sample(1)).keys.tolist() == [7]
    st = await t.statistics()
    assert (st.size, st.inserts, st.evictions, st.deletes) == (4, 11, 7, 7)
    assert st.inserts - st.deletes == st.size


async def test_max_times_sampled_items_leave_and_batches_respect_it(make_table: MakeTable) -> None:
    """Items leave after max_times_sampled draws; one batch never draws an item more
    often than it has left; times_sampled counts each draw in order."""
    t = await make_table(10, np.float32, SHAPE, max_times_sampled=2, seed=3)
    await t.insert_many(items(range(4)))
    s = await t.sample(8)  # every draw the table holds
    assert sorted(s.keys.tolist()) == [0, 0, 1, 1, 2, 2, 3, 3]
    for k in range(4):
        assert sorted(s.times_sampled[s.keys == k].tolist()) == [1, 2]
        first, second = np.flatnonzero(s.keys == k)
        assert s.times_sampled[first] == 1
        assert s.times_sampled[second] == 2
    st = await t.statistics()
    assert (st.size, st.samples, st.deletes) == (0, 8, 4)
    await t.insert_many(items(range(4, 7)))
    s = await t.sample(2)
    assert all(c <= 2 for c in np.bincount(s.keys))


async def test_update_priorities_reports_unknown_keys(make_table: MakeTable) -> None:
    """update_priorities returns one bool per key, False for keys not held (evicted,
    deleted, never issued); a key given twice takes its last value."""
    t = await make_table(3, np.float32, SHAPE, sampler=aqueue.MaxHeap())
    await t.insert_many(items(range(4)))  # key 0 evicted
    await t.delete([2])
    found = await t.update_priorities([0, 1, 2, 3, 99, 1], [9.0, 2.0, 9.0, 3.0, 9.0, 4.0])
    assert found.dtype == np.bool_
    assert found.tolist() == [False, True, False, True, False, True]
    s = await t.sample(1)
    assert (s.keys.tolist(), s.priorities.tolist()) == ([1], [4.0])
    assert (await t.update_priorities([], [])).tolist() == []


async def test_update_naming_many_keys_twice_takes_each_ones_last_value(
    make_table: MakeTable,
) -> None:
    """An update that names twenty keys twice each sets each to the value given last,
    counts it as updated at its last mention (heap ties), and holds a largest priority
    named twice once (the default priority follows it down)."""
    t = await make_table(32, np.float32, SHAPE, sampler=aqueue.MaxHeap())
    await t.insert_many(items(range(20)), priorities=[1.0] * 20)
    keys = list(range(20)) + list(range(19, -1, -1))  # key 19 last named first
    found = await t.update_priorities(keys, [50.0] * 20 + [5.0] * 20)
    assert found.tolist() == [True] * 40
    s = await t.sample(1)  # all at 5.0: the tie goes to the one updated longest ago
    assert (s.keys.tolist(), s.priorities.tolist()) == ([19], [5.0])
    given = [99.0 if k == 7 else 6.0 for k in range(20)] * 2
    await t.update_priorities(list(range(20)) * 2, given)
    assert (await t.sample(1)).keys.tolist() == [7]
    await t.update_priorities([7], [0.5])
    assert await t.insert(item(20)) == 20  # the largest held is 6.0 now
    s = await t.sample(1)
    assert (s.keys.tolist(), s.priorities.tolist()) == ([0], [6.0])


async def test_keys_held_through_many_later_inserts_are_found(make_table: MakeTable) -> None:
    """Items that outlive many later inserts (a MinHeap remover keeps the high
    priorities while low ones come and go) are still found by their keys; keys
    evicted since are not."""
    t = await make_table(4, np.float32, SHAPE, remover=aqueue.MinHeap())
    await t.insert_many(items([0, 1]), priorities=[10.0, 10.0])
    for j in range(2, 40):
        await t.insert(item(j), priority=1.0)
    found = await t.update_priorities([0, 1, 38, 39, 2, 16], [20.0] * 6)
    assert found.tolist() == [True, True, True, True, False, False]
    assert (await t.delete([1, 1, 17])).tolist() == [True, False, False]


async def test_keys_are_found_through_evictions_and_the_first_removal_out_of_order(
    make_table: MakeTable,
) -> None:
    """A Fifo table that only evicted (many times its size, so its bookkeeping wrapped
    around) finds every key it holds and none it evicted, before and after an item
    leaves out of order (a delete), and hands back each key's own item."""
    t = await make_table(4, np.float32, SHAPE)
    for j in range(21):
        assert await t.insert(item(j)) == j
    found = await t.update_priorities([16, 17, 18, 19, 20, 21], [1.0] * 6)
    assert found.tolist() == [False, True, True, True, True, False]
    assert (await t.update_priorities([20, 17], [1.0, 1.0])).tolist() == [True, True]
    assert (await t.delete([18])).tolist() == [True]
    assert (await t.insert_many(items([21, 22]))).tolist() == [21, 22]  # evicts 17
    found = await t.update_priorities([17, 18, 19, 20, 21, 22, 23], [2.0] * 7)
    assert found.tolist() == [False, False, True, True, True, True, False]
    for j in range(23, 30):
        await t.insert(item(j))
    assert (await t.update_priorities([25, 26, 29], [1.0] * 3)).tolist() == [False, True, True]
    s = await t.sample(200)
    assert set(s.keys.tolist()) == {26, 27, 28, 29}
    assert values(s.data) == s.keys.tolist()


async def test_a_key_evicted_on_arrival_mid_batch_is_not_held(make_table: MakeTable) -> None:
    """A newcomer evicted on arrival from the middle of a batch (a MinHeap remover,
    room for all but one) is not held; the keys around it are."""
    t = await make_table(4, np.float32, SHAPE, remover=aqueue.MinHeap())
    await t.insert_many(items([0, 1]), priorities=[10.0, 10.0])
    assert (await t.insert_many(items([2, 3, 4]), priorities=[5.0, 0.0, 5.0])).tolist() == [
        2,
        3,
        4,
    ]
    assert (await t.update_priorities([3, 1], [7.0, 10.0])).tolist() == [False, True]
    found = await t.update_priorities([0, 1, 2, 3, 4], [10.0, 10.0, 5.0, 7.0, 5.0])
    assert found.tolist() == [True, True, True, False, True]
    assert (await t.delete([3])).tolist() == [False]
    assert (await t.statistics()).size == 4
    assert (await t.delete([3, 4])).tolist() == [False, True]
    assert sorted((await t.sample(50)).keys.tolist())[-1] == 2


async def test_delete_reports_unknown_keys_and_counts(make_table: MakeTable) -> None:
    """delete returns one bool per key (a repeated key: True for its first), removes
    the items and counts them as deletes."""
    t = await make_table(8, np.float32, SHAPE)
    await t.insert_many(items(range(5)))
    found = await t.delete(np.array([4, 1, 1, 7, -1], dtype=np.int64))
    assert found.tolist() == [True, True, False, False, False]
    st = await t.statistics()
    assert (st.size, st.deletes, st.evictions) == (3, 2, 0)
    s = await t.sample(200)
    assert set(s.keys.tolist()) == {0, 2, 3}


async def test_sample_waits_for_min_size_and_inserts_wait_for_the_limiter(
    make_table: MakeTable,
) -> None:
    """A sample waits until min_size_to_sample items are in; an insert waits while the
    limiter says the actors are too far ahead, and goes in once samples caught up."""
    limiter = aqueue.RateLimiter(1.0, 2, -2.0, 3.0)
    t = await make_table(10, np.float32, SHAPE, rate_limiter=limiter)
    async with anyio.create_task_group() as tg:
        s = spawn(tg, t.sample, 1)
        await waiting(t, samples=1)
        await t.insert(item(0))
        await waiting(t, samples=1)
        assert s.pending  # 1 < min_size_to_sample
        await t.insert(item(1))
        await finished(s)
        assert len(s.result()) == 1
        await t.insert(item(2))  # (3 * 1 - 1 = 2 <= 3)
        await t.insert(item(3))  # 4 - 1 = 3 <= 3
        blocked = spawn(tg, t.insert, item(4))  # 5 - 1 = 4 > 3
        await waiting(t, inserts=1)
        assert blocked.pending
        await t.sample(1)
        await finished(blocked)
        assert blocked.result() == 4
    st = await t.statistics()
    assert (st.inserts, st.samples) == (5, 2)
    assert st.insert_wait_s > 0
    assert st.sample_wait_s > 0


async def test_waiters_are_served_in_arrival_order(make_table: MakeTable) -> None:
    """Waiting samples are served in the order they arrived, and so are waiting
    inserts: a request that arrives behind a waiting one waits, even when it could be
    served at once."""
    t = await make_table(10, np.float32, SHAPE, sampler=aqueue.Fifo(), max_times_sampled=1)
    await t.insert_many(items([0, 1]))
    async with anyio.create_task_group() as tg:
        big = spawn(tg, t.sample, 3)  # 2 draws are left: it waits
        await waiting(t, samples=1)
        small = spawn(tg, t.sample, 1)  # it could be served, but arrived later
        await waiting(t, samples=2)
        assert big.pending
        assert small.pending
        await t.insert(item(2))
        await finished(big)
        assert big.result().keys.tolist() == [0, 1, 2]
        await waiting(t, samples=1)
        assert small.pending
        await t.insert(item(3))
        await finished(small)
        assert small.result().keys.tolist() == [3]
    limiter = aqueue.RateLimiter(1.0, 1, -10.0, 2.0)
    limited = await make_table(10, np.float32, SHAPE, rate_limiter=limiter)
    await limited.insert_many(items([0, 1]))
    await limited.sample(1)  # inserts * 1 - samples = 1
    async with anyio.create_task_group() as tg:
        many = spawn(tg, limited.insert_many, items([2, 3]))  # 4 - 1 > 2: it waits
        await waiting(limited, inserts=1)
        one = spawn(tg, limited.insert, item(4))  # 3 - 1 <= 2 fits, but arrived later
        await waiting(limited, inserts=2)
        assert many.pending
        assert one.pending
        await limited.sample(1)
        await finished(many)
        assert many.result().tolist() == [2, 3]
        await waiting(limited, inserts=1)
        assert one.pending  # 5 - 2 > 2
        await limited.sample(1)
        await finished(one)
        assert one.result() == 4


async def test_close_fails_inserts_and_samples_that_would_wait(make_table: MakeTable) -> None:
    """After close: inserts raise QueueClosedError (waiting ones too, having inserted
    nothing); samples that can be served are; those that would wait raise
    OutOfRangeError, waiting ones too; samples(n) ends; update and delete still work."""
    t = await make_table(4, np.float32, SHAPE, rate_limiter=aqueue.RateLimiter(1.0, 1, 0.0, 2.0))
    await t.insert_many(items([0, 1]))
    async with anyio.create_task_group() as tg:
        waiting_insert = spawn(tg, t.insert, item(2))
        await waiting(t, inserts=1)
        assert waiting_insert.pending
        t.close()
        await finished(waiting_insert)
        with pytest.raises(aqueue.QueueClosedError):
            waiting_insert.result()
    with pytest.raises(aqueue.QueueClosedError):
        await t.insert(item(3))
    with pytest.raises(aqueue.QueueClosedError):
        await t.insert_many(items([3]))
    assert (await t.sample(2)).table_size == 2  # 2 * 1 - 0 - 2 >= 0
    with pytest.raises(aqueue.OutOfRangeError) as info:
        await t.sample(1)
    assert "closed" in str(info.value)
    assert (await t.update_priorities([0], [2.0])).tolist() == [True]
    st = await t.statistics()
    assert st.closed
    assert (st.inserts, st.samples, st.size) == (2, 2, 2)
    other = await make_table(4, np.float32, SHAPE)
    async with anyio.create_task_group() as tg:
        waiting_sample = spawn(tg, other.sample, 1)
        await waiting(other, samples=1)
        await other.aclose()
        await finished(waiting_sample)
        with pytest.raises(aqueue.OutOfRangeError):
            waiting_sample.result()
    third = await make_table(
        4, np.float32, SHAPE, rate_limiter=aqueue.RateLimiter(1.0, 1, 0.0, 9.0)
    )
    await third.insert_many(items([0, 1, 2]))
    third.close()
    got = [len(s) async for s in third.samples(2)]
    assert got == [2]  # 3 - 2 - 2 < 0: the second would wait


async def test_statistics_are_awaitable_and_add_up(make_table: MakeTable) -> None:
    """statistics() (awaited) reports the documented counters, which add up."""
    t = await make_table(3, np.float32, SHAPE, max_times_sampled=1, sampler=aqueue.Fifo())
    await t.insert_many(items(range(5)))  # 2 evicted
    await t.sample(2)  # 2 sampled out
    await t.delete([4])
    st = await t.statistics()
    assert isinstance(st, aqueue.ReplayStatistics)
    assert (st.size, st.max_size, st.inserts, st.samples) == (0, 3, 5, 2)
    assert (st.deletes, st.evictions, st.inserts_waiting, st.samples_waiting) == (5, 2, 0, 0)
    assert st.insert_wait_s == 0.0
    assert not st.closed


@pytest.mark.parametrize("shape", ["queue", "stack"])
async def test_queue_and_stack_shapes(shape: str) -> None:
    """ReplayTable.queue/stack: each item sampled once, in FIFO/LIFO order; inserts wait
    while max_size items are held (no eviction), samples while none is."""
    t = getattr(aqueue.ReplayTable, shape)(3, np.float32, SHAPE)
    assert t.max_times_sampled == 1
    await t.insert_many(items([0, 1, 2]))
    async with anyio.create_task_group() as tg:
        blocked = spawn(tg, t.insert, item(3))
        await settle()
        assert blocked.pending
        first = await t.sample(2)
        await settle()
        assert blocked.result() == 3
    assert first.keys.tolist() == ([0, 1] if shape == "queue" else [2, 1])
    assert first.probabilities.tolist() == [1.0, 1.0]
    rest = await t.sample(2)
    assert rest.keys.tolist() == ([2, 3] if shape == "queue" else [3, 0])
    st = await t.statistics()
    assert (st.size, st.evictions, st.deletes) == (0, 0, 4)
    async with anyio.create_task_group() as tg:
        waiting = spawn(tg, t.sample, 1)
        await settle()
        assert waiting.pending
        await t.insert(item(4))
        await settle()
        assert waiting.result().keys.tolist() == [4]


async def test_requests_that_could_never_pass_are_refused_at_the_call(
    make_table: MakeTable,
) -> None:
    """A sample(n) or insert_many(k) that the limiter or max_times_sampled could never
    allow at once raises at once, naming the numbers, instead of waiting for ever."""
    ratio = aqueue.SampleToInsertRatio(4.0, 10, 50.0)  # band [-10, 90]
    t = await make_table(100, np.float32, SHAPE, rate_limiter=ratio)
    with pytest.raises(aqueue.ElementSpecError, match=r"sample\(101\).*min_diff \+ n = 91.*90"):
        await t.sample(101)
    with pytest.raises(aqueue.ElementSpecError, match=r"insert_many of 26 items.*104.*100"):
        await t.insert_many(items(range(26)))
    await t.insert_many(items(range(10)))  # filling up to min_size_to_sample: 40
    await t.sample(50)  # down to min_diff: -10
    await t.insert_many(items(range(25)))  # 25 * 4 = 100 fits the band's width: 90
    assert len(await t.sample(100)) == 100  # and 100 samples its height
    limited = await make_table(5, np.float32, SHAPE, max_times_sampled=2)
    with pytest.raises(aqueue.ElementSpecError, match=r"sample\(11\).*at most 10 draws"):
        await limited.sample(11)
    assert await counters(limited) == (0, 0, 0, 0, 0)


async def test_a_sample_larger_than_memory_is_refused_at_the_call(make_table: MakeTable) -> None:
    """sample(10**12) of a table whose limiter and max_times_sampled allow any count:
    its result alone could never fit in memory, so the call (and samples(n), and the
    thread view's sample) raises ElementSpecError naming the numbers, not numpy's
    "Unable to allocate", and the table is as it was."""
    t = await make_table(4, np.float32, SHAPE)
    await t.insert_many(items(range(2)))
    before = await counters(t)
    n = 10**12
    message = rf"sample\({n}\) could never be served: its result alone needs .* \({n} draws"
    with pytest.raises(aqueue.ElementSpecError, match=message):
        await t.sample(n)
    with pytest.raises(aqueue.ElementSpecError, match=message):
        t.samples(n)
    view = t.blocking()
    with pytest.raises(aqueue.ElementSpecError, match=message):
        await anyio.to_thread.run_sync(lambda: view.sample(n))
    assert await counters(t) == before
    assert len(await t.sample(1_000)) == 1_000  # with replacement: beyond max_size is fine


async def test_insert_many_the_limiter_admits_now_goes_in(make_table: MakeTable) -> None:
    """An insert_many is refused only if no state of the table could ever admit it: a
    batch Reverb's ``CanInsert(k)`` (``(inserts + k) * spi - samples <= max_diff``)
    admits now goes in at once, one that fits later waits for samples, and only one
    wider than ``max_diff - min(0, min_diff)`` is refused (the replay guide's limiter, whose
    ``min_diff`` is above 0: the difference starts at 0, below the band)."""
    ratio = aqueue.SampleToInsertRatio(4.0, 1000, 2000.0)  # band [2000, 6000]
    t = await make_table(2000, np.float32, SHAPE, rate_limiter=ratio)
    assert len(await t.insert_many(items(range(1200)))) == 1200  # 4800 <= 6000 now
    with pytest.raises(aqueue.ElementSpecError, match=r"of 1501 items.*6004 > .* = 6000"):
        await t.insert_many(items(range(1501)))
    async with anyio.create_task_group() as tg:
        later = spawn(tg, t.insert_many, items(range(500)))  # 6800 > 6000: it waits
        await waiting(t, inserts=1)
        assert later.pending
        await t.sample(800)  # 4800 - 800 = 4000, and 4000 + 2000 fits
        await finished(later)
    assert len(later.result()) == 500
    assert await counters(t) == (1700, 1700, 800, 0, 0)
    fresh = await make_table(2000, np.float32, SHAPE, rate_limiter=ratio)
    assert len(await fresh.insert_many(items(range(1500)))) == 1500  # 6000: the widest


async def test_weights_follow_the_probabilities(make_table: MakeTable) -> None:
    """weights(beta) = (N * P) ** -beta over its largest; all 1 for a uniform sample."""
    t = await make_table(8, np.float32, SHAPE, sampler=aqueue.Prioritized(1.0), seed=0)
    await t.insert_many(items(range(4)), priorities=[1.0, 2.0, 3.0, 4.0])
    s = await t.sample(64)
    expected = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4}
    assert np.allclose(s.probabilities, [expected[k] for k in s.keys.tolist()])
    w = s.weights(0.5)
    ref = (4 * s.probabilities) ** -0.5
    assert np.allclose(w, ref / ref.max())
    assert w.max() == 1.0
    assert np.array_equal(s.weights(0), np.ones(64))
    u = await make_table(8, np.float32, SHAPE)
    await u.insert_many(items(range(4)))
    assert np.array_equal((await u.sample(8)).weights(1.0), np.ones(8))
    with pytest.raises(aqueue.ElementSpecError, match="beta"):
        s.weights(-1.0)


# -- bad input: a clear error and nothing changed -----------------------------------------


def _bad_calls() -> list[tuple[str, str, Any, str]]:
    x = item(9)
    return [
        (
            "insert",
            "element dtype",
            (np.array([1, 2, 3], dtype=np.complex64),),
            "expected dtype float32",
        ),
        (
            "insert",
            "element shape",
            (np.zeros(4, np.float32),),
            r"expected shape \(3,\), got \(4,\)",
        ),
        ("insert", "negative priority", (x, -1.0), r"priority is -1.0 \(negative\)"),
        ("insert", "NaN priority", (x, float("nan")), r"\(NaN\)"),
        ("insert", "infinite priority", (x, float("inf")), r"\(infinite\)"),
        ("insert", "str priority", (x, "high"), "priority must be a number or None, got str"),
        (
            "insert_many",
            "batch shape",
            (np.zeros((2, 4), np.float32),),
            r"expected shape \(\?, 3\)",
        ),
        (
            "insert_many",
            "priority count",
            (items([1, 2]), [1.0]),
            "sequence of 2 numbers, got shape",
        ),
        (
            "insert_many",
            "negative priorities",
            (items([1, 2]), [1.0, -2.0]),
            r"priorities\[1\] is -2.0",
        ),
        (
            "insert_many",
            "NaN priorities",
            (items([1, 2]), [np.nan, 1.0]),
            r"priorities\[0\] is nan",
        ),
        ("sample", "zero", (0,), "n must be >= 1, got 0"),
        ("sample", "float", (2.0,), "n must be an int, got float"),
        (
            "update_priorities",
            "float keys",
            ([0.5], [1.0]),
            "keys must be a 1-d sequence of ints, got dtype float64",
        ),
        ("update_priorities", "2-d keys", ([[0]], [1.0]), r"got shape \(1, 1\)"),
        ("update_priorities", "count", ([0, 1], [1.0]), "sequence of 2 numbers"),
        ("update_priorities", "negative", ([0], [-1.0]), r"priorities\[0\] is -1.0"),
        ("update_priorities", "none", ([0], None), "needs priorities"),
        ("delete", "str keys", (["a"],), "keys must be a 1-d sequence of ints"),
        ("delete", "scalar key", (3,), r"got shape \(\)"),
    ]


@pytest.mark.parametrize(
    ("op", "label", "args", "message"), _bad_calls(), ids=lambda v: v if isinstance(v, str) else ""
)
async def test_bad_arguments_raise_and_change_nothing(
    make_table: MakeTable, op: str, label: str, args: tuple[Any, ...], message: str
) -> None:
    """Every operation refuses bad arguments with ElementSpecError naming what was
    expected and given, and the table is as it was."""
    t = await make_table(4, np.float32, SHAPE, sampler=aqueue.Prioritized(0.5), seed=1)
    await t.insert_many(items(range(4)))
    await t.sample(3)
    before = await counters(t)
    with pytest.raises(aqueue.ElementSpecError, match=message):
        await getattr(t, op)(*args)
    assert await counters(t) == before
    assert len(await t.sample(2)) == 2  # and it still works


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_size": 0}, "max_size must be >= 1, got 0"),
        ({"shapes": None}, "shapes must be declared and fully defined"),
        ({"shapes": (None, 3)}, r"fully defined.*\(\?, 3\)"),
        ({"dtypes": object}, "no object or structured dtypes"),
        ({"dtypes": "nonsense"}, "numpy.dtype"),
        ({"sampler": aqueue.Uniform}, "got the class"),
        ({"remover": "fifo"}, "remover must be one of"),
        ({"max_times_sampled": -1}, "max_times_sampled must be >= 0"),
        ({"rate_limiter": 5}, "rate_limiter must be"),
        ({"rate_limiter": aqueue.MinSize(9)}, "waits for 9 items.*max_size is 8"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"names": ["a", "b"]}, "names has 2 entries"),
    ],
)
async def test_bad_constructor_arguments(
    make_table: MakeTable, options: dict[str, Any], message: str
) -> None:
    """The constructor names the bad argument, what it expected and what it got."""
    args: dict[str, Any] = {"max_size": 8, "dtypes": np.float32, "shapes": SHAPE, **options}
    positional = [args.pop("max_size"), args.pop("dtypes"), args.pop("shapes")]
    with pytest.raises(aqueue.ElementSpecError, match=message):
        await make_table(*positional, **args)
