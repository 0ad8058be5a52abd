"""Queues over shards (``fifo_queue(..., shards=3)``), on one server and on the local
cluster (three primaries): today's queue-contract bodies over three shards (checked as
multisets: a sharded queue keeps no order across calls), then what only shards have:
the ``shards`` argument and its reopen rule, one shard's keys being today's, batches
kept whole and in order in one shard, the capacity as a total, dequeues gathered from
several shards, one end of data across shards, and the thread view's refusal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import until
from shards_util import ShardedServer
from test_redis_contract import (
    test_bad_input_changes_nothing,
    test_cancelled_dequeue_burst_consumes_nothing,
    test_close_lets_pending_enqueue_finish,
    test_close_wakes_every_waiter,
    test_closed_queue_errors,
    test_delete_queue,
    test_dequeue_burst_ends_on_a_closed_empty_queue,
    test_dequeue_burst_waits_for_one_then_takes_what_is_there,
    test_dequeue_many_takes_exactly_n,
    test_dequeue_up_to_after_close,
    test_element_forms_named_and_tuple,
    test_iteration,
    test_order_and_forms,
    test_progressive_dequeue_larger_than_capacity,
    waiting,
)

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

__all__ = [
    "test_bad_input_changes_nothing",
    "test_cancelled_dequeue_burst_consumes_nothing",
    "test_close_lets_pending_enqueue_finish",
    "test_close_wakes_every_waiter",
    "test_closed_queue_errors",
    "test_delete_queue",
    "test_dequeue_burst_ends_on_a_closed_empty_queue",
    "test_dequeue_burst_waits_for_one_then_takes_what_is_there",
    "test_dequeue_many_takes_exactly_n",
    "test_dequeue_up_to_after_close",
    "test_element_forms_named_and_tuple",
    "test_iteration",
    "test_order_and_forms",
    "test_progressive_dequeue_larger_than_capacity",
]


@pytest.fixture(scope="module", params=["server-keys", "server-inline", "cluster-keys"])
async def base(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, Any]]:
    """A RedisServer per storage and backend for the module (queues get unique names),
    and a raw client of where its keys are."""
    from aqueue.redis._core import _shared

    where, storage = request.param.split("-")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_shared, "INLINE_MAX", 0 if storage == "keys" else 1 << 30)
        if where == "cluster":
            from redis_cluster_util import AllNodes, cluster_server

            cluster = request.getfixturevalue("redis_cluster")
            block = cluster_server(cluster.url, lease_time=2.0, wait_timeout=0.1)
            raw = AllNodes(cluster)
        else:
            proc = request.getfixturevalue("redis_server")
            block = aqueue.redis.connect(proc.url, lease_time=2.0, wait_timeout=0.1)
            raw = proc
        async with block as server:
            yield server, raw


@pytest.fixture
def srv(base: tuple[Any, Any]) -> ShardedServer:
    """Queues of three shards; the contract bodies' "shuffle" kind checks multisets."""
    return ShardedServer(base[0], 3, unordered=True)


@pytest.fixture
def rsrv(srv: ShardedServer) -> ShardedServer:
    return srv


@pytest.fixture
def server(base: tuple[Any, Any]) -> Any:
    return base[0]


@pytest.fixture
def raw(base: tuple[Any, Any]) -> Any:
    return base[1]


@pytest.fixture
def kind() -> str:
    return "unordered"


def ints(batch: Any) -> list[int]:
    return [int(v) for v in np.asarray(batch)]


def lengths(raw: Any, name: str) -> dict[str, int]:
    """The number of elements stored in each shard of queue ``name`` (by its tag)."""
    with raw.client() as c:
        metas = [k.decode() for k in c.scan_iter(match=f"aq:{{{name}*}}:meta", count=1000)]
        return {  # (a FIFO shard keeps a list, a shuffle shard a hash of slots)
            m[4 : m.index("}")]: int(c.llen(m[:-4] + "items")) + int(c.hlen(m[:-4] + "slots"))
            for m in metas
        }


# -- the shards argument ----------------------------------------------------------------


async def test_the_shards_argument_is_checked_stored_and_compared(
    server: Any, raw: Any, qname: str
) -> None:
    """Bad values are refused naming what was expected; the count is stored on creation
    and an explicit other count on reopen is refused naming ``shards``; None opens it
    as stored; more shards than capacity is refused."""
    for bad in (0, -1, "3", 2.0, True):
        with pytest.raises(aqueue.ElementSpecError, match=r"shards must be (None or )?an int >= 1"):
            await server.fifo_queue(qname, 6, np.int64, (), shards=bad)
    with pytest.raises(aqueue.ElementSpecError, match=r"shards must be at most capacity \(2\)"):
        await server.fifo_queue(qname, 2, np.int64, (), shards=3)
    with raw.client() as c:
        assert list(c.scan_iter(match=f"aq:{{{qname}*", count=1000)) == []  # nothing made
    q = await server.fifo_queue(qname, 7, np.int64, (), shards=3)
    assert (q.shards, q.capacity) == (3, 7)
    assert sorted(lengths(raw, qname)) == sorted([qname, *_tags(raw, qname)])
    with pytest.raises(aqueue.ElementSpecError, match=r"with shards 3, but shards=2 was given"):
        await server.fifo_queue(qname, 7, np.int64, (), shards=2)
    with pytest.raises(aqueue.ElementSpecError, match=r"with shards 3, but shards=1 was given"):
        await server.fifo_queue(qname, 7, np.int64, (), shards=1)
    with pytest.raises(aqueue.ElementSpecError, match="capacity 7, but 8"):
        await server.fifo_queue(qname, 8, np.int64, ())
    again = await server.fifo_queue(qname, 7, np.int64, ())
    assert (again.shards, again.capacity) == (3, 7)
    one = await server.fifo_queue(qname + "1", 7, np.int64, (), shards=1)
    assert one.shards == 1
    with pytest.raises(aqueue.ElementSpecError, match=r"with shards 1, but shards=3 was given"):
        await server.fifo_queue(qname + "1", 7, np.int64, (), shards=3)
    assert (await server.fifo_queue(qname + "1", 7, np.int64, ())).shards == 1
    shard = _tags(raw, qname)[0]
    with pytest.raises(aqueue.ElementSpecError, match=f"a shard of the sharded queue '{qname}'"):
        await server.fifo_queue(shard, 2, np.int64, ())
    with pytest.raises(aqueue.ElementSpecError, match=f"a shard of the sharded queue '{qname}'"):
        await server.delete_queue(shard)


def _tags(raw: Any, name: str) -> list[str]:
    """The names of the shards >= 1 of queue ``name``."""
    return sorted(t for t in lengths(raw, name) if t != name)


async def test_the_default_is_one_shard_on_a_server_and_the_primaries_on_a_cluster(
    server: Any, raw: Any, qname: str
) -> None:
    """shards=None creates 1 shard on one server (today's keys, no layout key) and one
    per primary on the cluster, each on a primary of its own."""
    q = await server.fifo_queue(qname, 9, np.int64, ())
    cluster = hasattr(raw, "_cluster")
    assert q.shards == (3 if cluster else 1)
    await q.enqueue(1)
    with raw.client() as c:
        keys = sorted(k.decode() for k in c.scan_iter(match=f"aq:{{{qname}*", count=1000))
        if not cluster:
            rest = [k for k in keys if not k.startswith(f"aq:{{{qname}}}:e:")]  # (payloads)
            assert rest == [f"aq:{{{qname}}}:items", f"aq:{{{qname}}}:meta"]
        else:
            owners = {raw._cluster.owner(f"{{{t}}}") for t in lengths(raw, qname)}
            assert len(owners) == 3  # one shard per primary


async def test_delete_removes_every_shard(server: Any, raw: Any, qname: str) -> None:
    q = await server.fifo_queue(qname, 6, np.int64, (), shards=3)
    for v in range(6):
        await q.enqueue(v)
    assert await server.delete_queue(qname)
    with raw.client() as c:
        assert list(c.scan_iter(match=f"aq:{{{qname}*", count=1000)) == []
    assert not await server.delete_queue(qname)


# -- semantics over shards ----------------------------------------------------------------


async def test_batches_stay_whole_and_in_order_in_one_shard(
    server: Any, raw: Any, qname: str
) -> None:
    """Each enqueue_many lands in one shard when one has room for it whole (here every
    shard can hold everything); concurrent batches come out each in its order; every
    element exactly once."""
    q = await server.fifo_queue(qname, 90, np.int64, (2,), shards=3)  # (room for all)
    before = lengths(raw, qname)
    await q.enqueue_many(np.array([[0, i] for i in range(4)]))
    after = lengths(raw, qname)
    assert sorted(after[t] - before[t] for t in after) == [0, 0, 4]  # one shard has it all

    async def producer(b: int) -> None:
        for j in range(5):
            batch = np.array([[b * 10 + j, i] for i in range(1 + (b + j) % 4)])
            await q.enqueue_many(batch)

    got: list[tuple[int, int]] = []

    async def consumer() -> None:
        while len(got) < 4 + sum(1 + (b + j) % 4 for b in range(1, 5) for j in range(5)):
            got.extend((int(r[0]), int(r[1])) for r in await q.dequeue_burst(3))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer)
            for b in range(1, 5):
                tg.start_soon(producer, b)
    assert len(set(got)) == len(got)
    per_batch: dict[int, list[int]] = {}
    for batch_id, i in got:
        per_batch.setdefault(batch_id, []).append(i)
    for batch_id, idx in per_batch.items():
        assert idx == list(range(len(idx))), f"batch {batch_id} out of order: {idx}"
    assert sorted(per_batch) == [0, *[b * 10 + j for b in range(1, 5) for j in range(5)]]


async def test_capacity_is_the_total_and_an_enqueue_waits_only_when_no_shard_has_room(
    server: Any, raw: Any, qname: str
) -> None:
    """capacity=6 over 3 shards takes 6 single enqueues without waiting (a shard that
    is full sends the next to another); the 7th waits until a dequeue frees room."""
    q = await server.fifo_queue(qname, 6, np.int64, (), shards=3)
    with anyio.fail_after(10):
        for v in range(6):
            await q.enqueue(v)
    assert sorted(lengths(raw, qname).values()) == [2, 2, 2]
    s = await q.statistics()
    assert (s.size, s.capacity, s.tasks_waiting_enqueue) == (6, 6, 0)
    got: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.enqueue, 6)
        await waiting(q, put=1)
        assert await q.size() == 6
        got.append(int(await q.dequeue()))
    got += ints(await q.dequeue_many(6))
    assert sorted(got) == list(range(7))
    assert (await q.statistics()).tasks_waiting_enqueue == 0


async def test_a_batch_goes_whole_where_it_fits_and_in_runs_where_none_has_room(
    server: Any, raw: Any, qname: str
) -> None:
    """Shards of capacity 3 holding one element each: a batch of 2 goes whole into one
    shard; then no shard has room for a batch of 3, and it is admitted at once in
    runs (the total has room), each in order in one shard."""
    q = await server.fifo_queue(qname, 9, np.int64, (), shards=3)
    with anyio.fail_after(20):
        for v in range(3):
            await q.enqueue(v)
        assert sorted(lengths(raw, qname).values()) == [1, 1, 1]
        await q.enqueue_many(np.arange(10, 12))
        assert sorted(lengths(raw, qname).values()) == [1, 1, 3]
        await q.enqueue_many(np.arange(20, 23))  # (must not wait: 2 + 1 in two shards)
        assert sorted(lengths(raw, qname).values()) == [2, 3, 3]
        got = ints(await q.dequeue_many(8))
    assert sorted(got) == [0, 1, 2, 10, 11, 20, 21, 22]
    assert [v for v in got if 10 <= v < 20] == [10, 11]  # whole, in order, in one shard
    assert got.index(20) < got.index(21)  # the first run, in order in its shard


async def test_a_batch_larger_than_a_shard_goes_in_runs_without_waiting(
    server: Any, raw: Any, qname: str
) -> None:
    """A batch larger than every shard's capacity can never be whole: while the total
    has room it is admitted at once, in consecutive runs, each in order in one shard;
    past the total it waits for room, as on one server."""
    q = await server.fifo_queue(qname, 6, np.int64, (), shards=3)
    with anyio.fail_after(20):
        await q.enqueue_many(np.arange(5))  # (must not wait: the queue has room for 5)
        assert sorted(lengths(raw, qname).values()) == [1, 2, 2]
        got: list[int] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(q.enqueue_many, np.arange(10, 14))  # 1 fits; 3 wait for room
            await waiting(q, put=1)
            got += ints(await q.dequeue_many(5))
        got += ints(await q.dequeue_many(4))
    assert sorted(got) == [0, 1, 2, 3, 4, 10, 11, 12, 13]


async def test_dequeue_many_gathers_from_several_shards(server: Any, raw: Any, qname: str) -> None:
    """Two elements in each of three shards: dequeue_many(5) takes 5 of them (from at
    least three shards' worth), then a waiting dequeue_many(3) completes with one left
    and two enqueued later in other shards."""
    q = await server.fifo_queue(qname, 6, np.int64, (), shards=3)
    for v in range(6):
        await q.enqueue(v)
    assert sorted(lengths(raw, qname).values()) == [2, 2, 2]
    first = ints(await q.dequeue_many(5))
    assert len(first) == 5
    out: list[int] = []

    async def take() -> None:
        out.extend(ints(await q.dequeue_many(3)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(take)
        await waiting(q, get=1)
        await q.enqueue(6)
        await q.enqueue(7)
    assert sorted(first + out) == list(range(8))
    s = await q.statistics()
    assert (s.size, s.enqueued_total, s.dequeued_total) == (0, 8, 8)


async def test_one_end_of_data_across_shards(server: Any, raw: Any, qname: str) -> None:
    """The last registered producer's end closes every shard; consumers drain every
    shard, then get OutOfRangeError; close() from a thread-free sync call closes every
    shard too."""
    q = await server.fifo_queue(qname, 9, np.int64, (), shards=3)
    a = await q.register_producer()
    b = await q.register_producer()
    for v in range(7):
        await q.enqueue(v)
    await q.producer_done(a)
    assert not await q.is_closed()
    await q.producer_done(b)
    with raw.client() as c:
        closed = {t: c.hget(f"aq:{{{t}}}:meta", "closed") for t in lengths(raw, qname)}
    assert set(closed.values()) == {b"1"}, closed
    got = [int(v) async for v in q]
    assert sorted(got) == list(range(7))
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue_up_to(2)
    r = await server.fifo_queue(qname + "c", 9, np.int64, (), shards=3)
    await r.enqueue_many(np.arange(3))
    waiter: list[Any] = []

    async def many() -> None:
        try:
            await r.dequeue_many(5)
        except aqueue.OutOfRangeError as exc:
            waiter.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(many)
        await waiting(r, get=1)
        await anyio.to_thread.run_sync(r.close)
    assert len(waiter) == 1
    assert await r.size() == 3  # nothing consumed
    with raw.client() as c:
        closed = {t: c.hget(f"aq:{{{t}}}:meta", "closed") for t in lengths(raw, qname + "c")}
    assert set(closed.values()) == {b"1"}, closed


async def test_the_thread_view_needs_one_shard(server: Any, qname: str) -> None:
    q = await server.fifo_queue(qname, 6, np.int64, (), shards=3)
    with pytest.raises(RuntimeError, match="has 3 shards: its thread view"):
        q.blocking()
    one = await server.fifo_queue(qname + "1", 6, np.int64, (), shards=1)
    assert one.blocking() is not None


async def test_a_shuffle_queue_mixes_across_shards_and_keeps_min_after_dequeue_in_total(
    server: Any, raw: Any, qname: str
) -> None:
    """Three batches of 8, each whole in a shard of its own; min_after_dequeue 6 kept as
    2 per shard: a dequeue_many(9) draws from every shard (not the fullest first), two
    of them leave 2 in each; one more waits until close, which releases the rest."""
    q = await server.random_shuffle_queue(qname, 30, 6, np.int64, (), shards=3, seed=3)
    assert (q.shards, q.capacity, q.min_after_dequeue) == (3, 30, 6)  # the totals
    for base in (0, 100, 200):
        await q.enqueue_many(np.arange(base, base + 8))
    assert sorted(lengths(raw, qname).values()) == [8, 8, 8]
    with anyio.fail_after(20):
        first = ints(await q.dequeue_many(9))
        assert {v // 100 for v in first} == {0, 1, 2}  # each element's shard drawn
        got = first + ints(await q.dequeue_many(9))
    assert len(set(got)) == 18
    assert sorted(lengths(raw, qname).values()) == [2, 2, 2]  # 6 kept, in total
    with anyio.move_on_after(0.3) as scope:
        await q.dequeue()
    assert scope.cancelled_caught
    assert await q.size() == 6
    await q.aclose()
    rest = ints(await q.dequeue_up_to(10))
    assert sorted(got + rest) == [b + i for b in (0, 100, 200) for i in range(8)]
    with pytest.raises(aqueue.ElementSpecError, match=r"at most capacity - min_after_dequeue"):
        await server.random_shuffle_queue(qname + "x", 8, 6, np.int64, (), shards=3)


async def test_a_take_from_a_full_shuffle_queue_holds_what_the_shards_can_give(
    server: Any, qname: str
) -> None:
    """A full shuffle queue (6 over 3 shards, min_after_dequeue 2: each shard keeps its
    part) with an enqueue waiting for room: a dequeue_up_to(6), more than the shards can
    give while open, holds what they can give, which lets the enqueue in (it does not
    ask a shard for its kept part over and over); close ends the take with every
    element once."""
    q = await server.random_shuffle_queue(qname, 6, 2, np.int64, (), shards=3, seed=1)
    for v in range(6):
        await q.enqueue(v)
    got: list[int] = []

    async def take() -> None:
        got.extend(ints(await q.dequeue_up_to(6)))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(q.enqueue, 6)
            await waiting(q, put=1)
            tg.start_soon(take)

            async def enqueued() -> bool:  # the enqueue went in; the take waits for more
                s = await q.statistics()
                return (s.tasks_waiting_enqueue, s.tasks_waiting_dequeue) == (0, 1)

            await until(enqueued, limit_s=5)
            await q.aclose()
        got += ints(await q.dequeue_up_to(10))
    assert sorted(got) == list(range(7))


async def test_no_shard_is_left_behind_while_a_full_queue_flows(server: Any, qname: str) -> None:
    """A full FIFO queue (11 per shard) that flows in batches of 4 (take 4, put 4,
    one process): room comes back where a take took, so a shard that stays a little
    less full than the others (room for fewer than 4) gets no put; its elements must
    still be taken in turn, not left behind while the others flow."""
    q = await server.fifo_queue(qname, 33, np.int64, (), shards=3)
    for v in range(0, 32, 4):
        await q.enqueue_many(np.arange(v, v + 4))
    first = set(range(32))
    got: list[int] = []
    with anyio.fail_after(20):
        for v in range(100, 400, 4):
            got += ints(await q.dequeue_many(4))
            await q.enqueue_many(np.arange(v, v + 4))
    assert first <= set(got), sorted(first - set(got))


# -- a process's line of enqueues ------------------------------------------------------


async def full_queue(server: Any, qname: str) -> Any:
    """A FIFO queue of 6 over 3 shards, full (0..5)."""
    q = await server.fifo_queue(qname, 6, np.int64, (), shards=3)
    for v in range(6):
        await q.enqueue(v)
    return q


async def test_enqueues_of_one_process_wait_in_line_and_a_close_lets_each_finish(
    server: Any, qname: str
) -> None:
    """Three enqueues of one process into a full queue: one waits for room, the others
    wait in line (on hold, counted as waiting), however long they wait (past their
    registrations' lifetime, so the holds are renewed); a plain close then lets every
    one of them finish, as a close lets pending enqueues finish on one server."""
    q = await full_queue(server, qname)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for base in (10, 20, 30):
                tg.start_soon(q.enqueue_many, np.arange(base, base + 2))
            await waiting(q, put=3)
            await anyio.sleep(2.0)  # (a registration lives 4 * 0.1 + 1 s here)
            assert (await q.statistics()).tasks_waiting_enqueue == 3
            await q.aclose()
            got = [int(await q.dequeue()) for _ in range(12)]
        with pytest.raises(aqueue.OutOfRangeError):
            await q.dequeue()
    assert sorted(got) == [*range(6), 10, 11, 20, 21, 30, 31]


async def test_a_cancelled_enqueue_in_line_holds_nothing_and_the_turn_passes_on(
    server: Any, qname: str
) -> None:
    """Three single enqueues wait on a full queue (one holds the process's turn, two
    wait in line). Cancelling the holder and then one in line leaves one waiting; a
    dequeue lets that one in (the turn passed on); the cancelled ones put nothing and
    leave no registration or hold behind."""
    q = await full_queue(server, qname)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            scopes = [anyio.CancelScope() for _ in range(3)]

            async def put(v: int, scope: anyio.CancelScope) -> None:
                with scope:
                    await q.enqueue(v)

            for v, scope in zip((100, 101, 102), scopes):
                tg.start_soon(put, v, scope)
                await waiting(q, put=v - 99)  # (100 came first: it holds the turn)
            for n, scope in ((2, scopes[0]), (1, scopes[1])):
                scope.cancel()

                async def settled(n: int = n) -> bool:
                    return (await q.statistics()).tasks_waiting_enqueue == n

                await until(settled, limit_s=1.0)  # (before a stale hold would expire)
            first = int(await q.dequeue())
        await q.aclose()
        rest = ints(await q.dequeue_up_to(10))
    assert scopes[2].cancelled_caught is False
    assert sorted([first, *rest]) == [*range(6), 102]


async def test_shapeless_queue(server: Any, qname: str) -> None:
    """shapes=None over shards: elements keep their own shapes (in any order across
    calls); batch dequeues are refused."""
    q = await server.fifo_queue(qname, 10, np.float32, shards=3)
    await q.enqueue(np.zeros((2, 3), np.float32))
    await q.enqueue(np.ones(5, np.float32))
    with pytest.raises(aqueue.ElementSpecError, match="declared shapes"):
        await q.dequeue_many(2)
    assert {(await q.dequeue()).shape, (await q.dequeue()).shape} == {(2, 3), (5,)}
