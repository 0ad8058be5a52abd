"""A connection block's life: what ``async with aqueue.redis.connect(url) as server:``
opens ends with it. Every queue, table, thread view and iterator opened inside raises
ServerClosedError (naming the server, saying the block ended) once the block has
exited, nothing reconnects behind the user's back, nothing is left open, and a server
object is entered once. A malformed URL is refused at ``connect()`` with the prefix the
other connection errors carry."""

from __future__ import annotations

import gc
import re
import warnings
from functools import partial
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import RedisProc, until

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ENDED = r"aqueue\.redis: the connection block of the server at 127\.0\.0\.1:\d+ has ended"


async def test_every_handle_fails_after_the_block(redis_server: RedisProc, qname: str) -> None:
    """Queues, tables, their thread views and iterators opened inside the block raise
    ServerClosedError afterwards, and the server is not written to."""
    async with aqueue.redis.connect(redis_server.url) as server:
        q = await server.fifo_queue(qname, 8, np.int64, ())
        t = await server.replay_table(qname + "-t", 8, np.int64, ())
        await q.enqueue(1)
        await t.insert(np.int64(1))
        qview, tview = q.blocking(), t.blocking()
    calls: list[tuple[str, Any]] = [
        ("q.enqueue", lambda: q.enqueue(5)),
        ("q.enqueue_many", lambda: q.enqueue_many(np.arange(3))),
        ("q.dequeue", q.dequeue),
        ("q.dequeue_many", lambda: q.dequeue_many(1)),
        ("q.size", q.size),
        ("q.statistics", q.statistics),
        ("q.register_producer", q.register_producer),
        ("q.aclose", q.aclose),
        ("iter(q)", lambda: q.__aiter__().__anext__()),
        ("q.batches", lambda: q.batches(1).__anext__()),
        ("t.insert", lambda: t.insert(np.int64(2))),
        ("t.sample", lambda: t.sample(1)),
        ("t.update_priorities", lambda: t.update_priorities([0], [1.0])),
        ("t.statistics", t.statistics),
        ("t.aclose", t.aclose),
        ("t.samples", lambda: t.samples(1).__anext__()),
        ("t.enqueue_many", lambda: t.enqueue_many(np.arange(2))),
    ]
    for what, call in calls:
        with pytest.raises(aqueue.redis.ServerClosedError, match=ENDED) as info:
            await call()
        assert "inside a new block" in str(info.value), what
    threads: list[tuple[str, Any]] = [
        ("qview.enqueue", lambda: qview.enqueue(5)),
        ("qview.dequeue", qview.dequeue),
        ("qview.size", qview.size),
        ("tview.insert", lambda: tview.insert(np.int64(2))),
        ("tview.sample", lambda: tview.sample(1)),
        ("t.close", t.close),
    ]
    for _what, fn in threads:
        with pytest.raises(aqueue.redis.ServerClosedError, match=ENDED):
            await anyio.to_thread.run_sync(fn)
    with redis_server.client() as admin:  # nothing above reached the server
        assert admin.llen(f"aq:{{{qname}}}:items") == 1
        assert int(admin.hget(f"aq:{{{qname}-t}}:meta", "inserts")) == 1
        assert admin.hget(f"aq:{{{qname}}}:meta", "closed") == b"0"
    # It is a ServerConnectionError (a QueueError): what code handling a lost server
    # catches, never a clean end of a runner's queue.
    assert issubclass(aqueue.redis.ServerClosedError, aqueue.redis.ServerConnectionError)
    assert not issubclass(aqueue.redis.ServerClosedError, aqueue.QueueClosedError)


async def test_nothing_is_left_open(redis_server: RedisProc, qname: str) -> None:
    """Handles used after the block open no connection: no unclosed transport or socket
    is found when they are collected."""

    async def use_after_the_block() -> None:
        async with aqueue.redis.connect(redis_server.url) as server:
            q = await server.fifo_queue(qname, 8, np.int64, ())
            t = await server.replay_table(qname + "-t", 8, np.int64, ())
            await q.enqueue(1)
        for call in (lambda: q.enqueue(2), q.size, lambda: t.insert(np.int64(1))):
            with pytest.raises(aqueue.redis.ServerClosedError):
                await call()
        with pytest.raises(aqueue.redis.ServerClosedError):
            await anyio.to_thread.run_sync(q.blocking().size)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await use_after_the_block()  # (its handles are garbage when it returns)
        gc.collect()
    leaks = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == [], [str(w.message) for w in leaks]


async def test_calls_waiting_when_the_block_ends_raise(redis_server: RedisProc, qname: str) -> None:
    """A dequeue and a sample that wait when the block ends, in tasks and in threads,
    raise ServerClosedError naming the server (in redis-py the close cuts a waiting
    thread's socket under it: a ConnectionError or a ValueError of a closed file),
    never a raw redis-py error, and nothing hangs."""
    raised: dict[str, BaseException] = {}

    async def in_task(what: str, call: Any) -> None:
        try:
            await call()
        except Exception as exc:
            raised[what] = exc

    def in_thread(what: str, call: Any) -> None:
        try:
            call()
        except Exception as exc:
            raised[what] = exc

    async with (
        anyio.create_task_group() as tg,
        aqueue.redis.connect(redis_server.url, wait_timeout=2.0) as server,
    ):
        q = await server.fifo_queue(qname, 8, np.int64, ())
        t = await server.replay_table(qname + "-t", 8, np.int64, ())
        tg.start_soon(in_task, "q.dequeue", q.dequeue)
        tg.start_soon(in_task, "t.sample", lambda: t.sample(1))
        for what, call in (
            ("qview.dequeue", lambda: q.blocking().dequeue(timeout=60.0)),
            ("tview.sample", lambda: t.blocking().sample(2, timeout=60.0)),
        ):
            tg.start_soon(partial(anyio.to_thread.run_sync, in_thread, what, call))
        with redis_server.client() as admin:

            async def all_wait() -> bool:
                return (
                    admin.zcard(f"aq:{{{qname}}}:ev:data") == 2
                    and admin.zcard(f"aq:{{{qname}-t}}:ws") == 2
                )

            await until(all_wait)
    assert sorted(raised) == ["q.dequeue", "qview.dequeue", "t.sample", "tview.sample"]
    for what, exc in raised.items():
        assert isinstance(exc, aqueue.redis.ServerClosedError), (what, exc)
        assert re.match(ENDED, str(exc)), (what, exc)
    async with aqueue.redis.connect(redis_server.url) as server:
        await server.delete_queue(qname)
        await server.delete_table(qname + "-t")


async def test_a_server_object_is_entered_once(redis_server: RedisProc) -> None:
    """Entering a server object again (after or inside its block) raises RuntimeError
    saying to call connect() again; a fresh connect() works."""
    server = aqueue.redis.connect(redis_server.url)
    async with server:
        with pytest.raises(RuntimeError, match=r"entered once.*connect\(\) again"):
            async with server:
                pass
        assert (await server.fifo_queue("entered-once", 2, np.int64, ())).name == "entered-once"
    with pytest.raises(RuntimeError, match=r"entered once.*connect\(\) again"):
        async with server:
            pass
    with pytest.raises(aqueue.redis.ServerClosedError, match=ENDED):
        await server.fifo_queue("entered-once", 2, np.int64, ())
    async with aqueue.redis.connect(redis_server.url) as again:
        q = await again.fifo_queue("entered-once", 2, np.int64, ())
        assert await q.size() == 0
        await again.delete_queue("entered-once")


async def test_a_failed_entry_leaves_nothing_open() -> None:
    """A block that could not connect is over too: its server object raises, and no
    connection is left behind."""

    async def fail_to_enter() -> None:
        server = aqueue.redis.connect("redis://127.0.0.1:1/0")
        with pytest.raises(aqueue.redis.ConnectFailedError):
            async with server:
                pass
        with pytest.raises(aqueue.redis.ServerClosedError):
            await server.fifo_queue("x", 2, np.int64, ())

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await fail_to_enter()
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1/0", "the scheme must be redis://, rediss:// or unix://, got 'http'"),
        ("127.0.0.1:6379", "the scheme must be redis://, rediss:// or unix://, got none"),
        ("localhost:6379", "the scheme must be redis://, rediss:// or unix://, got 'localhost'"),
        ("localhost", "the scheme must be redis://, rediss:// or unix://, got none"),
        ("redis://127.0.0.1:port/0", "the port must be a number from 0 to 65535, got 'port'"),
        ("redis://127.0.0.1:99999/0", "the port must be a number from 0 to 65535, got '99999'"),
        ("redis://127.0.0.1:6379/zero", "the database must be a number (/0, /1, ...), got 'zero'"),
        ("unix://", "a unix:// URL must name the socket's path"),
        ("", "the scheme must be redis://, rediss:// or unix://, got none"),
    ],
)
def test_malformed_urls_are_refused_at_connect(url: str, expected: str) -> None:
    """Each says, with the ``aqueue.redis.connect:`` prefix, what was expected and what
    was given, before any connection is made."""
    with pytest.raises(aqueue.ElementSpecError) as info:
        aqueue.redis.connect(url)
    text = str(info.value)
    assert text.startswith("aqueue.redis.connect: url "), text
    assert expected in text, text
    assert "redis://[[user]:password@]host[:port][/db]" in text


@pytest.mark.parametrize(
    "url",
    [
        "redis://:s3cret@127.0.0.1:port/0",
        "http://user:s3cret@127.0.0.1/0",
        "redis://:s3cret@127.0.0.1:6379/zero",
        "redis://:s3/cret@127.0.0.1:6379/0",
        "redis://:s3?cret@127.0.0.1:6379/0",
        "redis://:s3#cret@127.0.0.1:6379/0",
        "unix://:s3/cret@/tmp/redis.sock",
    ],
)
def test_a_refused_url_never_shows_its_password(url: str) -> None:
    """The message masks the password, also when a '/', '?' or '#' in it cut the URL
    early (it then says to percent-encode them)."""
    with pytest.raises(aqueue.ElementSpecError, match="is not a Redis URL") as info:
        aqueue.redis.connect(url)
    text = str(info.value)
    assert "***@" in text
    assert "s3" not in text, text
    assert "cret" not in text, text


def test_well_formed_urls_are_accepted() -> None:
    """The forms the Redis guide shows pass the check (nothing connects until ``async with``)."""
    for url in (
        "redis://:secret@host:6379/0",
        "redis://user:secret@host/3",
        "rediss://host",
        "redis://[::1]:6380",
        "unix:///tmp/redis.sock?db=1",
        "unix:///tmp/at@sign.sock",
        "redis://:p%2Fss@host/0",
        "redis://:p@ss@host/0",
    ):
        assert re.match(r"<RedisServer ", repr(aqueue.redis.connect(url)))
