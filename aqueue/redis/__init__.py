"""aqueue.redis: FIFO and RandomShuffle queues and replay tables shared by processes on
many hosts.

    import aqueue.redis

    async with aqueue.redis.connect("redis://:password@host:6379/0", lease_time=30.0) as server:
        q = await server.fifo_queue("frames", 10_000, np.uint8, (84, 84, 4))
        r = await server.random_shuffle_queue("replay", 10_000, 1_000, np.float32, (32, 32),
                                              seed=0)
        await q.enqueue_many(frames)
        batch = await r.dequeue_many(32)
        await server.delete_queue("frames")  # removes its keys

Needs ``pip install 'aqueue[redis]'`` (redis-py >= 5 and msgpack) and a Redis >= 7.0 or
Valkey server, run with ``maxmemory-policy noeviction`` (``connect()`` warns otherwise;
a full server then refuses enqueues and inserts with ServerFullError, while takes,
samples and the rest still work). Optional: with ``hiredis``
installed, redis-py parses replies in C (W5, 28 KB frames: about +15% elements/s). Processes that open the same
name share one queue; a reopen with another kind, capacity, dtypes, shapes, names or
min_after_dequeue raises ElementSpecError naming the field (TensorFlow's shared_name
rule). Leaving ``async with`` closes this process's connections, never a queue; the
queues, tables and views opened in the block then raise ServerClosedError (nothing
reconnects), and a server object is entered once.

How it works. Every state change is one function of one Lua library (``FUNCTION LOAD``,
versioned), so capacity, exact-n, min_after_dequeue, uniform random takes (with random
numbers from the client's seeded numpy Generator), close and drain are atomic on the
server. A queue's keys share the ``{name}`` hash tag: ``aq:{name}:meta``, ``:items``,
``:slots``, ``:lease:<id>``, ``:leases``, ``:ev:data``, ``:ev:space``, ``:pending``,
``:producers``, and one ``:e:<ref>`` string per element of 1 KiB or more holding its
payload (smaller payloads sit in ``:items``/``:slots`` themselves). Such payloads never
pass through the Lua functions, which move only short refs: an enqueue stages its
payloads with ``MSET`` in the same ``MULTI``/``EXEC`` as the function call that admits
them (or deletes those that do not fit), so a producer killed mid-call leaves nothing
behind; a dequeue's function call moves the refs into a lease and renames the payload
keys to the lease's, and an ``MGET`` pipelined behind it reads them in the same round
trip. Why: Lua interns, and in the Redis measured hashes in full, every string it
sees; for 28 KB frames that cost the server more than all else (``_functions.lua``).
A dequeue receives its batch, decodes it, acknowledges it (deleting the payload
keys), and only then returns it; a cancelled caller puts it back at the head in order
(into the pool for a shuffle queue), a crashed one's lease expires after
``lease_time`` and the next call of any client puts it back. Waiters block in ``BLPOP`` on their own
wake-up key (no thundering herd: a change wakes, oldest first, only the waiters that
can now progress); each wait lasts at most ``wait_timeout`` seconds, after which the
waiter retries its call once more (a safety net for a lost wake-up: an idle waiter costs
one server call per ``wait_timeout``).
Elements travel as AQ1 (``_codec``): a msgpack header and raw little-endian bytes,
never pickle; a foreign or corrupted payload raises PayloadError and is put back.

Operations, errors and forms are the in-process ones (``aqueue.FIFOQueue``,
``aqueue.RandomShuffleQueue``): ``enqueue``, ``enqueue_many``, ``dequeue``,
``dequeue_many``, ``dequeue_up_to``, ``dequeue_burst``, ``async for``, ``batches(n)``,
``blocking()``, QueueClosedError, OutOfRangeError, ElementSpecError. What needs the server is a
coroutine: ``await q.size()``, ``await q.statistics()``, ``await q.is_closed()``,
``await q.aclose(cancel_pending_enqueues=False)``. Producer accounting for runners:
``producer_id = await q.register_producer()`` / ``await q.producer_done(producer_id)``; the
queue closes after the last registered producer (of any process) ends cleanly, at once
(cancelling pending enqueues) when one ends with ``clean=False``, and when the last
one's process dies (its registration expires after ``lease_time``; ``connect()``
refreshes this process's registrations every ``lease_time / 3``).

Replay tables. ``table = await server.replay_table(name, max_size, dtypes, shapes,
names, *, sampler, remover, max_times_sampled, rate_limiter, seed)`` opens (creating if
needed) a table that every process opening ``name`` shares, with the operations of
``aqueue.ReplayTable``: ``insert``, ``insert_many``, ``sample``, ``samples``,
``update_priorities``, ``delete``, ``blocking()`` (with ``timeout=``), ``await
table.size()``, ``await table.statistics()``, ``await table.aclose()``; ``await
server.delete_table(name)`` removes it. A reopen with other settings raises
ElementSpecError naming the field. Each insert and sample is one function call
(``_replay/_functions.lua``): the rate limiter counts the inserts and samples of every process in
the same atomic step as the selection, the eviction and the payloads; a prioritized
draw descends a sum tree kept on the server (``FANOUT`` children per node read with one
``GETRANGE``: O(log n) per item). A cancelled or timed-out insert or sample changed
nothing; a client killed mid-call leaves the table as the last whole call left it. A
table is a sink (``aqueue.AsyncReplayTable``): ``enqueue``, a progressive
``enqueue_many`` and producer accounting as a queue's, so a ``QueueRunner`` or
``Pipeline.to_queue`` fills it and a coordinator's report shows it.

Where the Redis queues and tables differ from the in-process ones (what is awaited,
the missing ``*_nowait`` twins and ``async with q:``, head-of-line order, what a
cancellation, a ``seed`` or a crash means across processes, the dtypes AQ1 carries) is
tabled once, in README's "Where the Redis queues differ from the in-process ones".

How the package is built: a core that every product uses, one folder per product, and
the server object that opens them (each folder's ``__init__.py`` maps its files; each
module's docstring states its invariants). One operation is written once, as a
generator that yields what to send and reads the replies, and run by one of two
drivers (``_core/_transport.py``): the async object and its thread view differ only
in the driver and the transport. What queues and tables share (their handle's base,
statistics, close, producers and their heartbeat, opening with the reopen check) is
written once in the core, parametrised by the product.

=====================  =================================================================
file or folder         what it holds
=====================  =================================================================
``_core/``             what every product uses: the errors, the argument checks, AQ1,
                       the requests and their two drivers, the transports over
                       redis-py, the connection block, the shared handle and ops, the
                       function library's shared part and its loading, the ACL line
``_queues/``           the queues: their handle, opening, ops, RedisQueue, the thread
                       view, and their part of the function library
``_replay/``           the replay tables: their handle, opening, ops, RedisReplayTable,
                       the thread view, and their part of the function library; in
                       ``_replay/trajectory/`` the trajectory tables built on them
``_server.py``         ``connect()`` and RedisServer: the connection block, and the
                       openers (typed) and deleters of each product
=====================  =================================================================

Imports point down: ``_server.py`` → the products → ``_core``; a product never imports
another (a test checks it). A third product is a folder
beside these two, its Lua part added to ``_core/_library.py``'s ``PARTS``, its opener
to ``_server.py`` (the trajectory tables, replay tables of another kind, are a folder
inside ``_replay/``, their Lua part the fourth of ``PARTS``). Sharding over a Redis Cluster is a transport beside
``_core/_clients.py`` and handles whose keys carry one hash tag per shard.

One ``dequeue_many``: ``RedisQueue.dequeue_many`` (``_queues/_queue.py``: ``batch_count``,
checkpoint) → ``run`` (``_core/_transport.py``) → ``TakeOp.run`` (``_queues/_ops.py``:
``aq_take`` with the ``MGET`` of its payloads behind it, decode, ``aq_ack``) → ``aq_take``
(``_queues/_functions.lua``).

Security. Pass a password or an ACL user in the URL, ``rediss://`` for TLS. Redis checks
every command a function runs against the calling user's ACL, so a least-privilege
actor needs FCALL/FCALL_RO, BLPOP and the data commands the functions use, on ``aq:*``
keys only (it cannot EVAL, KEYS, FLUSHALL, CONFIG, FUNCTION LOAD or touch other keys;
it could still write ``aq:*`` keys directly, which is why dequeues validate payloads).
An admin loads the library once (``connect(..., load_functions=True)``, the default);
actors connect with ``load_functions=False``. The exact line::

    ACL SETUSER aqueue-actor on >PASSWORD resetkeys ~aq:* resetchannels -@all +fcall +fcall_ro +blpop +ping +multi +exec +mset +mget +copy +del +exists +get +getrange +hdel +hget +hincrby +hkeys +hlen +hmget +hset +hvals +llen +lpush +lrange +ltrim +pexpire +rename +rpush +set +setrange +time +zadd +zcard +zcount +zrange +zrem +zremrangebyscore +zscore
"""

# The ACL line above is README's, verbatim (tests/redis/test_redis_security.py checks
# both against the line the ACL test runs).
# ruff: noqa: E501

from __future__ import annotations

try:
    import msgpack as _msgpack  # noqa: F401
    import redis as _redis  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"aqueue.redis needs the redis and msgpack packages: pip install 'aqueue[redis]' ({_exc})"
    ) from _exc

from ._core._errors import AuthenticationFailedError as AuthenticationFailedError
from ._core._errors import ConnectFailedError as ConnectFailedError
from ._core._errors import PasswordRequiredError as PasswordRequiredError
from ._core._errors import PayloadError as PayloadError
from ._core._errors import ServerClosedError as ServerClosedError
from ._core._errors import ServerConnectionError as ServerConnectionError
from ._core._errors import ServerError as ServerError
from ._core._errors import ServerFullError as ServerFullError
from ._core._library import LIBRARY_VERSION as LIBRARY_VERSION
from ._queues._blocking import BlockingRedisQueue as BlockingRedisQueue
from ._queues._queue import RedisFIFOQueue as RedisFIFOQueue
from ._queues._queue import RedisQueue as RedisQueue
from ._queues._queue import RedisRandomShuffleQueue as RedisRandomShuffleQueue
from ._replay._blocking import BlockingRedisReplayTable as BlockingRedisReplayTable
from ._replay._table import RedisReplayTable as RedisReplayTable
from ._replay.trajectory._blocking import (
    BlockingRedisTrajectoryTable as BlockingRedisTrajectoryTable,
)
from ._replay.trajectory._blocking import (
    BlockingRedisTrajectoryWriter as BlockingRedisTrajectoryWriter,
)
from ._replay.trajectory._table import RedisTrajectoryTable as RedisTrajectoryTable
from ._replay.trajectory._table import RedisTrajectoryWriter as RedisTrajectoryWriter
from ._server import RedisServer as RedisServer
from ._server import connect as connect

__all__ = [
    "LIBRARY_VERSION",
    "AuthenticationFailedError",
    "BlockingRedisQueue",
    "BlockingRedisReplayTable",
    "BlockingRedisTrajectoryTable",
    "BlockingRedisTrajectoryWriter",
    "ConnectFailedError",
    "PasswordRequiredError",
    "PayloadError",
    "RedisFIFOQueue",
    "RedisQueue",
    "RedisRandomShuffleQueue",
    "RedisReplayTable",
    "RedisTrajectoryTable",
    "RedisTrajectoryWriter",
    "RedisServer",
    "ServerClosedError",
    "ServerConnectionError",
    "ServerError",
    "ServerFullError",
    "connect",
]
