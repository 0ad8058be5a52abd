"""connect() and RedisServer: one Redis server's connections, and the queues and replay
tables on it.

Invariants:
- a queue or table is identified by its name alone; its spec (a queue's kind,
  capacity, dtypes, shapes, names, min_after_dequeue; a table's max_size, spec,
  selectors, max_times_sampled, rate limiter) is stored in ``aq:{name}:meta`` by the
  first process that opens it, and every later open must give the same spec
  (TensorFlow's shared_name rule), else ElementSpecError names the field, the stored
  and the given value;
- leaving the ``async with`` block closes this process's connections for good and
  stops its producers' heartbeat; it never closes or deletes a queue or a table. Every
  handle opened in the block (queue, table, thread view, iterator) and this object
  raise ServerClosedError from then on, and the object cannot be entered again;
- a malformed URL is refused by ``connect()`` (ElementSpecError), before any connection;
- the heartbeat refreshes, every ``lease_time / 3`` seconds, the expiry of every
  producer (of a queue or a table) this process registered and has not yet ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import urllib.parse
import uuid
import warnings
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, overload

import anyio
import anyio.abc
import anyio.to_thread
import numpy as np
import redis
import redis.connection

import aqueue
from aqueue._queues._declare import Array, NumericDType, format_shape
from aqueue._replay._checks import table_settings
from aqueue._replay._limiter import MinSize, RateLimiter
from aqueue._replay._selectors import Fifo, Selector, Uniform

from ._core._clients import (
    RedisAsyncio,
    RedisSync,
    RedisThreads,
    client_options,
    ended_error,
    map_error,
)
from ._core._errors import (
    AuthenticationFailedError,
    ConnectFailedError,
    PasswordRequiredError,
    ServerConnectionError,
    ServerError,
)
from ._core._library import LIBRARY_SOURCE, library_problem
from ._core._spec import int_arg, make_spec, name_arg, positive_arg
from ._core._transport import AsyncTransport, Call, Op, run
from ._queues._handle import Handle
from ._queues._ops import keep_producers
from ._queues._queue import RedisFIFOQueue, RedisRandomShuffleQueue
from ._replay._ops import TableHandle, keep_table_producers, open_table
from ._replay._table import RedisReplayTable

__all__ = ["RedisServer", "connect"]

_log = logging.getLogger("aqueue.redis")
_FORMAT = "2"


def connect(
    url: str,
    *,
    lease_time: float = 30.0,
    wait_timeout: float = 0.25,
    load_functions: bool = True,
    socket_timeout: float = 10.0,
    max_connections: int | None = None,
    max_call_bytes: int = 8 << 20,
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
    """
    return RedisServer(
        url,
        lease_time=lease_time,
        wait_timeout=wait_timeout,
        load_functions=load_functions,
        socket_timeout=socket_timeout,
        max_connections=max_connections,
        max_call_bytes=max_call_bytes,
    )


class RedisServer:
    """The connections to one Redis server (from ``connect()``), and its queues."""

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
    ) -> None:
        owner = "aqueue.redis.connect"
        if not isinstance(url, str):
            raise aqueue.ElementSpecError(f"{owner}: url must be a str, got {url!r}")
        problem = _url_problem(url)
        if problem is not None:
            raise aqueue.ElementSpecError(
                f"{owner}: url {_safe_url(url)!r} is not a Redis URL: {problem} (expected "
                "redis://[[user]:password@]host[:port][/db], rediss://... for TLS, or "
                "unix:///path/to/socket[?db=N])"
            )
        self._lease_time = positive_arg(lease_time, "lease_time", owner)
        self._wait_timeout = positive_arg(wait_timeout, "wait_timeout", owner)
        if self._wait_timeout >= self._lease_time / 2:
            raise aqueue.ElementSpecError(
                f"{owner}: wait_timeout must be < lease_time / 2 ({self._lease_time / 2}), "
                f"got {wait_timeout}"
            )
        timeout = max(positive_arg(socket_timeout, "socket_timeout", owner), wait_timeout + 1.0)
        self._max_call_bytes = int_arg(max_call_bytes, "max_call_bytes", owner, 1)
        self._url = url
        self._load = bool(load_functions)
        self._opts = client_options(timeout, max_connections)
        self._sync: RedisSync | None = None
        self._transport: AsyncTransport | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._producers: dict[str, tuple[Any, set[str], Callable[[Any, set[str]], Op[None]]]] = {}
        self._entered = False
        self._ended = False

    def __repr__(self) -> str:
        return f"<RedisServer {_safe_url(self._url)}>"

    # -- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> RedisServer:
        if self._entered:
            raise RuntimeError(
                f"aqueue.redis: the server object {self!r} was already entered; it is "
                "entered once (`async with aqueue.redis.connect(url) as server:`): call "
                "connect() again for a new block"
            )
        self._entered = True
        library = LIBRARY_SOURCE if self._load else None
        self._sync = RedisSync(self._url, self._opts, library)
        try:
            asyncio.get_running_loop()
            self._transport = RedisAsyncio(self._url, self._opts, library)
        except RuntimeError:  # trio (or another anyio backend): redis.asyncio cannot run
            self._transport = RedisThreads(self._sync)
        try:
            await self._check_library()
            await self._check_eviction()
            self._tg = anyio.create_task_group()
            await self._tg.__aenter__()
            self._tg.start_soon(self._heartbeat)
        except BaseException:
            await self._close_clients()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._tg is not None:
                self._tg.cancel_scope.cancel()
                await self._tg.__aexit__(None, None, None)
        finally:
            self._tg = None
            await self._close_clients()

    async def _close_clients(self) -> None:
        """Close the connections for good: every handle opened in the block, and this
        object, raise ServerClosedError from now on."""
        self._ended = True
        try:
            if self._transport is not None:
                await self._transport.aclose()
        finally:
            if self._sync is not None:
                self._sync.close()

    async def _check_library(self) -> None:
        """The first call: it connects, so its errors say why a connection failed."""
        t = self._live()
        try:
            reply: Any = await t.call(Call("aq_version", "aq:{version}:meta", [], ro=True))
        except ServerConnectionError as exc:
            raise self._connect_error(exc.__cause__ or exc) from exc.__cause__
        except ServerError as exc:
            if "not loaded" not in str(exc) and "not found" not in str(exc).lower():
                cause = exc.__cause__ or exc
                raise ServerError(
                    f"aqueue.redis.connect: the server at {self._where()} refused aqueue's "
                    f"version check: {cause}"
                ) from cause
            reply = exc
        problem = library_problem(reply)
        if problem is None:
            return
        if not self._load:
            raise ServerError(
                f"{problem}; connect once as an admin with load_functions=True "
                "(FUNCTION LOAD REPLACE of aqueue/redis/_functions.lua)"
            )
        assert self._sync is not None
        client = self._sync.client

        def load() -> None:
            try:
                client.function_load(LIBRARY_SOURCE, replace=True)
            except redis.RedisError as exc:
                raise map_error(exc, f"loading aqueue's Lua library ({problem})") from exc

        await anyio.to_thread.run_sync(load)

    async def _check_eviction(self) -> None:
        """Warn when the server's ``maxmemory-policy`` can evict aqueue's keys (a user
        without the INFO command, as a least-privilege actor, is not checked)."""
        assert self._sync is not None
        client = self._sync.client

        def read() -> dict[str, Any] | None:
            try:
                return dict(client.info("memory"))
            except redis.RedisError:
                return None

        info = await anyio.to_thread.run_sync(read)
        if not info:
            return
        problem = _eviction(str(info.get("maxmemory_policy", "")), int(info.get("maxmemory", 0)))
        if problem is not None:
            warnings.warn(
                f"aqueue.redis.connect: the server at {self._where()} {problem}",
                RuntimeWarning,
                stacklevel=3,
            )

    def _where(self) -> str:
        """``host:port`` (or the socket path) of the URL, for messages."""
        assert self._sync is not None
        return self._sync.where

    def _connect_error(self, cause: BaseException) -> ServerConnectionError:
        """The error ``connect()`` raises when its first call could not connect."""
        assert self._sync is not None
        kw = self._sync.client.connection_pool.connection_kwargs
        where, owner = self._where(), "aqueue.redis.connect"
        text = str(cause).strip()
        if isinstance(cause, redis.AuthenticationError) or text.startswith(("NOAUTH", "WRONGPASS")):
            if not kw.get("password"):
                return PasswordRequiredError(
                    f"{owner}: the server at {where} requires a password (the URL gives "
                    f"none; pass it as redis://[user]:PASSWORD@{where}/db)"
                )
            user = kw.get("username") or "default"
            return AuthenticationFailedError(
                f"{owner}: the server at {where} refused the credentials in the URL (user "
                f"'{user}' with the URL's password): {text}"
            )
        reason = _connect_reason(cause)
        return ConnectFailedError(f"{owner}: could not connect to {where}: {reason}")

    def _live(self) -> AsyncTransport:
        if self._ended:
            assert self._sync is not None
            raise ended_error(self._sync.where)
        if self._transport is None:
            raise RuntimeError("use the server inside `async with aqueue.redis.connect(...)`")
        return self._transport

    async def _heartbeat(self) -> None:
        while True:
            await anyio.sleep(self._lease_time / 3)
            for handle, pids, beat in list(self._producers.values()):
                if not pids:
                    continue
                try:
                    await run(beat(handle, pids), self._live())
                except aqueue.QueueError as exc:  # the next beat retries
                    _log.warning("producer heartbeat for queue '%s' failed: %s", handle.name, exc)

    def add_producer(self, handle: Handle, pid: str) -> None:
        self._producers.setdefault(handle.key, (handle, set(), keep_producers))[1].add(pid)

    def add_table_producer(self, handle: TableHandle, pid: str) -> None:
        self._producers.setdefault(handle.key, (handle, set(), keep_table_producers))[1].add(pid)

    def remove_producer(self, handle: Handle | TableHandle, pid: str) -> None:
        entry = self._producers.get(handle.key)
        if entry is not None:
            entry[1].discard(pid)

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
    ) -> RedisFIFOQueue[Any]: ...
    async def fifo_queue(
        self, name: str, capacity: int, dtypes: Any, shapes: Any = None, names: Any = None
    ) -> RedisFIFOQueue[Any]:
        """Open (creating if needed) the FIFO queue ``name``; arguments as ``FIFOQueue``
        (its element type is inferred as theirs: one array, a tuple, or a dict with
        ``names``)."""
        h = await self._open("fifo", name, capacity, 0, dtypes, shapes, names, None)
        assert self._sync is not None
        return RedisFIFOQueue(h, self._live(), self._sync, self)

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
    ) -> RedisRandomShuffleQueue[Any]:
        """Open (creating if needed) the shuffle queue ``name``; arguments as
        ``RandomShuffleQueue``. ``seed`` seeds this client's random numbers only."""
        h = await self._open(
            "shuffle", name, capacity, min_after_dequeue, dtypes, shapes, names, seed
        )
        assert self._sync is not None
        return RedisRandomShuffleQueue(h, self._live(), self._sync, self)

    async def delete_queue(self, name: str) -> bool:
        """Delete queue ``name`` and all its keys; True if it existed. Its waiters wake
        and fail (OutOfRangeError, QueueClosedError).

        Raises:
            ElementSpecError: ``name`` holds a replay table (use ``delete_table``).
        """
        name = name_arg(name, "RedisServer.delete_queue", "queue name")
        r = await self._live().call(Call("aq_delete", f"aq:{{{name}}}:meta", []))
        if int(r) < 0:
            raise aqueue.ElementSpecError(
                f"RedisServer.delete_queue: '{name}' is a replay table; use delete_table"
            )
        return bool(r)

    @overload
    async def replay_table(
        self,
        name: str,
        max_size: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
    ) -> RedisReplayTable[dict[str, Array]]: ...
    @overload
    async def replay_table(
        self,
        name: str,
        max_size: int,
        dtypes: Any,
        shapes: Any = ...,
        *,
        names: Sequence[str],
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
    ) -> RedisReplayTable[dict[str, Array]]: ...
    @overload
    async def replay_table(
        self,
        name: str,
        max_size: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
    ) -> RedisReplayTable[tuple[Array, Array]]: ...
    @overload
    async def replay_table(
        self,
        name: str,
        max_size: int,
        dtypes: tuple[NumericDType, NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
    ) -> RedisReplayTable[tuple[Array, Array, Array]]: ...
    @overload
    async def replay_table(
        self,
        name: str,
        max_size: int,
        dtypes: NumericDType,
        shapes: Any = ...,
        names: None = ...,
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
    ) -> RedisReplayTable[Array]: ...
    @overload
    async def replay_table(
        self,
        name: str,
        max_size: int,
        dtypes: Any,
        shapes: Any = ...,
        names: Any = ...,
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
    ) -> RedisReplayTable[Any]: ...
    async def replay_table(
        self,
        name: str,
        max_size: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        sampler: Selector = Uniform(),  # noqa: B008 - frozen, shared safely
        remover: Selector = Fifo(),  # noqa: B008
        max_times_sampled: int = 0,
        rate_limiter: RateLimiter = MinSize(1),  # noqa: B008
        seed: int | None = None,
    ) -> RedisReplayTable[Any]:
        """Open (creating if needed) the replay table ``name``, shared by every process
        that opens it; arguments as ``aqueue.ReplayTable`` (``seed`` seeds this client's
        random numbers only: the draws of its samples and random evictions).

        Raises:
            ElementSpecError: A bad argument (as in process), a dtype AQ1 cannot carry,
                or a table (or queue) of that name exists with other settings (the
                message names the field, the stored and the given value).
        """
        name = name_arg(name, "RedisReplayTable", "table name")
        owner = f"RedisReplayTable '{name}'"
        settings = table_settings(
            owner,
            max_size,
            dtypes,
            shapes,
            names,
            sampler=sampler,
            remover=remover,
            max_times_sampled=max_times_sampled,
            rate_limiter=rate_limiter,
            seed=seed,
        )
        make_spec(owner, dtypes, shapes, names)  # (refuses what AQ1 cannot carry)
        op = open_table(name, settings, self._wait_timeout, self._lease_time, _readable)
        handle = await run(op, self._live())
        assert self._sync is not None
        return RedisReplayTable(handle, self._live(), self._sync, self)

    async def delete_table(self, name: str) -> bool:
        """Delete replay table ``name`` with all its keys and items; True if it existed.
        Its waiters wake and fail (QueueClosedError, OutOfRangeError).

        Raises:
            ElementSpecError: ``name`` holds a queue (use ``delete_queue``).
        """
        name = name_arg(name, "RedisServer.delete_table", "table name")
        r = await self._live().call(Call("rt_drop", f"aq:{{{name}}}:meta", []))
        if int(r) < 0:
            raise aqueue.ElementSpecError(
                f"RedisServer.delete_table: '{name}' is a queue; use delete_queue"
            )
        return bool(r)

    async def _open(
        self,
        kind: str,
        name: Any,
        capacity: Any,
        mad: Any,
        dtypes: Any,
        shapes: Any,
        names: Any,
        seed: Any,
    ) -> Handle:
        cls = "RedisFIFOQueue" if kind == "fifo" else "RedisRandomShuffleQueue"
        name = name_arg(name, cls, "queue name")
        owner = f"{cls} '{name}'"
        capacity = int_arg(capacity, "capacity", owner, 1)
        mad = int_arg(mad, "min_after_dequeue", owner, 0)
        if mad >= capacity:
            raise aqueue.ElementSpecError(
                f"{owner}: min_after_dequeue must be < capacity ({capacity}), got {mad}"
            )
        if seed is not None:
            seed = int_arg(seed, "seed", owner, 0)
        spec = make_spec(owner, dtypes, shapes, names)
        given = {
            "kind": kind,
            "capacity": str(capacity),
            "min_after_dequeue": str(mad),
            "dtypes": json.dumps([dt.str for dt in spec.dtypes]),
            "shapes": json.dumps(None if spec.shapes is None else [list(s) for s in spec.shapes]),
            "names": json.dumps(None if spec.names is None else list(spec.names)),
            "format": _FORMAT,
        }
        key = f"aq:{{{name}}}:meta"
        order = ["kind", "capacity", "min_after_dequeue", "dtypes", "shapes", "names", "format"]
        args = [uuid.uuid4().hex, *(given[f] for f in order)]
        r = await self._live().call(Call("aq_open", key, args))
        texts = [v.decode() if isinstance(v, bytes) else v for v in r]
        gen = texts[1]
        if texts[0] == "exists":
            for field, stored in zip(order, texts[2:]):
                if stored != given[field]:
                    raise aqueue.ElementSpecError(
                        f"{owner}: the queue already exists on the server with {field} "
                        f"{_readable(field, stored)}, but {_readable(field, given[field])} "
                        "was given (processes sharing a queue must open it with the same "
                        "kind, capacity, dtypes, shapes, names and min_after_dequeue)"
                    )
        return Handle(
            name=name,
            kind=kind,
            gen=gen,
            capacity=capacity,
            min_after_dequeue=mad,
            spec=spec,
            owner=owner,
            seed=seed,
            lease_time=self._lease_time,
            wait_timeout=self._wait_timeout,
            max_call_bytes=self._max_call_bytes,
        )


_KINDS = {
    "fifo": "RedisFIFOQueue",
    "shuffle": "RedisRandomShuffleQueue",
    "table": "RedisReplayTable",
}


def _readable(field: str, stored: str) -> str:
    """A spec field as stored on the server (JSON) in the notation users write it in:
    numpy dtype names, shape tuples, the queue class; as stored when it is foreign."""
    try:
        value: Any = json.loads(stored) if field in ("dtypes", "shapes", "names") else stored
        if field == "kind":
            return _KINDS.get(value, repr(value))
        if field == "format":
            version = "this" if value == _FORMAT else "another"
            return f"{value} (the stored layout of {version} aqueue version)"
        if value is None:
            return "None"
        if field == "dtypes":
            texts = [str(np.dtype(d)) for d in value]
        elif field == "shapes":
            texts = [format_shape(s) for s in value]
        elif field == "names":
            texts = [repr(str(n)) for n in value]
        else:
            return str(value)
    except (ValueError, TypeError):
        return stored
    return texts[0] if len(texts) == 1 else f"({', '.join(texts)})"


def _connect_reason(cause: BaseException) -> str:
    """Why a connection attempt failed, in a few words (redis-py's error says it with
    an errno: "Error 111 connecting to ...")."""
    seen: list[BaseException] = []
    e: BaseException | None = cause
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    for e in seen:
        if isinstance(e, ConnectionRefusedError):
            return "connection refused (is a Redis server listening there?)"
        if isinstance(e, socket.gaierror):
            return "unknown host"
        if isinstance(e, (TimeoutError, redis.TimeoutError)):
            return "timed out"
    text = str(cause)
    if "Connection refused" in text:
        return "connection refused (is a Redis server listening there?)"
    return text


def _safe_url(url: str) -> str:
    """``url`` with its password (everything before the last ``@``) masked."""
    head, sep, tail = url.rpartition("@")
    return f"{head.split('//')[0]}//***@{tail}" if sep else url


def _url_problem(url: str) -> str | None:
    """What makes ``url`` no Redis URL (None: it is one), checked before anything
    connects; redis-py would raise a bare ValueError, or not notice at all."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "unix"):
        got = f"{parts.scheme!r}" if parts.scheme else "none"
        return f"the scheme must be redis://, rediss:// or unix://, got {got}"
    try:
        parts.port  # noqa: B018 - urllib checks the port when it is read
    except ValueError:
        port = parts.netloc.rpartition(":")[2]
        return f"the port must be a number from 0 to 65535, got {port!r}"
    if scheme == "unix":
        if not parts.path:
            return "a unix:// URL must name the socket's path (unix:///path/to/socket)"
    elif parts.path not in ("", "/") and not parts.path[1:].isdigit():
        return f"the database must be a number (/0, /1, ...), got {parts.path[1:]!r}"
    parse: Any = redis.connection.parse_url  # (untyped in redis-py)
    try:
        parse(url)
    except ValueError as exc:
        return str(exc)
    return None


def _eviction(policy: str, maxmemory: int) -> str | None:
    """What a server's ``maxmemory-policy`` does to aqueue's keys when the server is
    full, or None (``noeviction``, or no memory limit: nothing is evicted)."""
    if maxmemory == 0 or policy in ("", "noeviction"):
        return None
    head = f"runs with maxmemory-policy {policy} (maxmemory {maxmemory} bytes): when full it"
    fix = (
        "set maxmemory-policy noeviction (a full server then refuses what adds data "
        "with ServerFullError and keeps everything stored)"
    )
    if policy.startswith("volatile"):
        return (
            f"{head} evicts keys that have an expiry, among them its wake-up lists and lease "
            "markers: a waiter then waits up to wait_timeout for a wake-up that was "
            f"dropped, and a late take of a cancelled dequeue holds its elements until "
            f"lease_time; {fix}"
        )
    return (
        f"{head} evicts any key: queues lose elements, tables lose items, and either may "
        f"vanish whole (their calls then say they are gone from the server); {fix}"
    )
