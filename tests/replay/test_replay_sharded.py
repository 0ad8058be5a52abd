"""Replay tables over shards (``server.replay_table(..., shards=)``), on one server with
``shards=3`` and on the session's three-primary cluster: opening, the stored count,
keys routed to their shard, exact Uniform and Prioritized sampling across shards
(chi-square, the reported probabilities, the importance weights against the in-process
table's), and cancelled samples that leave no counter moved on any shard (every
shard's records read raw from the server)."""

from __future__ import annotations

import random
import struct
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from replay_support import item, items, shared_tables, values, waiting
from test_replay_contract import (
    test_a_sample_larger_than_memory_is_refused_at_the_call,
    test_bad_arguments_raise_and_change_nothing,
    test_bad_constructor_arguments,
    test_queue_and_stack_shapes,
)

import aqueue

pytest.importorskip("redis", reason="aqueue[redis] is not installed")
pytest.importorskip("msgpack", reason="aqueue[redis] is not installed")
from aqueue.redis import connect

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

__all__ = [
    "test_a_sample_larger_than_memory_is_refused_at_the_call",
    "test_bad_arguments_raise_and_change_nothing",
    "test_bad_constructor_arguments",
    "test_queue_and_stack_shapes",
]

# Upper 0.001 critical value of the chi-square distribution with 8 degrees of freedom.
CHI2_999_DF8 = 26.124


@pytest.fixture(scope="module")
def raw_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A private redis-server whose keys the tests read raw."""
    from redis_util import start_redis, stop_redis

    server = start_redis(Path(tmp_path_factory.mktemp("sharded")))
    yield server
    stop_redis(server)


@pytest.fixture(scope="module", params=["server", "cluster"])
async def where(
    request: pytest.FixtureRequest, anyio_backend: str, raw_redis: Any
) -> AsyncIterator[tuple[Any, Any]]:
    """(an aqueue.redis server, a raw client of its keys): one server, or the cluster.
    One of each per backend for the module, as the contract modules do (every test
    names its own tables; a cluster connection discovers the slots and loads the
    functions on every primary, a tenth of a second per test on a busy machine)."""
    if request.param == "server":
        async with connect(raw_redis.url, lease_time=2.0, wait_timeout=0.1) as s:
            with raw_redis.client() as raw:
                yield s, raw
        return
    from redis_cluster_util import AllNodes, cluster_server

    cluster = request.getfixturevalue("redis_cluster")
    async with cluster_server(cluster.url, lease_time=2.0, wait_timeout=0.1) as s:
        with AllNodes(cluster).client() as raw:
            yield s, raw


@pytest.fixture
async def make_table(where: tuple[Any, Any]) -> Any:
    """The contract bodies that apply to a sharded table, over 3 shards."""
    return shared_tables(where[0], shards=3)


def fresh() -> str:
    return f"sh-{uuid.uuid4().hex[:10]}"


def shard_state(raw: Any, name: str) -> list[dict[str, Any]]:
    """Per shard, read raw: its samples counter, its held draws, its hold keys, and
    every item's times sampled."""
    import json

    tags = json.loads(raw.hget(f"aq:{{{name}}}:meta", "tags"))
    out = []
    for t in tags:
        p = f"aq:{{{t}}}:"
        recs = raw.hgetall(p + "it")
        out.append(
            {
                "samples": int(raw.hget(p + "meta", "samples")),
                "held": int(raw.hget(p + "meta", "held") or 0),
                "holds": raw.hlen(p + "hold"),
                "times": sum(struct.unpack("<ddddB", r)[1] for r in recs.values()),
            }
        )
    return out


# -- opening --------------------------------------------------------------------------------


async def test_default_count_stored_count_and_reopen(where: tuple[Any, Any]) -> None:
    srv, _ = where
    cluster = "Cluster" in repr(srv._conn.where)
    name = fresh()
    t = await srv.replay_table(name, 30, np.float32, (3,))
    assert t.shards == (3 if cluster else 1)
    again = await srv.replay_table(name, 30, np.float32, (3,))
    assert again.shards == t.shards
    name = fresh()
    t = await srv.replay_table(name, 30, np.float32, (3,), shards=3)
    assert t.shards == 3
    assert "shards=3" in repr(t)
    assert (await srv.replay_table(name, 30, np.float32, (3,))).shards == 3
    assert (await srv.replay_table(name, 30, np.float32, (3,), shards=3)).shards == 3
    for other in (1, 2, 4):
        with pytest.raises(aqueue.ElementSpecError, match=f"shards 3, but {other} was given"):
            await srv.replay_table(name, 30, np.float32, (3,), shards=other)
    with pytest.raises(aqueue.ElementSpecError, match="max_size"):  # (other settings still)
        await srv.replay_table(name, 31, np.float32, (3,))
    # a table of one shard where the settings need one, whatever the default
    fifo = await srv.replay_table(fresh(), 30, np.float32, (3,), sampler=aqueue.Fifo())
    assert fifo.shards == 1


@pytest.mark.parametrize("bad", [0, -1, "3", 2.5, True, 31])
async def test_bad_shards_are_refused_and_create_nothing(where: tuple[Any, Any], bad: Any) -> None:
    srv, raw = where
    name = fresh()
    with pytest.raises(aqueue.ElementSpecError, match="shards must be"):
        await srv.replay_table(name, 30, np.float32, (3,), shards=bad)
    assert not raw.exists(f"aq:{{{name}}}:meta")


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"sampler": aqueue.Fifo()}, "a Fifo sampler needs one insertion order"),
        ({"sampler": aqueue.Lifo()}, "a Lifo sampler needs one insertion order"),
        ({"sampler": aqueue.MinHeap()}, "a MinHeap sampler needs the one extreme priority"),
        ({"sampler": aqueue.MaxHeap()}, "a MaxHeap sampler needs the one extreme priority"),
        ({"max_times_sampled": 2}, "a sharded sample holds its draws until every shard"),
    ],
)
async def test_settings_that_need_one_shard_are_refused_saying_why(
    where: tuple[Any, Any], options: dict[str, Any], why: str
) -> None:
    srv, raw = where
    name = fresh()
    with pytest.raises(aqueue.ElementSpecError, match=f"shards=3 is not possible: {why}"):
        await srv.replay_table(name, 30, np.float32, (3,), shards=3, **options)
    assert not raw.exists(f"aq:{{{name}}}:meta")
    assert (await srv.replay_table(name, 30, np.float32, (3,), shards=1, **options)).shards == 1


async def test_a_shard_is_not_a_table_and_delete_removes_every_shard(
    where: tuple[Any, Any],
) -> None:
    import json

    srv, raw = where
    name = fresh()
    t = await srv.replay_table(name, 30, np.float32, (3,), shards=3)
    await t.insert_many(items(range(6)))
    tags = json.loads(raw.hget(f"aq:{{{name}}}:meta", "tags"))
    assert len(set(tags)) == 3
    assert tags[0] == name
    holds = f"holds shard 1 of the replay table '{name}'"
    with pytest.raises(aqueue.ElementSpecError, match=holds):
        await srv.replay_table(tags[1], 10, np.float32, (3,))
    assert await srv.delete_table(name)
    for tag in tags:
        assert not raw.exists(f"aq:{{{tag}}}:meta"), tag
        assert not raw.exists(f"aq:{{{tag}}}:it"), tag
    assert (await srv.replay_table(name, 30, np.float32, (3,), shards=2)).shards == 2


async def test_on_the_cluster_the_shards_sit_on_distinct_primaries(redis_cluster: Any) -> None:
    import json

    from redis_cluster_util import AllNodes, cluster_server

    raw = AllNodes(redis_cluster).client()
    async with cluster_server(redis_cluster.url, lease_time=2.0, wait_timeout=0.1) as srv:
        for _ in range(4):
            name = fresh()
            await srv.replay_table(name, 30, np.float32, (3,))
            tags = json.loads(raw.hget(f"aq:{{{name}}}:meta", "tags"))
            assert len({redis_cluster.owner("{" + t + "}") for t in tags}) == 3, tags


# -- keys -----------------------------------------------------------------------------------


async def test_keys_name_their_shard_and_update_and_delete_route_them(
    where: tuple[Any, Any],
) -> None:
    srv, _raw = where
    t = await srv.replay_table(
        fresh(), 30, np.float32, (3,), sampler=aqueue.Prioritized(1.0), shards=3, seed=5
    )
    keys = [await t.insert(item(v), priority=1.0) for v in range(9)]
    assert sorted(k % 3 for k in keys) == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # (rotating)
    batch = await t.insert_many(items([9, 10, 11]), priorities=[1.0, 1.0, 1.0])
    assert len({int(k) % 3 for k in batch}) == 1  # a batch stays in one shard
    assert np.array_equal(np.diff(batch), [3, 3])
    by_value = dict(zip(range(12), keys + batch.tolist()))
    unknown = max(by_value.values()) + 300
    # zero the priority of every item but 4 and 7, keys in a mixed order, one unknown
    ask = [by_value[v] for v in (11, 0, 5, 1, 2, 3, 6, 8, 9, 10)]
    found = await t.update_priorities([*ask[:3], unknown, *ask[3:]], [0.0] * 11)
    assert found.tolist() == [True, True, True, False, *([True] * 7)]
    s = await t.sample(40)
    assert set(values(s.data)) == {4, 7}
    assert set(s.keys.tolist()) == {by_value[4], by_value[7]}
    assert np.allclose(s.probabilities, 0.5)
    gone = await t.delete([by_value[7], unknown, by_value[7], by_value[0]])
    assert gone.tolist() == [True, False, False, True]
    st = await t.statistics()
    assert (st.size, st.deletes, st.inserts, st.samples) == (10, 2, 12, 40)
    assert (await t.update_priorities([by_value[7], by_value[4]], [1.0, 2.0])).tolist() == [
        False,
        True,
    ]
    s = await t.sample(5)
    assert values(s.data) == [4] * 5


# -- exact sampling -------------------------------------------------------------------------


def chi2(counts: Any, p: Any) -> float:
    e = np.asarray(p, dtype=float) / np.sum(p) * float(np.sum(counts))
    assert e.min() >= 5
    return float(((np.asarray(counts) - e) ** 2 / e).sum())


@pytest.mark.parametrize("sampler", [aqueue.Prioritized(0.7), aqueue.Uniform()])
async def test_sampling_is_exact_across_shards(where: tuple[Any, Any], sampler: Any) -> None:
    srv, _ = where
    t = await srv.replay_table(fresh(), 30, np.float32, (3,), sampler=sampler, shards=3, seed=11)
    prios = np.arange(1.0, 10.0)
    for v in range(9):  # 3 per shard, each shard's priorities unlike the others'
        await t.insert(item(v), priority=float(prios[v]))
    alpha = sampler.exponent if isinstance(sampler, aqueue.Prioritized) else 0.0
    p = prios**alpha / (prios**alpha).sum()
    counts = np.zeros(9, dtype=np.int64)
    for _ in range(20):
        s = await t.sample(200)
        v = np.array(values(s.data))
        counts += np.bincount(v, minlength=9)
        assert np.allclose(s.probabilities, p[v])  # the whole table's law, each draw
        assert s.table_size == 9
    assert chi2(counts, p) < CHI2_999_DF8, counts.tolist()


async def test_weights_are_the_in_process_tables(where: tuple[Any, Any]) -> None:
    srv, _ = where
    prios = [0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0]
    shared = await srv.replay_table(
        fresh(), 30, np.float32, (3,), sampler=aqueue.Prioritized(0.6), shards=3, seed=2
    )
    local = aqueue.ReplayTable(30, np.float32, (3,), sampler=aqueue.Prioritized(0.6), seed=2)
    for v, p in enumerate(prios):
        await shared.insert(item(v), priority=p)
        await local.insert(item(v), priority=p)
    ref = await local.sample(2000)
    prob_of = dict(zip(values(ref.data), ref.probabilities.tolist()))
    assert len(prob_of) == len(prios)
    s = await shared.sample(64)
    v = values(s.data)
    assert np.allclose(s.probabilities, [prob_of[x] for x in v])
    for beta in (0.0, 0.4, 1.0):
        expected = (len(prios) * np.array([prob_of[x] for x in v])) ** -beta
        assert np.allclose(s.weights(beta), expected / expected.max())


# -- cancellation ---------------------------------------------------------------------------


async def _cancel_trials(t: Any, native: bool, rng: random.Random, trials: int) -> int:
    """Samples cancelled at random moments; the draws of those that returned."""
    drawn = 0
    for _ in range(trials):
        n = rng.choice([1, 2, 5])
        delay = rng.choice([0.0, 0.0005, 0.002, 0.005, 0.02])
        if native:
            import asyncio

            task = asyncio.ensure_future(t.sample(n))
            await asyncio.sleep(delay)
            task.cancel()
            try:
                drawn += len(await task)
            except asyncio.CancelledError:
                pass
        else:
            with anyio.move_on_after(delay):
                drawn += len(await t.sample(n))
    return drawn


@pytest.mark.parametrize("held", [0, 1, 30])
@pytest.mark.parametrize("native", [False, True])
async def test_a_cancelled_sample_moves_no_counter_on_any_shard(
    where: tuple[Any, Any], anyio_backend: str, held: int, native: bool
) -> None:
    if native and anyio_backend != "asyncio":
        pytest.skip("native cancellation is asyncio's")
    srv, raw = where
    name = fresh()
    # each shard admits a few samples beyond its inserts, then samples wait
    limiter = aqueue.RateLimiter(1.0, 1, -6.0, float("inf"))
    t = await srv.replay_table(
        name,
        30,
        np.float32,
        (3,),
        sampler=aqueue.Prioritized(1.0),
        rate_limiter=limiter,
        shards=3,
        seed=held,
    )
    for v in range(held):
        await t.insert(item(v), priority=1.0 + v % 4)
    rng = random.Random(held * 2 + native)
    drawn = await _cancel_trials(t, native, rng, 40)
    st = await t.statistics()
    assert st.samples == drawn
    assert st.samples_waiting == 0
    state = shard_state(raw, name)
    assert sum(s["samples"] for s in state) == drawn
    assert all(s["held"] == 0 and s["holds"] == 0 for s in state), state
    assert sum(s["times"] for s in state) == drawn
    if held == 0:
        assert drawn == 0


# -- inserts --------------------------------------------------------------------------------


async def test_an_insert_waits_only_while_no_shard_admits_it(where: tuple[Any, Any]) -> None:
    srv, _ = where
    # per shard: 2 items ahead of its samples (max_diff 6 / 3 shards)
    limiter = aqueue.RateLimiter(1.0, 3, float("-inf"), 6.0)
    t = await srv.replay_table(fresh(), 30, np.float32, (3,), rate_limiter=limiter, shards=3)
    keys = [await t.insert(item(v)) for v in range(6)]
    assert sorted(k % 3 for k in keys) == [0, 0, 1, 1, 2, 2]  # each shard took two
    # cancelled while waiting: nothing inserted, no registration left
    with anyio.move_on_after(0.3):
        await t.insert(item(99))
        pytest.fail("the insert did not wait")
    st = await t.statistics()
    assert (st.inserts, st.inserts_waiting) == (6, 0)
    got: list[int] = []

    async def insert() -> None:
        got.append(await t.insert(item(6)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(insert)
        await anyio.sleep(0.3)
        assert not got  # every shard refuses it
        # registered on every shard, it is one insert waiting, not one per shard
        assert (await t.statistics()).inserts_waiting == 1
        s = await t.sample(1)  # one shard admits one more: the insert goes there
    assert got[0] % 3 == int(s.keys[0]) % 3
    st = await t.statistics()
    assert (st.inserts, st.inserts_waiting, st.size) == (7, 0, 7)


# -- an empty table -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["server", "cluster"])
async def test_a_sample_of_an_empty_table_waits_registered_and_any_shard_wakes_it(
    kind: str, raw_redis: Any, request: pytest.FixtureRequest
) -> None:
    """A sample of an empty sharded table is one sample waiting (not none, not one per
    shard), and an insert on whichever shard ends its wait at once, not after
    ``wait_timeout`` (long here: a poll would outlast the guard)."""
    opts = {"lease_time": 30.0, "wait_timeout": 8.0}
    if kind == "server":
        server = connect(raw_redis.url, **opts)
    else:
        from redis_cluster_util import cluster_server

        server = cluster_server(request.getfixturevalue("redis_cluster").url, **opts)
    async with server as srv:
        t = await srv.replay_table(fresh(), 30, np.float32, (3,), shards=3)
        shards = set()
        for v in range(3):  # the inserts go to the shards in turn: each shard once
            got: list[Any] = []
            with anyio.fail_after(4):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_sample_into, t, got)
                    await waiting(t, samples=1)
                    shards.add(int(await t.insert(item(v))) % 3)
            assert values(got[0].data) == [v]
            st = await t.statistics()
            assert (st.samples, st.samples_waiting) == (v + 1, 0)
            await t.delete(got[0].keys)  # empty again
        assert shards == {0, 1, 2}


async def _sample_into(t: Any, got: list[Any]) -> None:
    got.append(await t.sample(1))
