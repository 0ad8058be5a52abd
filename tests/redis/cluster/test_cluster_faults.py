"""Faults on a real cluster: which errors prove a call did not run (only those are sent
again), and what callers see when a primary is SIGKILLed: with a replica, every waiter
and every call sent after the kill goes on once the replica is promoted, and a call in
flight at the kill fails with ServerConnectionError (never sent twice); with no
replica left, every waiter fails with ServerConnectionError within
``failover_timeout``. Nothing hangs. And a native cancellation that arrives while a
call runs on the server waits for it."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest
import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.exceptions import ClusterDownError, MovedError, TryAgainError
from redis.retry import Retry
from redis_cluster_util import SPIN_LIBRARY, ClusterProc, OneShardBlock, cluster_server

import aqueue.redis
from aqueue.redis._core._cluster import ClusterAsyncio
from aqueue.redis._core._cluster._faults import (
    RELOAD,
    Attempts,
    Outages,
    Recovery,
    function_missing,
    not_run,
)
from aqueue.redis._core._transport import Call

pytestmark = pytest.mark.timeout(90)

FAILOVER_TIMEOUT = 6.0  # the fixture's node timeout (1 s) plus 5 s
SHORT_TIMEOUT = 1.5  # (once no replica is left: only how fast it gives up is tested)


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def hangup_port() -> Iterator[int]:
    """A port whose server reads a command, then closes the connection unanswered."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    server.close()


def _sync_error(port: int) -> redis.RedisError:
    c = redis.Redis(port=port, retry=Retry(NoBackoff(), 0), socket_timeout=5)
    with c, pytest.raises(redis.RedisError) as err:
        c.execute_command("FCALL", "aq_version", 0)
    return err.value


async def _async_error(port: int) -> redis.RedisError:
    from redis.asyncio.retry import Retry as AsyncRetry

    c = redis.asyncio.Redis(port=port, retry=AsyncRetry(NoBackoff(), 0), socket_timeout=5)
    try:
        with pytest.raises(redis.RedisError) as err:
            await c.execute_command("FCALL", "aq_version", 0)
    finally:
        await c.aclose()
    return err.value


def test_only_errors_before_sending_prove_a_call_did_not_run(
    closed_port: int, hangup_port: int
) -> None:
    """redis-py's own wording, from real sockets: a refused connection proves the call
    never left; a connection lost after sending does not."""
    refused = [_sync_error(closed_port), asyncio.run(_async_error(closed_port))]
    hung_up = [_sync_error(hangup_port), asyncio.run(_async_error(hangup_port))]
    assert all(isinstance(e, redis.ConnectionError) and not_run(e) for e in refused), refused
    assert all(isinstance(e, redis.ConnectionError) and not not_run(e) for e in hung_up)
    refusals = [ClusterDownError("CLUSTERDOWN The cluster is down"), TryAgainError("TRYAGAIN")]
    refusals.append(MovedError("3999 127.0.0.1:6381"))
    assert all(not_run(e) for e in refusals)
    assert not not_run(redis.ResponseError("ERR something else"))
    assert not not_run(redis.AuthenticationError("Error connecting to x: invalid password"))
    assert not not_run(redis.TimeoutError("Timeout reading from 127.0.0.1:1"))
    assert function_missing(redis.ResponseError("Function not found"))
    assert not function_missing(None)
    # redis-py closing an idle connection as a task takes it: the command was not
    # written (writelines), or may have been (drain).
    assert not_run(AttributeError("'NoneType' object has no attribute 'writelines'"))
    assert not not_run(AttributeError("'NoneType' object has no attribute 'drain'"))
    assert not not_run(AttributeError("'Call' object has no attribute 'writelines2'"))


def test_recovery_waits_out_only_what_did_not_run(closed_port: int) -> None:
    refused = _sync_error(closed_port)
    lost = redis.ConnectionError("Connection closed by server.")
    outages = Outages()
    assert Recovery(outages, 1, 5.0, "x").delay(lost) is None  # may have run: never again
    assert Recovery(outages, 1, 5.0, "x").delay(redis.ResponseError("ERR")) is None
    assert not outages
    assert Recovery(outages, 1, 5.0, "x", idempotent=True).delay(lost) == pytest.approx(0.02)
    outages.end(1)
    recovery = Recovery(outages, 7, 0.5, "aq_take on aq:{q}:meta")
    delays: list[float] = []

    def retry_until_given_up() -> None:
        while (delay := recovery.delay(refused)) is not None:
            delays.append(delay)
            time.sleep(delay)

    with pytest.raises(aqueue.redis.ServerConnectionError) as err:
        retry_until_given_up()
    assert delays[:4] == pytest.approx([0.02, 0.04, 0.08, 0.16])
    assert max(delays) <= 0.25
    assert "aq_take on aq:{q}:meta" in str(err.value)
    assert "did not recover within 0.5 s" in str(err.value)
    assert err.value.__cause__ is refused
    # The undo sent next, to the same slot, gives up at once: the outage is old.
    with pytest.raises(aqueue.redis.ServerConnectionError):
        Recovery(outages, 7, 0.5, "aq_leave on aq:{q}:meta").delay(refused)
    # Another slot's outage, or this one's once it answered, starts afresh.
    assert Recovery(outages, 8, 0.5, "x").delay(refused) == pytest.approx(0.02)
    outages.end(7)
    assert Recovery(outages, 7, 0.5, "x").delay(refused) == pytest.approx(0.02)


async def _until(predicate: Any, limit_s: float = 20.0) -> None:
    with anyio.fail_after(limit_s):
        while not predicate():  # noqa: ASYNC110 - set by other tasks' results
            await anyio.sleep(0.01)


def test_a_missing_function_reloads_twice_then_fails(closed_port: int) -> None:
    """A request that meets "Function not found" asks for the library twice (a stale
    slot map may send the second try to the old node), then gives up; a client that
    may not load gives up at once."""
    missing = redis.ResponseError("Function not found")
    attempts = Attempts(Outages(), "aq:{q}:meta", 5.0, load=True)
    assert [attempts.after(missing, "x") for _ in range(3)] == [RELOAD, RELOAD, None]
    assert Attempts(Outages(), "aq:{q}:meta", 5.0, load=False).after(missing, "x") is None
    refused = _sync_error(closed_port)
    assert Attempts(Outages(), "aq:{q}:meta", 5.0, load=True).after(refused, "x") == 0.02


@pytest.mark.anyio
async def test_a_killed_primary_then_its_lone_successor(failover_cluster: ClusterProc) -> None:
    """First kill: a primary with a replica. The call in flight on it fails at once
    and is not sent again; waiters and calls sent after the kill go on once the
    replica serves the slots. Second kill: that new primary, with no replica left:
    every waiter fails with ServerConnectionError within the failover timeout."""
    cluster = failover_cluster
    topo = cluster.topology()
    assert sorted(r for r, *_ in topo.values()) == ["primary"] * 3 + ["replica"] * 3
    victim = cluster.primaries()[0]
    healthy = cluster.primaries()[1]
    assert cluster.replica_of(victim) != cluster.replica_of(healthy)
    with cluster.client(victim) as c:
        c.function_load(SPIN_LIBRARY, replace=True)
    spin_key = f"aq:{{{cluster.name_on(victim, 'spin')}}}:n"
    outcomes: dict[str, Any] = {}

    async def keep(what: str, fn: Any, *args: Any) -> None:
        try:
            outcomes[what] = await fn(*args)
        except aqueue.redis.ServerError as exc:
            outcomes[what] = exc

    # A long wait_timeout: the waiters sit in BLPOP (not in a function call) while
    # the spin holds the victim's thread, so the kill catches them waiting. The spin
    # goes through a server of its own: its lost connection must not be what makes
    # the other server's client read the slot map again.
    server = OneShardBlock(
        cluster_server(cluster.url, failover_timeout=FAILOVER_TIMEOUT, wait_timeout=5.0)
    )
    spinner = cluster_server(cluster.url, failover_timeout=FAILOVER_TIMEOUT)
    async with server as srv, spinner as spin_srv:
        qv = await srv.fifo_queue(cluster.name_on(victim, "v"), 4, np.int64, ())
        qh = await srv.fifo_queue(cluster.name_on(healthy, "h"), 4, np.int64, ())
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep, "victim waiter", qv.dequeue_many, 2)
            tg.start_soon(keep, "healthy waiter", qh.dequeue_many, 2)
            await _waiting(qv, qh)
            spin = Call("spin", spin_key, [2000])
            tg.start_soon(keep, "in flight", spin_srv._conn.live().call, spin)
            await anyio.sleep(0.3)  # (the spin holds the victim's thread now)
            await anyio.to_thread.run_sync(cluster.kill, victim)
            # (a pipeline: redis-py reads the slot map again after a single command's
            # lost connection, not after a pipeline's)
            tag = f"aq:{{{qv.name}}}:"
            piped = Call("aq_version", tag + "meta", [], fetch=[tag + "e:none"])
            tg.start_soon(keep, "sent after the kill", srv._conn.live().call, piped)
            new = await anyio.to_thread.run_sync(cluster.wait_promoted, victim)
            await _until(lambda: "sent after the kill" in outcomes)
            await qv.enqueue_many(np.arange(2))
            await qh.enqueue_many(np.arange(2, 4))
        assert isinstance(outcomes["in flight"], aqueue.redis.ServerConnectionError)
        with cluster.client(new) as c:
            assert c.get(spin_key) is None  # never sent again
        assert outcomes["sent after the kill"][1] == [None]
        assert outcomes["victim waiter"].tolist() == [0, 1]
        assert outcomes["healthy waiter"].tolist() == [2, 3]

    # The second kill: no replica left for the victim's slots.
    outcomes.clear()
    async with OneShardBlock(cluster_server(cluster.url, failover_timeout=SHORT_TIMEOUT)) as srv:
        qv = await srv.fifo_queue(qv.name, 4, np.int64, ())
        qh = await srv.fifo_queue(qh.name, 4, np.int64, ())
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep, "victim waiter", qv.dequeue)
            tg.start_soon(keep, "healthy waiter", qh.dequeue)
            await _waiting(qv, qh)
            await anyio.to_thread.run_sync(cluster.kill, new)
            await _until(lambda: len(outcomes) == 2, SHORT_TIMEOUT + 20)  # (a hang guard)
    for what in ("victim waiter", "healthy waiter"):
        error = outcomes[what]
        assert isinstance(error, aqueue.redis.ServerConnectionError), (what, error)
        assert f"did not recover within {SHORT_TIMEOUT:g} s" in str(error), what


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_slot_map_refresh_leaves_calls_in_flight_alone(
    redis_cluster: ClusterProc,
) -> None:
    """redis-py refreshes its slot map by closing its client (after CLUSTERDOWN, which
    every node answers while a replica is elected): aqueue's client only drops the
    idle connections, so a call in flight on a healthy node completes. Closing the
    transport closes every connection it opened."""
    before = _connections(redis_cluster)
    transport = ClusterAsyncio(redis_cluster.url)
    await transport.start()
    key = f"aq:{{{redis_cluster.name_on(redis_cluster.primaries()[0], 'r')}}}:ev"
    try:
        await transport.client.aclose()  # (what redis-py calls on CLUSTERDOWN)
        assert await transport.call(Call("aq_version", key, [], ro=True))  # (map read again)
        blocked = asyncio.ensure_future(transport.client.blpop([key], 5))
        await asyncio.sleep(0.2)
        await transport.client.aclose()
        with redis_cluster.client(redis_cluster.owner(key)) as c:
            c.rpush(key, b"x")
        assert list(await blocked) == [key.encode(), b"x"]
        assert _connections(redis_cluster) > before
    finally:
        await transport.aclose()  # (with a refresh pending and a connection open)
    assert _connections(redis_cluster) == before


def _connections(cluster: ClusterProc) -> int:
    """Client connections on the primaries (each count's own connection included)."""
    total = 0
    for port in cluster.primaries():
        with cluster.client(port) as c:
            total += int(c.info("clients")["connected_clients"])
    return total


async def _waiting(*queues: Any) -> None:
    for q in queues:
        with anyio.fail_after(10):
            while (await q.statistics()).tasks_waiting_dequeue < 1:  # noqa: ASYNC110
                await anyio.sleep(0.01)  # (the state lives on the server)


SPIN_MS = 1000


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.asyncio  # (the subject is native asyncio cancellation)
async def test_a_native_cancellation_waits_for_the_call_in_flight(
    redis_cluster: ClusterProc, keep: bool
) -> None:
    """task.cancel() while a call runs on the server: the call runs to its end first
    (its outcome known, its connection kept); then the task is cancelled, or, for a
    ``keep`` call, the call's reply is returned and the cancellation lands at the
    caller's next await."""
    port = redis_cluster.primaries()[0]
    with redis_cluster.client(port) as c:
        c.function_load(SPIN_LIBRARY, replace=True)
    key = f"aq:{{{redis_cluster.name_on(port, 'spin')}}}:n"
    transport = ClusterAsyncio(redis_cluster.url)
    await transport.start()
    seen: list[Any] = []

    async def caller() -> None:
        seen.append(await transport.call(Call("spin", key, [SPIN_MS], keep=keep)))
        await asyncio.sleep(0)  # (a kept call's cancellation lands here)
        seen.append("not cancelled")

    try:
        task = asyncio.ensure_future(caller())
        await asyncio.sleep(0.05)  # (the spin is running on the server now)
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The cancellation took effect only once the call had finished on the server
        # (the node was busy until then): a lower bound, whatever the machine's load.
        assert time.monotonic() - t0 >= SPIN_MS / 1000 - 0.1
        assert seen == ([1] if keep else [])
        with redis_cluster.client(port) as c:
            assert c.get(key) == b"1"  # it ran, once
        assert await transport.call(Call("aq_version", key, [], ro=True))
    finally:
        await transport.aclose()
