"""Replay tables on Redis: what only a shared table has (the contract itself runs in
tests/replay over both backends). The shared-name rule on reopen, two connections
sharing one limiter and one arrival order, the same results as the in-process table
for the deterministic selectors, the distributions of the random ones, sum trees of
every fanout kept exact, a seeded client's draws pinned, deletion, and the thread view
away from the event loop."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import check_table, table_state, until

import aqueue
import aqueue.redis
from aqueue.redis._replay import _open as _replay_open

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SHAPE = (3,)


def items(vs: Any) -> np.ndarray:
    arr = np.asarray(list(vs), dtype=np.float32)
    return np.stack([arr, arr + 0.5, -arr], axis=1) if len(arr) else np.empty((0, 3), np.float32)


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.1) as server:
        yield server


@pytest.fixture
def tname() -> str:
    return f"rt-{uuid.uuid4().hex[:12]}"


async def test_a_redis_table_is_a_replay_table_and_a_sink(
    srv: aqueue.redis.RedisServer, tname: str
) -> None:
    """The protocols the runners, pipelines and the coordinator name see it as a table
    (and not as a queue); its thread view as a table's view."""
    table = await srv.replay_table(tname, 4, np.float32, SHAPE)
    assert isinstance(table, aqueue.AsyncReplayTable)
    assert isinstance(table, aqueue.Sink)
    assert not isinstance(table, aqueue.AsyncQueue)
    assert isinstance(table.blocking(), aqueue.ReplayView)
    assert isinstance(table.blocking(), aqueue.SinkView)


# -- the shared-name rule -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "stored", "given"),
    [
        ({"max_size": 9}, "max_size", "8", "9"),
        ({"dtypes": np.float64}, "dtypes", "float32", "float64"),
        ({"shapes": (4,)}, "shapes", r"\(3,\)", r"\(4,\)"),
        ({"names": ["x"]}, "names", "None", "'x'"),
        ({"sampler": aqueue.Prioritized(0.6)}, "sampler", r"Uniform\(\)", r"Prioritized\(0.6\)"),
        ({"remover": aqueue.Lifo()}, "remover", r"Fifo\(\)", r"Lifo\(\)"),
        ({"max_times_sampled": 2}, "max_times_sampled", "0", "2"),
        ({"rate_limiter": aqueue.MinSize(2)}, "rate_limiter", r"MinSize\(1\)", r"MinSize\(2\)"),
    ],
)
async def test_reopen_with_other_settings_names_the_field(
    srv: aqueue.redis.RedisServer,
    tname: str,
    change: dict[str, Any],
    field: str,
    stored: str,
    given: str,
) -> None:
    """A second open with another setting raises ElementSpecError naming the field, the
    stored and the given value; the same settings (another seed is fine) share the
    table."""
    base: dict[str, Any] = {"max_size": 8, "dtypes": np.float32, "shapes": SHAPE}
    t = await srv.replay_table(tname, **base)
    await t.insert_many(items([1, 2]))
    with pytest.raises(
        aqueue.ElementSpecError, match=rf"with {field} {stored}, but {given} was given"
    ):
        await srv.replay_table(tname, **{**base, **change})
    again = await srv.replay_table(tname, **base, seed=5)
    assert await again.size() == 2
    assert await srv.delete_table(tname)


async def test_queues_and_tables_do_not_share_a_name(
    srv: aqueue.redis.RedisServer, tname: str
) -> None:
    """A table's name cannot open a queue nor the other way round, and each delete
    refuses the other kind."""
    await srv.replay_table(tname, 8, np.float32, SHAPE)
    with pytest.raises(aqueue.ElementSpecError, match="with kind RedisReplayTable"):
        await srv.fifo_queue(tname, 8, np.float32, SHAPE)
    with pytest.raises(aqueue.ElementSpecError, match="is a replay table; use delete_table"):
        await srv.delete_queue(tname)
    qname = tname + "-q"
    await srv.fifo_queue(qname, 8, np.float32, SHAPE)
    with pytest.raises(aqueue.ElementSpecError, match="with kind RedisFIFOQueue"):
        await srv.replay_table(qname, 8, np.float32, SHAPE)
    with pytest.raises(aqueue.ElementSpecError, match="is a queue; use delete_queue"):
        await srv.delete_table(qname)
    assert await srv.delete_queue(qname)
    assert await srv.delete_table(tname)
    assert not await srv.delete_table(tname)


@pytest.mark.parametrize("name", [None, "", "a{b", "a}b", "x" * 201, 7])
async def test_bad_names_say_what_they_name(srv: aqueue.redis.RedisServer, name: Any) -> None:
    """A table's name error says "table name", a queue's "queue name", with the owner,
    what was expected and what was given; nothing is created."""
    with pytest.raises(aqueue.ElementSpecError) as table:
        await srv.replay_table(name, 4, np.int64, ())
    assert str(table.value).startswith("RedisReplayTable: table name must be ")
    with pytest.raises(aqueue.ElementSpecError, match=r"^RedisServer\.delete_table: table name "):
        await srv.delete_table(name)
    with pytest.raises(aqueue.ElementSpecError) as queue:
        await srv.fifo_queue(name, 4, np.int64, ())
    assert str(queue.value).startswith("RedisFIFOQueue: queue name must be ")
    with pytest.raises(aqueue.ElementSpecError, match=r"^RedisServer\.delete_queue: queue name "):
        await srv.delete_queue(name)
    for error in (table.value, queue.value):
        text = str(error)
        if isinstance(name, int):
            assert text.endswith("must be a str, got int"), text
        else:
            assert "must be 1..200 characters without '{' or '}', got " in text
            assert text.endswith(repr(name)), text


async def test_delete_table_removes_every_key_and_fails_its_waiters(
    srv: aqueue.redis.RedisServer, redis_server: Any, tname: str
) -> None:
    """delete_table drops items, payloads and structures; a waiting sample fails with
    OutOfRangeError, later calls with QueueClosedError."""
    t = await srv.replay_table(
        tname, 8, np.float32, (64,), sampler=aqueue.Prioritized(1.0), rate_limiter=aqueue.MinSize(5)
    )
    await t.insert_many(np.ones((3, 64), np.float32))  # 256-byte payloads
    async with anyio.create_task_group() as tg:
        outcome: list[str] = []

        async def sampler() -> None:
            try:
                await t.sample(1)
            except aqueue.OutOfRangeError:
                outcome.append("out of range")

        tg.start_soon(sampler)
        await until(lambda: _waiting(t, samples=1))
        assert await srv.delete_table(tname)
    assert outcome == ["out of range"]
    with redis_server.client() as c:
        assert list(c.scan_iter(match=f"aq:{{{tname}}}:*")) == []
    with pytest.raises(aqueue.QueueClosedError, match="is gone from the server \\(deleted, "):
        await t.insert(np.ones(64, np.float32))


async def _waiting(t: Any, *, inserts: int = 0, samples: int = 0) -> bool:
    st = await t.statistics()
    return (st.inserts_waiting, st.samples_waiting) == (inserts, samples)


# -- sharing -----------------------------------------------------------------------------


async def test_two_connections_share_items_limiter_and_arrival_order(url: str, tname: str) -> None:
    """Two connections (as two processes): a sample of one waits for the other's
    inserts; their waiting inserts are served in arrival order; the counters and wait
    times count both."""
    limiter = aqueue.RateLimiter(1.0, 2, -10.0, 3.0)
    async with (
        aqueue.redis.connect(url, wait_timeout=0.1) as a,
        aqueue.redis.connect(url, wait_timeout=0.1) as b,
    ):
        ta = await a.replay_table(tname, 10, np.float32, SHAPE, rate_limiter=limiter)
        tb = await b.replay_table(tname, 10, np.float32, SHAPE, rate_limiter=limiter)
        got: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def sample() -> None:
                got.append(await ta.sample(2))

            tg.start_soon(sample)
            await until(lambda: _waiting(tb, samples=1))
            await tb.insert_many(items([0, 1]))
        assert set(got[0].keys.tolist()) <= {0, 1}
        await tb.insert_many(items([2, 3]))  # 4 - 2 = 2 <= 3
        order: list[str] = []
        async with anyio.create_task_group() as tg:

            async def insert(t: Any, label: str, v: int) -> None:
                await t.insert_many(items([v, v]))
                order.append(label)

            tg.start_soon(insert, ta, "a", 10)  # (6 - 2 = 4 > 3: waits)
            await until(lambda: _waiting(ta, inserts=1))
            tg.start_soon(insert, tb, "b", 20)
            await until(lambda: _waiting(ta, inserts=2))
            await tb.sample(2)  # lets the first through (6 - 4 = 2)
            await until(lambda: _waiting(ta, inserts=1))

            async def a_returned() -> bool:  # (its reply may come after the server's count)
                return bool(order)

            await until(a_returned)
            assert order == ["a"]
            await ta.sample(2)
        assert order == ["a", "b"]
        st = await tb.statistics()
        assert (st.inserts, st.samples, st.size) == (8, 6, 8)
        assert st.insert_wait_s > 0
        assert st.sample_wait_s > 0


# -- the same results as in process -------------------------------------------------------


DETERMINISTIC = [aqueue.Fifo(), aqueue.Lifo(), aqueue.MinHeap(), aqueue.MaxHeap()]


@pytest.mark.parametrize("mts", [0, 2])
@pytest.mark.parametrize("sampler", DETERMINISTIC, ids=repr)
async def test_deterministic_selectors_give_the_in_process_results(
    srv: aqueue.redis.RedisServer, tname: str, sampler: Any, mts: int, redis_server: Any
) -> None:
    """Random inserts (batches crossing max_size, priorities given or default),
    samples, updates and deletes: with a deterministic sampler and each deterministic
    remover, every result equals the in-process table's, and the server's invariants
    hold after each step."""
    rng = np.random.default_rng(len(repr(sampler)) + mts)
    for remover in DETERMINISTIC:
        name = f"{tname}-{type(remover).__name__}"
        opts: dict[str, Any] = {"sampler": sampler, "remover": remover, "max_times_sampled": mts}
        local = aqueue.ReplayTable(6, np.float32, SHAPE, **opts)
        shared = await srv.replay_table(name, 6, np.float32, SHAPE, **opts)
        for step in range(40):
            op = rng.choice(["insert", "sample", "update", "delete"], p=[0.4, 0.3, 0.2, 0.1])
            if op == "insert":
                k = int(rng.integers(1, 9))
                prios = None if rng.random() < 0.3 else rng.integers(0, 4, k).astype(float)
                args = (items(range(100 * step, 100 * step + k)), prios)
                assert (await local.insert_many(*args)).tolist() == (
                    await shared.insert_many(*args)
                ).tolist()
            elif op == "sample":
                n = int(rng.integers(1, 4))
                st = local.statistics()
                if not local._engine.core.can_sample(n):
                    continue
                want, got = await local.sample(n), await shared.sample(n)
                for field in ("keys", "priorities", "probabilities", "times_sampled"):
                    assert getattr(want, field).tolist() == getattr(got, field).tolist(), field
                assert want.data.tolist() == got.data.tolist()
                assert want.table_size == got.table_size == st.size
            elif op == "update":
                keys = rng.integers(0, 100 * step + 9, 4)
                prios = rng.integers(0, 4, 4).astype(float)
                assert (await local.update_priorities(keys, prios)).tolist() == (
                    await shared.update_priorities(keys, prios)
                ).tolist()
            else:
                keys = rng.integers(0, 100 * step + 9, 2)
                assert (await local.delete(keys)).tolist() == (await shared.delete(keys)).tolist()
            with redis_server.client() as c:
                assert check_table(c, name) == [], (step, op)
        want_st, got_st = local.statistics(), await shared.statistics()
        for field in ("size", "inserts", "samples", "deletes", "evictions"):
            assert getattr(want_st, field) == getattr(got_st, field), field
        await srv.delete_table(name)


@pytest.mark.parametrize("fanout", [2, 3, 16])
@pytest.mark.parametrize("mts", [0, 3])
async def test_sum_trees_stay_exact_and_probabilities_match_the_weights(
    srv: aqueue.redis.RedisServer,
    tname: str,
    redis_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    fanout: int,
    mts: int,
) -> None:
    """Prioritized sampler and remover (other exponents: two trees) over 37 items with
    every fanout: after random inserts, samples, updates and deletes each node is the
    exact sum of its children, each draw's probability is its weight over the total,
    and zero priorities are never drawn while others are positive."""
    monkeypatch.setattr(_replay_open, "FANOUT", fanout)
    t = await srv.replay_table(
        tname,
        37,
        np.float32,
        SHAPE,
        sampler=aqueue.Prioritized(0.7),
        remover=aqueue.Prioritized(1.5),
        max_times_sampled=mts,
        seed=fanout,
    )
    rng = np.random.default_rng(fanout)
    for step in range(30):
        k = int(rng.integers(1, 12))
        await t.insert_many(items(range(k)), priorities=rng.integers(0, 5, k).astype(float))
        st = await t.statistics()
        if st.size:
            s = await t.sample(int(rng.integers(1, min(8, st.size) + 1)))
            assert (s.priorities > 0).all() or st.size == 0
            if not mts:  # (with it, each draw's total shrinks as items leave)
                total = await _total(redis_server, tname, 0.7)
                assert np.allclose(s.probabilities, s.priorities**0.7 / total)
        keys = rng.integers(0, st.inserts + 1, 5)
        await t.update_priorities(keys, rng.integers(0, 5, 5).astype(float))
        await t.delete(rng.integers(0, st.inserts + 1, 2))
        with redis_server.client() as c:
            assert check_table(c, tname) == [], step


async def _total(redis_server: Any, name: str, exponent: float) -> float:
    import struct

    with redis_server.client() as c:
        recs = [struct.unpack("<ddddB", v) for v in c.hgetall(f"aq:{{{name}}}:it").values()]
    return sum(p**exponent for p, *_ in recs if p > 0)


# -- the random selectors' distributions ---------------------------------------------------


async def test_uniform_and_prioritized_draw_as_they_should(
    srv: aqueue.redis.RedisServer, tname: str
) -> None:
    """Chi-square with a fixed seed: a Uniform sampler draws 10 items equally, a
    Prioritized(1) one in proportion to priorities 1..4 (and never a 0); all-zero
    priorities fall back to uniform."""
    u = await srv.replay_table(tname + "u", 10, np.float32, SHAPE, seed=0)
    await u.insert_many(items(range(10)))
    counts = np.bincount((await u.sample(4000)).keys, minlength=10)
    assert _chi2(counts, np.full(10, 400.0)) < 21.7  # p = 0.01 at 9 degrees of freedom
    p = await srv.replay_table(
        tname + "p", 10, np.float32, SHAPE, sampler=aqueue.Prioritized(1.0), seed=1
    )
    await p.insert_many(items(range(5)), priorities=[0.0, 1.0, 2.0, 3.0, 4.0])
    s = await p.sample(4000)
    counts = np.bincount(s.keys, minlength=5)
    assert counts[0] == 0
    assert _chi2(counts[1:], np.array([400.0, 800.0, 1200.0, 1600.0])) < 11.3  # p = 0.01, 3 dof
    assert np.allclose(s.probabilities, s.priorities / 10.0)
    z = await srv.replay_table(
        tname + "z", 10, np.float32, SHAPE, sampler=aqueue.Prioritized(0.5), seed=2
    )
    await z.insert_many(items(range(4)), priorities=[0.0] * 4)
    s = await z.sample(2000)
    assert _chi2(np.bincount(s.keys, minlength=4), np.full(4, 500.0)) < 11.3
    assert np.array_equal(s.probabilities, np.full(2000, 0.25))


def _chi2(counts: np.ndarray, expected: np.ndarray) -> float:
    return float(((counts - expected) ** 2 / expected).sum())


async def test_random_removers_keep_the_table_full_and_consistent(
    srv: aqueue.redis.RedisServer, tname: str, redis_server: Any
) -> None:
    """A Uniform and a Prioritized remover at max_size: one eviction per insert (the
    newcomer may evict itself), counters that add up, the invariants hold."""
    for remover in (aqueue.Uniform(), aqueue.Prioritized(1.0)):
        name = f"{tname}-{type(remover).__name__}"
        t = await srv.replay_table(name, 5, np.float32, SHAPE, remover=remover, seed=3)
        for j in range(8):
            await t.insert_many(items(range(3 * j, 3 * j + 3)), priorities=[1.0, 2.0, 3.0])
        st = await t.statistics()
        assert (st.size, st.inserts, st.evictions, st.deletes) == (5, 24, 19, 19)
        with redis_server.client() as c:
            assert check_table(c, name) == []


# -- determinism ------------------------------------------------------------------------------


async def test_a_seed_pins_the_draws(srv: aqueue.redis.RedisServer, tname: str) -> None:
    """A seeded client draws the same keys from the same operations (pinned for seed 0:
    a change to the server's selection or to how random numbers are used shows here),
    for Uniform and Prioritized samplers and a Uniform remover."""
    runs = []
    for run in range(2):
        t = await srv.replay_table(
            f"{tname}-{run}",
            6,
            np.float32,
            SHAPE,
            sampler=aqueue.Prioritized(0.6),
            remover=aqueue.Uniform(),
            seed=0,
        )
        await t.insert_many(items(range(8)), priorities=[1.0, 2.0, 3.0, 4.0, 0.5, 1.5, 2.5, 3.5])
        first = (await t.sample(6)).keys.tolist()
        await t.update_priorities(first, [5.0] * 6)
        u = await srv.replay_table(f"{tname}-u{run}", 6, np.float32, SHAPE, seed=0)
        await u.insert_many(items(range(6)))
        runs.append((first, (await t.sample(6)).keys.tolist(), (await u.sample(6)).keys.tolist()))
    assert runs[0] == runs[1]
    assert runs[0] == ([3, 7, 7, 0, 7, 0], [5, 0, 7, 3, 1, 2], [3, 1, 0, 0, 4, 5])


async def test_a_cancelled_sample_leaves_the_seeded_sequence_as_it_was(
    srv: aqueue.redis.RedisServer, tname: str
) -> None:
    """A sample that waited and was cancelled gives its random numbers back: the next
    samples are those of a client that never made it."""
    seqs = []
    for cancel in (False, True):
        t = await srv.replay_table(
            f"{tname}-{cancel}", 10, np.float32, SHAPE, rate_limiter=aqueue.MinSize(3), seed=7
        )
        await t.insert_many(items(range(2)))
        if cancel:
            with anyio.move_on_after(0.05):
                await t.sample(4)  # waits for a third item
        await t.insert_many(items(range(2, 6)))
        seqs.append((await t.sample(5)).keys.tolist())
    assert seqs[0] == seqs[1]


# -- the thread view ----------------------------------------------------------------------


async def test_thread_view_from_plain_threads(srv: aqueue.redis.RedisServer, tname: str) -> None:
    """The view's methods in worker threads: inserts, a sample that waits for a task's
    insert, updates and deletes, close and statistics."""
    t = await srv.replay_table(tname, 8, np.float32, SHAPE, sampler=aqueue.Fifo())
    view = t.blocking()

    def work() -> list[Any]:
        out: list[Any] = [view.insert(items([0])[0], priority=2.0)]
        out.append(view.insert_many(items([1, 2])).tolist())
        out.append(view.sample(2).keys.tolist())
        out.append(view.update_priorities([0, 9], [4.0, 1.0], timeout=1).tolist())
        out.append(view.delete([0]).tolist())
        out.append(view.size())
        return out

    assert await anyio.to_thread.run_sync(work) == [0, [1, 2], [0, 0], [True, False], [True], 2]
    view.close()
    assert (await t.statistics()).closed
    with pytest.raises(aqueue.QueueClosedError):
        await anyio.to_thread.run_sync(view.insert, items([3])[0])
    assert repr(view).startswith("<BlockingRedisReplayTable of <RedisReplayTable")
    assert table_state  # (imported for the cancellation tests' helpers)


async def test_thread_view_samples_until_the_table_is_closed(
    srv: aqueue.redis.RedisServer, tname: str
) -> None:
    """``samples(n)`` from a thread yields ``sample(n)`` results, waiting for a task's
    inserts, and ends when the closed table cannot serve another; a bad ``n`` or
    ``timeout`` is refused at once."""
    t = await srv.replay_table(
        tname, 16, np.float32, SHAPE, sampler=aqueue.Fifo(), max_times_sampled=2
    )
    view = t.blocking()
    with pytest.raises(aqueue.ElementSpecError, match="timeout"):
        await anyio.to_thread.run_sync(lambda: view.samples(2, timeout=-1.0))
    with pytest.raises(aqueue.ElementSpecError):
        await anyio.to_thread.run_sync(lambda: view.samples(0))

    def learn() -> list[list[int]]:
        return [s.keys.tolist() for s in view.samples(2, timeout=30)]

    async with anyio.create_task_group() as tg:
        got: list[list[list[int]]] = []

        async def run() -> None:
            got.append(await anyio.to_thread.run_sync(learn))

        tg.start_soon(run)
        for k in range(4):
            await t.insert(items([k])[0])
            await until(lambda k=k: _sampled(t, 2 * (k + 1)))
        await t.aclose()
    assert got == [[[0, 0], [1, 1], [2, 2], [3, 3]]]


async def _sampled(t: Any, n: int) -> bool:
    return bool((await t.statistics()).samples >= n)
