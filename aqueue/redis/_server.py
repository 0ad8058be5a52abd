"""connect() and RedisServer: the public face of ``aqueue.redis``: one server's
connection block (``_core/_connection.py``) and the products opened over it (each
product's ``_open.py`` checks, stores or compares, and returns the handle its object
uses). A new product adds its opener here (or as a base class), typed by overloads.
One concept, the public openers: its length past 450 lines is their typed overloads.

Invariants:
- a queue or table is identified by its name alone; its settings are stored in
  ``aq:{name}:meta`` by the first process that opens it, and every later open must give
  the same ones (TensorFlow's shared_name rule), else ElementSpecError names the field,
  the stored and the given value;
- leaving the ``async with`` block closes this process's connections for good and
  stops its producers' heartbeat; it never closes or deletes a queue or a table; every
  object opened in the block and this one (never entered again) raise ServerClosedError;
- a malformed URL is refused by ``connect()`` (ElementSpecError), before any connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, overload

from aqueue._queues._declare import Array, NumericDType

from ._core._connection import Connection
from ._core._transport import run
from ._queues._open import delete_queue, open_queue
from ._queues._queue import RedisFIFOQueue, RedisRandomShuffleQueue
from ._replay._tables import ReplayTables
from ._replay.trajectory._table import TrajectoryTables

__all__ = ["RedisServer", "connect"]


def connect(
    url: str,
    *,
    lease_time: float = 30.0,
    wait_timeout: float = 0.25,
    load_functions: bool = True,
    socket_timeout: float = 10.0,
    max_connections: int | None = None,
    max_call_bytes: int = 8 << 20,
    cluster: bool = False,
    failover_timeout: float = 20.0,
) -> RedisServer:
    """Connect to the Redis (>= 7.0) or Valkey server at ``url``; use as ``async with``.

    Args:
        url: ``redis://[[user]:password@]host:port/db``, ``rediss://`` for TLS, or
            ``unix://``; passed to redis-py as is.
        lease_time: seconds a dequeued batch may stay unacknowledged before any client
            puts it back (a crashed consumer's elements come back after this), and
            the expiry of producer registrations without a heartbeat.
        wait_timeout: longest single wait for a wake-up before a waiter retries; bounds
            the cost of a lost wake-up. Must be below ``lease_time / 2``.
        load_functions: load (or replace) aqueue's Lua library if it is missing or of
            another version. Pass False for a restricted ACL user; an admin then loads
            it once with ``load_functions=True``.
        socket_timeout: seconds a server call may take before ServerConnectionError.
        max_connections: cap of each connection pool (None: unbounded).
        max_call_bytes: an enqueue_many sends at most about this many bytes per call.
        cluster: ``url`` names any node of a Redis Cluster (the library is loaded on
            every primary, each object's calls go to the primary of its hash tag).
        failover_timeout: with ``cluster``, the longest a call waits for a failover.
    """
    return RedisServer(
        url,
        lease_time=lease_time,
        wait_timeout=wait_timeout,
        load_functions=load_functions,
        socket_timeout=socket_timeout,
        max_connections=max_connections,
        max_call_bytes=max_call_bytes,
        cluster=cluster,
        failover_timeout=failover_timeout,
    )


class RedisServer(ReplayTables, TrajectoryTables):
    """The connections of one ``connect()`` block, and the queues and tables on them."""

    def __init__(
        self,
        url: str,
        *,
        lease_time: float,
        wait_timeout: float,
        load_functions: bool,
        socket_timeout: float,
        max_connections: int | None,
        max_call_bytes: int,
        cluster: bool = False,
        failover_timeout: float = 20.0,
    ) -> None:
        self._conn = Connection(
            url,
            lease_time=lease_time,
            wait_timeout=wait_timeout,
            load_functions=load_functions,
            socket_timeout=socket_timeout,
            max_connections=max_connections,
            max_call_bytes=max_call_bytes,
            cluster=cluster,
            failover_timeout=failover_timeout,
        )

    def __repr__(self) -> str:
        return f"<RedisServer {self._conn.url}>"

    async def __aenter__(self) -> RedisServer:
        await self._conn.open(repr(self))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._conn.close()

    # -- queues --------------------------------------------------------------------------

    @overload
    async def fifo_queue(
        self,
        name: str,
        capacity: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
    ) -> RedisFIFOQueue[dict[str, Array]]: ...
    @overload
    async def fifo_queue(
        self,
        name: str,
        capacity: int,
        dtypes: Any,
        shapes: Any = ...,
        *,
        names: Sequence[str],
    ) -> RedisFIFOQueue[dict[str, Array]]: ...
    @overload
    async def fifo_queue(
        self,
        name: str,
        capacity: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
    ) -> RedisFIFOQueue[tuple[Array, Array]]: ...
    @overload
    async def fifo_queue(
        self,
        name: str,
        capacity: int,
        dtypes: tuple[NumericDType, NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
    ) -> RedisFIFOQueue[tuple[Array, Array, Array]]: ...
    @overload
    async def fifo_queue(
        self,
        name: str,
        capacity: int,
        dtypes: NumericDType,
        shapes: Any = ...,
        names: None = ...,
    ) -> RedisFIFOQueue[Array]: ...
    @overload
    async def fifo_queue(
        self,
        name: str,
        capacity: int,
        dtypes: Any,
        shapes: Any = ...,
        names: Any = ...,
        *, shards: int | None = ...,
    ) -> RedisFIFOQueue[Any]: ...  # fmt: skip
    async def fifo_queue(
        self,
        name: str,
        capacity: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        shards: int | None = None,
    ) -> RedisFIFOQueue[Any]:
        """Open (creating if needed) the FIFO queue ``name``; arguments as ``FIFOQueue``
        (its element type is inferred as theirs: one array, a tuple, or a dict with
        ``names``).

        ``shards``: how many shards hold the queue (None: as stored, else the number
        of primaries on a cluster, 1 on one server; ``1 <= shards <= capacity`` on
        both); a queue of several shards has no thread view.

        Raises:
            ElementSpecError: A bad argument (as in process, or ``shards``), a dtype AQ1
                cannot carry, or a queue of that name exists with other settings.
        """
        c = self._conn
        kw = self._queue_options(shards)
        hs = await run(
            open_queue("fifo", name, capacity, 0, dtypes, shapes, names, None, **kw), c.live()
        )
        return RedisFIFOQueue(hs[0], c.live(), c.sync, c, hs)

    @overload
    async def random_shuffle_queue(
        self,
        name: str,
        capacity: int,
        min_after_dequeue: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
        *,
        seed: int | None = ...,
        shards: int | None = ...,
    ) -> RedisRandomShuffleQueue[dict[str, Array]]: ...
    @overload
    async def random_shuffle_queue(
        self,
        name: str,
        capacity: int,
        min_after_dequeue: int,
        dtypes: Any,
        shapes: Any = ...,
        *,
        names: Sequence[str],
        seed: int | None = ...,
        shards: int | None = ...,
    ) -> RedisRandomShuffleQueue[dict[str, Array]]: ...
    @overload
    async def random_shuffle_queue(
        self,
        name: str,
        capacity: int,
        min_after_dequeue: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
        *,
        seed: int | None = ...,
        shards: int | None = ...,
    ) -> RedisRandomShuffleQueue[tuple[Array, Array]]: ...
    @overload
    async def random_shuffle_queue(
        self,
        name: str,
        capacity: int,
        min_after_dequeue: int,
        dtypes: tuple[NumericDType, NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
        *,
        seed: int | None = ...,
        shards: int | None = ...,
    ) -> RedisRandomShuffleQueue[tuple[Array, Array, Array]]: ...
    @overload
    async def random_shuffle_queue(
        self,
        name: str,
        capacity: int,
        min_after_dequeue: int,
        dtypes: NumericDType,
        shapes: Any = ...,
        names: None = ...,
        *,
        seed: int | None = ...,
        shards: int | None = ...,
    ) -> RedisRandomShuffleQueue[Array]: ...
    @overload
    async def random_shuffle_queue(
        self,
        name: str,
        capacity: int,
        min_after_dequeue: int,
        dtypes: Any,
        shapes: Any = ...,
        names: Any = ...,
        *,
        seed: int | None = ...,
        shards: int | None = ...,
    ) -> RedisRandomShuffleQueue[Any]: ...
    async def random_shuffle_queue(
        self,
        name: str,
        capacity: int,
        min_after_dequeue: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        seed: int | None = None,
        shards: int | None = None,
    ) -> RedisRandomShuffleQueue[Any]:
        """Open (creating if needed) the shuffle queue ``name``; arguments as
        ``RandomShuffleQueue``. ``seed`` seeds this client's random numbers only.

        ``shards``: as ``fifo_queue``'s, at most ``capacity - min_after_dequeue``:
        each shard keeps its part of ``min_after_dequeue``, and a dequeue draws each
        element's shard in proportion to what the shards can give, so it mixes across
        shards.

        Raises:
            ElementSpecError: As ``fifo_queue``.
        """
        c = self._conn
        kw = self._queue_options(shards)
        op = open_queue(
            "shuffle", name, capacity, min_after_dequeue, dtypes, shapes, names, seed, **kw
        )
        hs = await run(op, c.live())
        return RedisRandomShuffleQueue(hs[0], c.live(), c.sync, c, hs)

    async def delete_queue(self, name: str) -> bool:
        """Delete queue ``name`` and all its keys; True if it existed. Its waiters wake
        and fail (OutOfRangeError, QueueClosedError).

        Raises:
            ElementSpecError: ``name`` holds a replay table (use ``delete_table``).
        """
        return await run(delete_queue(name), self._conn.live())

    def _queue_options(self, shards: Any) -> dict[str, Any]:
        """What ``open_queue`` takes beside the queue's own settings: the timings and
        where a new queue's shards go (``Connection.shard_layout``)."""
        default, owner_of = self._conn.shard_layout()
        return {
            **self._timings(),
            "shards": shards,
            "default_shards": default,
            "owner_of": owner_of,
        }

    def _timings(self) -> dict[str, Any]:
        c = self._conn
        return {
            "lease_time": c.lease_time,
            "wait_timeout": c.wait_timeout,
            "max_call_bytes": c.max_call_bytes,
        }
