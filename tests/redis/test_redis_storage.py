"""How elements are stored: one payload key per element, written in the transaction
that admits it, renamed into a lease by a take, deleted by the ack. Nothing outlives
its element: a producer whose connection dies mid-call, or that is SIGKILLed, leaves
no payload behind (a call it had sent whole still runs, whole, after its death); a
function failing inside the transaction leaves none; deleting a queue removes the
payloads of stored and leased elements. And waiting enqueues woken together split the
free room instead of each being told all of it."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import numpy as np
import pytest
import redis_workers
from redis.connection import Connection
from redis_util import RedisProc, payload_keys, queue_keys, until, wait_dropped

import aqueue
import aqueue.redis
from aqueue.redis._core._transport import Call
from aqueue.redis._queues._ops import PutOp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CTX = multiprocessing.get_context("spawn")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # raw server access and a proxy; both backends run the contract tests


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as server:
        yield server


async def open_q(srv: Any, kind: str, name: str, cap: int, shape: Any = (2,)) -> Any:
    if kind == "fifo":
        return await srv.fifo_queue(name, cap, np.int64, shape)
    return await srv.random_shuffle_queue(name, cap, 0, np.int64, shape, seed=1)


@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
async def test_payload_keys_follow_the_elements(
    srv: Any, redis_server: RedisProc, qname: str, kind: str
) -> None:
    """One payload key per stored or leased element of 1 KiB or more; an ack deletes
    its batch's keys; delete_queue removes every key, leased payloads and the markers
    of voided leases included."""
    q = await open_q(srv, kind, qname, 16, (128,))  # 1 KiB + the header
    await q.enqueue_many(np.arange(1280).reshape(10, 128))
    assert len(payload_keys(redis_server, qname)) == 10
    await q.dequeue_many(4)
    assert len(payload_keys(redis_server, qname)) == 6
    h = q._h  # a take without its ack: the lease holds 3 payload keys under its name
    args = [h.gen, "held", "held", "many", 3, h.lease_ms, h.reg_ms, "0", *h.rands(3)]
    keys = [f"{h.prefix}e:held.{j}" for j in (1, 2, 3)]
    reply, values = await q._t.call(Call("aq_take", h.key, args, fetch=keys))
    assert reply == [b"ok", 3]
    assert all(v is not None and v.startswith(b"AQ\x01") for v in values)
    stored = payload_keys(redis_server, qname)
    assert len(stored) == 6
    assert sum(k.startswith(f"aq:{{{qname}}}:e:held.".encode()) for k in stored) == 3
    assert (await q.statistics()).size == 3
    # A take whose outcome was unknown when its caller left voids its lease id with a
    # marker that expires by itself; deleting the queue removes the marker too.
    leave = [h.gen, "lost", "1", "lost", "1:lost", ""]
    assert await q._t.call(Call("aq_leave", h.key, leave)) == 4
    assert f"aq:{{{qname}}}:void:lost".encode() in queue_keys(redis_server, qname)
    assert await srv.delete_queue(qname)
    assert queue_keys(redis_server, qname) == []


class CuttingProxy:
    """A TCP proxy to the server that, on the first connection sending ``aq_put``,
    forwards everything before that command and then drops the connection: the
    server has the MULTI and the MSET of the payloads but never the call or the EXEC,
    as when a producer dies mid-send."""

    MARK = b"$5\r\nFCALL\r\n$6\r\naq_put\r\n"

    def __init__(self, port: int) -> None:
        self.port = port
        self.cut = asyncio.Event()
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        sr, sw = await asyncio.open_connection("127.0.0.1", self.port)

        async def down() -> None:  # server -> client
            while data := await sr.read(1 << 16):
                cw.write(data)
                await cw.drain()
            cw.close()

        back = asyncio.ensure_future(down())
        buf = b""
        try:
            while data := await cr.read(1 << 16):
                buf += data
                at = -1 if self.cut.is_set() else buf.find(self.MARK)
                if at >= 0:  # forward what precedes the call (its "*N" header at most)
                    sw.write(buf[:at])
                    await sw.drain()
                    self.cut.set()
                    return
                keep = 0 if self.cut.is_set() else _partial(buf, self.MARK)
                sw.write(buf[: len(buf) - keep])
                await sw.drain()
                buf = buf[len(buf) - keep :]
        finally:
            back.cancel()
            for w in (sw, cw):
                w.close()

    async def aclose(self) -> None:
        if self.server is not None:
            self.server.close()


def _partial(buf: bytes, mark: bytes) -> int:
    """The length of the longest end of ``buf`` that ``mark`` starts with."""
    for n in range(min(len(buf), len(mark) - 1), 0, -1):
        if mark.startswith(buf[-n:]):
            return n
    return 0


async def test_connection_lost_mid_enqueue_leaves_no_payload(
    srv: Any, redis_server: RedisProc, qname: str
) -> None:
    """The payloads of an enqueue whose connection dies after they reached the server
    but before the call that admits them are discarded with the transaction."""
    await open_q(srv, "fifo", qname, 16, (1000,))  # created by a direct client
    proxy = CuttingProxy(redis_server.port)
    port = await proxy.start()
    url = f"redis://:{redis_server.password}@127.0.0.1:{port}/0"
    try:
        async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as via:
            q = await open_q(via, "fifo", qname, 16, (1000,))
            with pytest.raises(aqueue.redis.ServerConnectionError):
                await q.enqueue_many(np.ones((5, 1000), np.int64))
            assert proxy.cut.is_set()
            await q.enqueue_many(np.ones((2, 1000), np.int64))  # a new connection works
            assert (await q.statistics()).size == 2
    finally:
        await proxy.aclose()
    assert len(payload_keys(redis_server, qname)) == 2


async def test_function_failing_in_the_transaction_leaves_no_payload(
    own_redis: RedisProc, qname: str
) -> None:
    """aq_put fails inside EXEC (here: the library was flushed): the staged payloads
    (2 KiB each: under keys of their own) were written by the MSET before it, and the
    client deletes them. A client that may load the library loads it again and sends
    the call once more: then exactly the admitted payloads are stored."""
    async with aqueue.redis.connect(own_redis.url, wait_timeout=0.05) as admin_srv:
        await admin_srv.fifo_queue(qname, 8, np.int64, (256,))
    batch = np.zeros((3, 256), np.int64)
    async with aqueue.redis.connect(own_redis.url, load_functions=False) as srv:
        q = await srv.fifo_queue(qname, 8, np.int64, (256,))
        with own_redis.client() as admin:
            admin.function_delete("aqueue")
        with pytest.raises(aqueue.redis.ServerError, match="not loaded"):
            await q.enqueue_many(batch)
    assert payload_keys(own_redis, qname) == []
    async with aqueue.redis.connect(own_redis.url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 8, np.int64, (256,))
        with own_redis.client() as admin:
            admin.function_delete("aqueue")
        await q.enqueue_many(batch)
        assert await q.size() == 3
    assert len(payload_keys(own_redis, qname)) == 3


async def test_sigkilled_producer_leaves_no_orphan_payloads(
    redis_server: RedisProc, qname: str
) -> None:
    """A producer process enqueuing 2 MB calls is killed -9 at random moments (some
    land mid-send): every payload key on the server belongs to an admitted element.
    The look at the server waits until the server has dropped the dead producer's
    connections: until then it may still run the producer's last call (see below)."""
    rng = np.random.default_rng(4)
    tag = f"producer-{uuid.uuid4().hex[:8]}"
    url = f"{redis_server.url}?client_name={tag}"  # its connections, in CLIENT LIST
    async with aqueue.redis.connect(redis_server.url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 64, np.uint8, (64 << 10,))
        for _ in range(4):
            p = CTX.Process(target=redis_workers.big_producer, args=(url, qname), daemon=True)
            p.start()

            async def started() -> bool:
                return (await q.statistics()).enqueued_total > 0

            await until(started)
            deadline = anyio.current_time() + float(rng.uniform(0.05, 0.3))
            while anyio.current_time() < deadline:  # keep room free: the producer sends
                with anyio.move_on_after(0.1):
                    await q.dequeue_many(32)
            assert p.pid is not None
            os.kill(p.pid, signal.SIGKILL)
            await anyio.to_thread.run_sync(p.join, 5)
            with redis_server.client() as c:
                await anyio.to_thread.run_sync(wait_dropped, c, tag)
            s = await q.statistics()
            assert s.enqueued_total - s.dequeued_total == s.size
            assert len(payload_keys(redis_server, qname)) == s.size
            if s.size:
                await q.dequeue_many(s.size)
        assert payload_keys(redis_server, qname) == []
        assert await srv.delete_queue(qname)


async def test_call_of_a_killed_producer_still_unread_runs_whole(
    own_redis: RedisProc, qname: str
) -> None:
    """A producer killed -9 while the end of its last call (a staged enqueue: MULTI,
    MSET, FCALL aq_put, EXEC) still waits, unread, in the server's socket buffer, as a
    loaded machine may leave it: the server reads it after the process is gone and
    runs the whole transaction, so the call's staged payloads become admitted
    elements, not orphans. A look at the queue taken as the server resumes would see
    it before that call (size 0) and its payload keys a moment later, unless it first
    waits until the server has dropped the dead producer's connection."""
    async with aqueue.redis.connect(own_redis.url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 64, np.uint8, (64 << 10,))
        payloads = q._h.codec.encode_batch([np.ones((32, 64 << 10), np.uint8)], 32)
        call = PutOp(q._h, payloads, atomic=False).put_call()  # a producer's first call
    assert len(call.stage) == 32
    tag = f"producer-{uuid.uuid4().hex[:8]}"
    pack = Connection().pack_commands
    hello = b"".join(pack([("AUTH", own_redis.password), ("CLIENT", "SETNAME", tag)]))
    staged = [x for kv in call.stage for x in kv]
    head = [("MULTI",), ("MSET", *staged)]
    txn = b"".join(pack([*head, ("FCALL", call.fn, 1, call.key, *call.args), ("EXEC",)]))
    cut = len(b"".join(pack(head)))  # the tail: the FCALL and the EXEC
    go, tail_sent = CTX.Event(), CTX.Event()
    p = CTX.Process(
        target=redis_workers.raw_producer,
        args=(own_redis.port, hello, txn[:cut], txn[cut:], go, tail_sent),
        daemon=True,
    )
    p.start()

    def head_read(c: Any) -> bool:  # the MSET is queued in the producer's MULTI
        return any(x.get("name") == tag and x["multi"] == "1" for x in c.client_list())

    def look(c: Any) -> list[Any]:  # one request: the size and the payload keys
        wait_dropped(c, tag)
        pipe = c.pipeline(transaction=True)
        pipe.llen(f"aq:{{{qname}}}:items")
        pipe.keys(f"aq:{{{qname}}}:e:*")
        return list(pipe.execute())

    seen: list[Any] = []
    with own_redis.client() as c:
        await until(lambda: anyio.to_thread.run_sync(head_read, c))

        async def looking() -> None:
            seen.extend(await anyio.to_thread.run_sync(look, c))

        async with anyio.create_task_group() as tg:
            own_redis.proc.send_signal(signal.SIGSTOP)
            try:
                tg.start_soon(looking)
                # The look's first request reaches the server before the tail does, so
                # the server, resumed, answers it first.
                await anyio.sleep(0.2)
                go.set()
                assert await anyio.to_thread.run_sync(tail_sent.wait, 10)
                assert p.pid is not None
                os.kill(p.pid, signal.SIGKILL)
                await anyio.to_thread.run_sync(p.join, 5)
            finally:
                own_redis.proc.send_signal(signal.SIGCONT)
    size, keys = seen
    assert size == 32
    assert sorted(keys) == sorted(k.encode() for k, _ in call.stage)
    async with aqueue.redis.connect(own_redis.url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 64, np.uint8, (64 << 10,))
        s = await q.statistics()
        assert (s.size, s.enqueued_total) == (32, 32)
        assert np.array_equal(await q.dequeue_many(32), np.ones((32, 64 << 10), np.uint8))
    assert payload_keys(own_redis, qname) == []


@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
async def test_small_payloads_travel_inline(
    srv: Any, redis_server: RedisProc, qname: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Payloads under INLINE_MAX are stored in the queue's list or hash, larger ones
    under keys; a queue holding both keeps its order, and a lease holding both goes
    back whole (here: expired and reaped)."""
    from aqueue.redis._core import _shared

    q = await open_q(srv, kind, qname, 16, (16,))
    rows = np.arange(8 * 16).reshape(8, 16)
    size = len(q._h.codec.encode_batch([rows[:1]], 1)[0])
    monkeypatch.setattr(_shared, "INLINE_MAX", size + 1)  # inline
    await q.enqueue_many(rows[:2])
    monkeypatch.setattr(_shared, "INLINE_MAX", size)  # under keys
    await q.enqueue_many(rows[2:4])
    monkeypatch.setattr(_shared, "INLINE_MAX", size + 1)
    await q.enqueue_many(rows[4:6])
    assert len(payload_keys(redis_server, qname)) == 2
    h = q._h  # a take of 5 without its ack, then its lease expires
    args = [h.gen, "held", "held", "many", 5, "1", h.reg_ms, "0", *h.rands(5)]
    reply = await q._t.call(Call("aq_take", h.key, args))
    assert reply == [b"ok", 5]
    # the 5 taken are under the lease's keys now, the one left is a key if it was one
    assert len(payload_keys(redis_server, qname)) in ((5,) if kind == "fifo" else (5, 6))
    await anyio.sleep(0.01)
    got = await q.dequeue_many(6)  # the first call reaps the lease
    if kind == "fifo":
        assert got[:, 0].tolist() == [0, 16, 32, 48, 64, 80]
    else:
        assert sorted(got[:, 0].tolist()) == [0, 16, 32, 48, 64, 80]
    assert payload_keys(redis_server, qname) == []


async def test_woken_enqueues_split_the_room(srv: Any, redis_server: RedisProc, qname: str) -> None:
    """Two enqueues of 3 wait on a full queue; a take frees 2: the older one is woken
    with a share of 2, the younger one stays registered (told all of the room, both
    would send payloads, one of them in vain)."""
    q = await open_q(srv, "fifo", qname, 4)
    await q.enqueue_many(np.zeros((4, 2), np.int64))
    h = q._h
    wids = [uuid.uuid4().hex for _ in range(2)]
    for wid in wids:  # probes (no payload): each registers, wanting 3
        reply = await q._t.call(Call("aq_put", h.key, [h.gen, wid, "0", 3, h.reg_ms]))
        assert reply[:2] == [b"ok", 0]
        await anyio.sleep(0.01)  # (deadlines in ms order the registrations)
    await q.dequeue_many(2)
    with redis_server.client() as raw:
        assert raw.lrange(f"{h.prefix}ev:space:{wids[0]}", 0, -1) == [b"2"]
        assert raw.lrange(f"{h.prefix}ev:space:{wids[1]}", 0, -1) == []
        assert raw.zrange(f"{h.prefix}ev:space", 0, -1) == [f"1:{wids[1]}".encode()]


async def test_a_burst_reads_every_payload_of_an_overfull_queue(
    srv: Any, redis_server: RedisProc, qname: str
) -> None:
    """Elements a leaving take puts back can leave a queue above its capacity for a
    while; a dequeue_burst(n) then takes up to n of them, more than the capacity, and
    reads every payload (those its take call did not fetch are read right after)."""
    q = await open_q(srv, "fifo", qname, 4, (128,))  # 1 KiB + the header: payload keys
    rows = np.arange(7 * 128).reshape(7, 128)
    await q.enqueue_many(rows[:4])
    h = q._h  # a take of 3 without its ack, then the same lease leaves
    args = [h.gen, "held", "held", "many", 3, h.lease_ms, h.reg_ms, "0"]
    assert await q._t.call(Call("aq_take", h.key, args)) == [b"ok", 3]
    await q.enqueue_many(rows[4:])
    leave = [h.gen, "held", "0", "held", "3:held", ""]
    assert await q._t.call(Call("aq_leave", h.key, leave)) == 1  # put back at the head
    assert (await q.statistics()).size == 7
    got = await q.dequeue_burst(100)
    assert got[:, 0].tolist() == [0, 128, 256, 384, 512, 640, 768]
    assert payload_keys(redis_server, qname) == []
