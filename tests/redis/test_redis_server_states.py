"""Server states a user meets: producer registrations kept alive by an open connection
block and seen expired as soon as they are; a full server (maxmemory, noeviction),
where what adds data fails with ServerFullError and reads that write bookkeeping
(dequeue, sample) still work; a server whose policy can evict aqueue's keys (a warning
at connect()); a server restarted without persistence (the library is loaded again,
or the error says what happened)."""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import RedisProc, check_table, restart_redis, until

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


# -- producer registrations -------------------------------------------------------------


async def test_registrations_live_with_the_block_and_expire_after_it(
    redis_server: RedisProc, qname: str
) -> None:
    """While the block that registered them is open, a queue's and a table's producer
    registrations outlive several lease times (the heartbeat refreshes them); after it
    ended without ``producer_done``, ``is_closed()`` and ``statistics().closed`` say True
    once the last registration expired, with no other call in between."""
    lease = 1.0
    async with aqueue.redis.connect(redis_server.url, lease_time=lease, wait_timeout=0.1) as srv:
        q = await srv.fifo_queue(qname, 4, np.int64, ())
        t = await srv.replay_table(qname + "-t", 4, np.int64, ())
        await q.register_producer()
        await t.register_producer()
        await anyio.sleep(3 * lease)  # three lease times: kept alive by the heartbeat
        assert not await q.is_closed()
        assert not await t.is_closed()
        with redis_server.client() as admin:  # both registrations are still there
            assert admin.zcard(f"aq:{{{qname}}}:producers") == 1
            assert admin.zcard(f"aq:{{{qname}-t}}:producers") == 1
    # The block ended without producer_done: the registrations expire after `lease`.
    async with aqueue.redis.connect(redis_server.url, wait_timeout=0.1) as other:
        q2 = await other.fifo_queue(qname, 4, np.int64, ())
        t2 = await other.replay_table(qname + "-t", 4, np.int64, ())
        await until(q2.is_closed)  # read-only calls only: no write reaped them
        await until(t2.is_closed)
        assert (await q2.statistics()).closed
        assert (await t2.statistics()).closed
        with redis_server.client() as admin:  # (the stored flag is set by a later write)
            assert admin.hget(f"aq:{{{qname}}}:meta", "closed") == b"0"
            assert admin.hget(f"aq:{{{qname}-t}}:meta", "closed") == b"0"
        with pytest.raises(aqueue.OutOfRangeError):
            await q2.dequeue()
        with pytest.raises(aqueue.QueueClosedError):
            await t2.insert(np.int64(1))
        await other.delete_queue(qname)
        await other.delete_table(qname + "-t")


# -- a full server ----------------------------------------------------------------------


async def _fill(call: Any) -> int:
    """Call ``call()`` until the server is full; how many calls went in."""
    n = 0
    while True:
        try:
            await call()
        except aqueue.redis.ServerFullError:
            return n
        n += 1


async def test_a_full_server_refuses_writes_and_serves_reads(own_redis: RedisProc) -> None:
    """At maxmemory with noeviction: inserts and enqueues raise ServerFullError naming
    the cause; samples (async and from a thread), dequeues, priority updates, deletes,
    statistics, closes, opening and reopening work, and a sample leaves no copy
    behind; deleting items makes room for inserts again."""
    with own_redis.client() as admin:
        admin.config_set("maxmemory", str(4 << 20))
    payload = np.zeros(4096, np.uint8)  # above the inline size: one key per item
    async with aqueue.redis.connect(own_redis.url) as srv:
        t = await srv.replay_table("full", 100_000, np.uint8, (4096,))
        q = await srv.fifo_queue("fullq", 100_000, np.uint8, (4096,))
        await q.enqueue_many(np.zeros((8, 4096), np.uint8))
        inserted = await _fill(lambda: t.insert(payload))
        assert inserted > 100
        # Full by a margin: at the edge, memory freed by the server's own buffers (a
        # client's query buffer) could let the next small write in.
        with own_redis.client() as admin:
            used = int(admin.info("memory")["used_memory"])
            admin.config_set("maxmemory", str(used - (1 << 20)))
        with pytest.raises(aqueue.redis.ServerFullError, match="maxmemory") as info:
            await t.insert(payload)
        assert "noeviction" in str(info.value)
        assert isinstance(info.value, aqueue.redis.ServerError)
        with pytest.raises(aqueue.redis.ServerFullError):
            await q.enqueue(payload)
        fresh = await srv.fifo_queue("full-new", 4, np.int64, ())  # (one small hash)
        with pytest.raises(aqueue.redis.ServerFullError):
            await fresh.enqueue(1)
        s = await t.sample(8)
        assert s.data.shape == (8, 4096)
        view = await anyio.to_thread.run_sync(lambda: t.blocking().sample(4, timeout=5.0))
        assert view.data.shape == (4, 4096)
        assert (await t.update_priorities(s.keys, np.full(8, 2.0))).all()
        assert (await q.dequeue_many(2)).shape == (2, 4096)
        again = await srv.replay_table("full", 100_000, np.uint8, (4096,))
        assert (await again.statistics()).samples == 12
        with own_redis.client() as admin:
            assert check_table(admin, "full") == []  # no sample copy (o:*) left behind
        with own_redis.client() as admin:
            admin.config_set("maxmemory", str(4 << 20))
        assert (await t.delete(np.arange(64))).all()
        await t.insert(payload)  # room again
        await q.aclose()
        await t.aclose()
        assert await t.is_closed()
        await srv.delete_table("full")
        await srv.delete_queue("fullq")


def test_every_form_of_an_out_of_memory_refusal_is_server_full() -> None:
    """Redis refuses a write at maxmemory in three forms: an OOM reply, a command queued
    in a MULTI refused with it, and a whole EXEC refused because queuing the
    transaction's payloads took the server past the limit (EXECABORT): each is
    ServerFullError, which a table's sample relies on to go again without MULTI."""
    import redis
    from redis.exceptions import ExecAbortError

    from aqueue.redis._core._clients import map_error

    oom = "OOM command not allowed when used memory > 'maxmemory'."
    for exc in (
        redis.OutOfMemoryError(oom),
        redis.OutOfMemoryError(f"Command # 1 (MSET aq:{{q}}:e:1) of pipeline caused error: {oom}"),
        ExecAbortError(f"Transaction discarded because of: {oom}"),
    ):
        mapped = map_error(exc, "rt_insert on aq:{t}:meta")
        assert isinstance(mapped, aqueue.redis.ServerFullError), exc
        assert str(mapped).startswith("rt_insert on aq:{t}:meta: the Redis server is full")
    other = map_error(ExecAbortError("Transaction discarded because of previous errors."), "x")
    assert type(other) is aqueue.redis.ServerError


# -- a policy that evicts ---------------------------------------------------------------


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random", "volatile-ttl"])
async def test_connect_warns_when_the_policy_can_evict(own_redis: RedisProc, policy: str) -> None:
    """A server whose maxmemory-policy evicts keys: connect() warns, naming the server,
    the policy and what it means for aqueue's keys."""
    with own_redis.client() as admin:
        admin.config_set("maxmemory-policy", policy)
    with pytest.warns(RuntimeWarning, match=f"maxmemory-policy {policy}") as caught:
        async with aqueue.redis.connect(own_redis.url):
            pass
    text = str(caught[0].message)
    assert text.startswith(f"aqueue.redis.connect: the server at 127.0.0.1:{own_redis.port} ")
    assert "set maxmemory-policy noeviction" in text
    what = "its wake-up lists and lease markers" if policy.startswith("volatile") else "items"
    assert what in text


async def test_no_warning_without_a_memory_limit(own_redis: RedisProc) -> None:
    """With maxmemory 0 (no limit) nothing is evicted, whatever the policy: no warning
    (the suite turns warnings into errors)."""
    with own_redis.client() as admin:
        admin.config_set("maxmemory", "0")
        admin.config_set("maxmemory-policy", "allkeys-lru")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        async with aqueue.redis.connect(own_redis.url) as srv:
            await srv.fifo_queue("quiet", 2, np.int64, ())


# -- a restart without persistence ------------------------------------------------------


async def test_the_library_is_loaded_again_after_a_restart(own_redis: RedisProc) -> None:
    """The server restarts without persistence (its data and aqueue's library gone): a
    client that may load functions loads the library again at its next call; the
    queues and tables opened before say they are gone from the server (and why that
    may be), and opening them again works."""
    async with aqueue.redis.connect(own_redis.url, wait_timeout=0.1) as srv:
        q = await srv.fifo_queue("survivor", 4, np.int64, ())
        t = await srv.replay_table("survivor-t", 4, np.int64, ())
        await q.enqueue(1)
        restart_redis(own_redis)
        for call in (lambda: q.enqueue(2), lambda: t.insert(np.int64(1))):
            text = await _error_after_restart(call)
            assert "is gone from the server" in text
            assert "restart without persistence" in text
        q = await srv.fifo_queue("survivor", 4, np.int64, ())
        await q.enqueue(3)
        assert await q.dequeue() == 3
        t = await srv.replay_table("survivor-t", 4, np.int64, ())
        assert await t.insert(np.int64(5)) == 0


async def _error_after_restart(call: Any) -> str:
    """The message of the QueueClosedError ``call()`` raises once it reaches the
    restarted server (the first call may find its connection dropped)."""
    for _attempt in range(2):
        try:
            await call()
        except aqueue.redis.ServerConnectionError:
            continue
        except aqueue.QueueClosedError as exc:
            return str(exc)
    pytest.fail("the old handle did not say its queue or table is gone")


async def test_without_load_functions_the_error_says_what_happened(own_redis: RedisProc) -> None:
    """A client that may not load functions (an ACL actor) is told that the library
    is missing on the server, that the server restarted without persistence or its
    functions were flushed, and that an admin must load it again."""
    async with aqueue.redis.connect(own_redis.url, wait_timeout=0.1) as admin_srv:
        await admin_srv.fifo_queue("lost", 4, np.int64, ())
    async with aqueue.redis.connect(own_redis.url, load_functions=False) as srv:
        q = await srv.fifo_queue("lost", 4, np.int64, ())
        with own_redis.client() as admin:
            admin.function_flush()
        with pytest.raises(aqueue.redis.ServerError) as info:
            await q.enqueue(1)
        text = str(info.value)
        assert "aqueue's Lua library is not loaded on the server" in text
        assert "restarted without persistence, or its functions were flushed" in text
        assert "load_functions=True" in text
