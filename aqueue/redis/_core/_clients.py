"""The transports (``_transport``'s protocols) over redis-py: how requests reach the server.

- ``RedisSync`` (a ``SyncTransport``): the synchronous client, for the thread view
  (``_blocking.py``); one connection pool for calls and one for the blocking waits (a
  ``BLPOP`` holds its connection). Thread-safe.
- ``RedisAsyncio`` (an ``AsyncTransport``, on asyncio): ``redis.asyncio``, the same two
  pools.
- ``RedisThreads`` (an ``AsyncTransport``, on trio and any other anyio backend):
  ``redis.asyncio`` is asyncio-only, so it runs ``RedisSync``'s requests in worker
  threads.

A ``Call`` is one round trip in one of three shapes:

- plain: one ``FCALL``;
- with ``stage`` (an enqueue): ``MULTI; MSET e:<ref> payload ...; FCALL aq_put ... ref
  ...; EXEC``. The payloads go to their own keys, never through Lua, and the
  transaction makes the staging and the call that admits (or deletes) them one atomic
  step: a producer that dies mid-send leaves nothing behind. Should the function fail
  (say the library was flushed), the staged keys are deleted, best effort;
- with ``fetch`` (a dequeue): ``FCALL aq_take ...`` pipelined with ``MGET`` of the
  keys the take renames its elements to (``e:<lease>.<j>``), so the payloads come
  straight from their keys;
- ``atomic`` with ``fetch`` and ``drop`` (a replay table's sample): ``MULTI; FCALL
  rt_sample ...; MGET o:<w>.1 ...; DEL o:<w>.1 ...; EXEC``: the function copies the
  drawn payloads to those keys, and the same transaction reads and removes them, so
  the items stay where they are and no copy outlives the call, whatever happens to
  the client.

Invariants:
- every call always lets the server call finish, so its outcome is known to the server
  state even when the caller is cancelled: an anyio cancellation is deferred past it
  (shielded scope), a native asyncio ``task.cancel()`` is re-raised only after the call
  finished (the reply is then dropped, and the caller resolves the outcome with its
  lease id), or, for a ``keep`` call, the reply is returned and the cancellation
  re-armed for the task's next await (``_redeliver``). redis-py would otherwise drop the
  connection with the command in flight.
- ``wait`` is cancellable at any time: losing a wake-up token only delays a waiter by
  one wait timeout, never loses data.
- redis-py never retries a call (``retries=0``): a function call is not idempotent, so
  a retry after a lost reply could apply it twice. Connection and timeout errors
  become ServerConnectionError, server error replies ServerError.
- a call that finds aqueue's library missing (the server restarted without persistence,
  or its functions were flushed) ran nothing (a function that is not there does not
  run; a staged payload is deleted), so a transport given the library's source loads
  it again (``FUNCTION LOAD REPLACE``) and makes the call once more; without the
  source (``load_functions=False``) the error says what happened;
- once closed (the ``connect()`` block ended), a transport performs nothing: every
  request raises ServerClosedError naming the server, and a call cut off by the close
  raises it too. redis-py's clients would otherwise reconnect on the next command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, NoReturn

import anyio
import redis
import redis.asyncio
from redis.backoff import NoBackoff

from ._errors import ServerClosedError, ServerConnectionError, ServerError, ServerFullError
from ._transport import Call, SyncTransport, redeliver

__all__ = [
    "RedisAsyncio",
    "RedisSync",
    "RedisThreads",
    "client_options",
    "ended_error",
    "map_error",
    "missing_library",
    "shielded",
    "where",
]


def where(client: redis.Redis | redis.asyncio.Redis) -> str:
    """``host:port`` (or the socket path) a client connects to, for messages."""
    kw = client.connection_pool.connection_kwargs
    if kw.get("path"):
        return str(kw["path"])
    return f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}"


def ended_error(at: str) -> ServerClosedError:
    """The error of a request made after the ``connect()`` block of server ``at`` ended."""
    return ServerClosedError(
        f"aqueue.redis: the connection block of the server at {at} has ended (`async with "
        "aqueue.redis.connect(...)` exited, closing its connections); the queues, tables "
        "and views opened in it no longer work: open them again inside a new block"
    )


def map_error(exc: BaseException, what: str) -> BaseException:
    """The aqueue error for a redis-py error raised by ``what`` (others unchanged)."""
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return ServerConnectionError(f"{what}: lost the connection to the Redis server ({exc})")
    if isinstance(exc, redis.ResponseError):
        text = str(exc)
        # Three forms: an OOM reply; a command queued in a MULTI refused with it
        # (redis-py raises that one, its text prefixed with the command); or a whole
        # EXEC refused ("EXECABORT Transaction discarded because of: OOM ..."), when
        # queuing the transaction's own payloads took the server past maxmemory.
        if isinstance(exc, redis.OutOfMemoryError) or _out_of_memory(text):
            return ServerFullError(
                f"{what}: the Redis server is full (used memory > maxmemory, under "
                "maxmemory-policy noeviction) and refuses calls that add data; dequeue, "
                "sample with max_times_sampled, delete items or queues, or raise maxmemory"
            )
        if "NOPERM" in text:
            hint = " (the ACL user lacks a permission aqueue needs; see aqueue.redis)"
        elif missing_library(exc):
            hint = (
                " (aqueue's Lua library is not loaded on the server: it restarted without "
                "persistence, or its functions were flushed, since this client connected; "
                "an admin must load it again: connect once with load_functions=True)"
            )
        else:
            hint = ""
        return ServerError(f"{what}: the Redis server refused the call: {text}{hint}")
    return exc


def _fail(exc: BaseException, what: str, ended: bool, at: str) -> NoReturn:
    """Raise the error of request ``what`` (to the server at ``at``) that failed with
    ``exc``: ServerClosedError once the block has ended (a request cut off by the close
    fails in redis-py in more than one way: a ConnectionError, or a ValueError from a
    socket file closed under a waiting thread), else ``map_error``'s (others as they
    are)."""
    if ended:
        raise ended_error(at) from exc
    mapped = map_error(exc, what)
    if mapped is exc:
        raise exc
    raise mapped from exc


def _out_of_memory(text: str) -> bool:
    return text.startswith("OOM") or "because of: OOM" in text


RELOAD = "loading aqueue's Lua library again (the server had lost it)"


def missing_library(exc: BaseException | None) -> bool:
    """Whether ``exc`` (a redis-py error or reply) says aqueue's functions are missing."""
    return isinstance(exc, redis.ResponseError) and "function not found" in str(exc).lower()


def client_options(socket_timeout: float, max_connections: int | None) -> dict[str, Any]:
    """redis-py options shared by every client aqueue makes."""
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.retry import Retry

    return {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": min(socket_timeout, 5.0),
        "max_connections": max_connections,
        "_retry": (Retry(NoBackoff(), 0), AsyncRetry(NoBackoff(), 0)),
    }


def _first_error(replies: Sequence[Any]) -> BaseException | None:
    for r in replies:
        if isinstance(r, BaseException):
            return r
    return None


def _queued(pipe: Any, call: Call) -> Any:
    """Pipeline ``pipe`` (sync or async: queuing commands does not wait) with the
    commands of a staged, fetching or atomic ``call`` queued (see the module docstring)."""
    if call.stage:
        pipe.mset(dict(call.stage))
    pipe.fcall(call.fn, 1, call.key, *call.args)
    if call.fetch:
        pipe.mget(call.fetch)
    if call.drop:
        pipe.delete(*call.drop)
    return pipe


def _piped(call: Call) -> bool:
    """Whether ``call`` needs a pipeline (more than its FCALL)."""
    return bool(call.stage or call.fetch or call.drop or call.atomic)


def _transaction(call: Call) -> bool:
    return bool(call.stage or call.atomic)


async def shielded(call: Awaitable[Any], keep: bool = False) -> Any:
    """Run ``call`` to its end even when the caller is cancelled: an anyio cancellation
    waits past it; a native one is re-raised once it has finished (or, for a ``keep``
    call that succeeded, its reply is returned and the cancellation re-armed). The
    call's own errors pass through (each transport maps them)."""
    task = asyncio.ensure_future(call)
    with anyio.CancelScope(shield=True):
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            while not task.done():
                try:
                    await asyncio.wait([task])
                except asyncio.CancelledError:
                    pass
            if not task.cancelled():
                if keep and task.exception() is None:
                    caller = asyncio.current_task()
                    if caller is not None:
                        asyncio.get_running_loop().call_soon(redeliver, caller)
                        return task.result()
                task.exception()  # retrieved: the caller resolves the outcome itself
            raise


def _reply(call: Call, replies: Sequence[Any]) -> Any:
    """A pipelined call's reply: the function's, with the fetched values if any."""
    at = 1 if call.stage else 0  # (after the MSET's reply)
    return (replies[at], replies[at + 1]) if call.fetch else replies[at]


def _token(reply: Any) -> bytes | None:
    """The token a BLPOP popped, or None (it timed out)."""
    if reply is None:
        return None
    value = reply[1]
    return value if isinstance(value, bytes) else str(value).encode()


def _sync_client(url: str, opts: dict[str, Any]) -> redis.Redis:
    kw = {k: v for k, v in opts.items() if k != "_retry"}
    return redis.Redis.from_url(url, retry=opts["_retry"][0], **kw)


def _async_client(url: str, opts: dict[str, Any]) -> redis.asyncio.Redis:
    kw = {k: v for k, v in opts.items() if k != "_retry"}
    return redis.asyncio.Redis.from_url(url, retry=opts["_retry"][1], **kw)


class RedisSync:
    """The SyncTransport: blocking requests with the synchronous client (thread-safe).
    With ``library`` (the function library's source), a call that finds the library
    missing loads it again and runs once more (see the module docstring)."""

    def __init__(self, url: str, opts: dict[str, Any], library: str | None = None) -> None:
        self.client = _sync_client(url, opts)
        self._waits = _sync_client(url, opts)
        self.where = where(self.client)
        self.ended = False
        self._library = library

    def call(self, call: Call) -> Any:
        if self.ended:
            raise ended_error(self.where)
        try:
            return self._call(call)
        except ServerError as exc:
            if self._library is None or not missing_library(exc.__cause__):
                raise
        try:
            self.client.function_load(self._library, replace=True)
        except Exception as exc:
            _fail(exc, RELOAD, self.ended, self.where)
        return self._call(call)

    def _call(self, call: Call) -> Any:
        fn, key = call.fn, call.key
        what = f"{fn} on {key}"
        try:
            if not _piped(call):
                if call.ro:
                    return self.client.fcall_ro(fn, 1, key, *call.args)
                return self.client.fcall(fn, 1, key, *call.args)
            pipe = _queued(self.client.pipeline(transaction=_transaction(call)), call)
            replies = pipe.execute(raise_on_error=False)
        except Exception as exc:
            _fail(exc, what, self.ended, self.where)
        err = _first_error(replies)
        if err is not None:
            if call.stage and not self.ended:  # (a closed client would reconnect)
                try:
                    self.client.delete(*(k for k, _ in call.stage))
                except redis.RedisError:
                    pass
            _fail(err, what, self.ended, self.where)
        return _reply(call, replies)

    def read(self, keys: Sequence[str]) -> list[Any]:
        if self.ended:
            raise ended_error(self.where)
        try:
            return list(self.client.mget(keys))
        except Exception as exc:
            _fail(exc, f"reading {len(keys)} payloads", self.ended, self.where)

    def wait(self, key: str, seconds: float) -> bytes | None:
        if self.ended:
            raise ended_error(self.where)
        try:
            reply = self._waits.blpop([key], seconds)
        except Exception as exc:
            _fail(exc, f"waiting on {key}", self.ended, self.where)
        return _token(reply)

    def close(self) -> None:
        """Close for good: later requests raise ServerClosedError."""
        self.ended = True
        self.client.close()
        self._waits.close()


class RedisThreads:
    """The AsyncTransport for trio (and any non-asyncio anyio backend): RedisSync's
    requests in worker threads."""

    def __init__(self, sync: SyncTransport) -> None:
        self._sync = sync

    async def call(self, call: Call) -> Any:
        # Shielded: a cancelled scope would otherwise refuse to start the call at all
        # (so an undo in an `except` path would never run); abandon_on_cancel=False: the
        # thread finishes, so the call's outcome is known.
        with anyio.CancelScope(shield=True):
            return await anyio.to_thread.run_sync(self._sync.call, call, abandon_on_cancel=False)

    async def read(self, keys: Sequence[str]) -> list[Any]:
        with anyio.CancelScope(shield=True):
            out: list[Any] = await anyio.to_thread.run_sync(
                self._sync.read, keys, abandon_on_cancel=False
            )
        return out

    async def wait(self, key: str, seconds: float) -> bytes | None:
        # Abandoned on cancellation: the thread's BLPOP ends by itself within `seconds`.
        return await anyio.to_thread.run_sync(self._sync.wait, key, seconds, abandon_on_cancel=True)

    async def aclose(self) -> None:
        """Nothing to do: the RedisSync belongs to the server object."""


class RedisAsyncio:
    """The AsyncTransport for asyncio: redis.asyncio, calls shielded, waits cancellable."""

    def __init__(self, url: str, opts: dict[str, Any], library: str | None = None) -> None:
        self._client = _async_client(url, opts)
        self._waits = _async_client(url, opts)
        self._abandoned: set[asyncio.Future[Any]] = set()
        self.where = where(self._client)
        self.ended = False
        self._library = library

    async def _finish(self, call: Awaitable[Any], what: str, keep: bool = False) -> Any:
        """Run ``call`` to its end even when the caller is cancelled (see above)."""
        try:
            return await shielded(call, keep)
        except Exception as exc:
            _fail(exc, what, self.ended, self.where)

    async def call(self, call: Call) -> Any:
        if self.ended:
            raise ended_error(self.where)
        try:
            return await self._call(call)
        except ServerError as exc:
            if self._library is None or not missing_library(exc.__cause__):
                raise
        await self._finish(self._client.function_load(self._library, replace=True), RELOAD)
        return await self._call(call)

    async def _call(self, call: Call) -> Any:
        fn, key = call.fn, call.key
        what = f"{fn} on {key}"
        keep = call.keep
        if not _piped(call):
            if call.ro:
                return await self._finish(self._client.fcall_ro(fn, 1, key, *call.args), what, keep)
            return await self._finish(self._client.fcall(fn, 1, key, *call.args), what, keep)
        pipe = _queued(self._client.pipeline(transaction=_transaction(call)), call)
        replies = await self._finish(pipe.execute(raise_on_error=False), what, keep)
        err = _first_error(replies)
        if err is not None:
            if call.stage and not self.ended:  # (a closed client would reconnect)
                with anyio.CancelScope(shield=True):
                    try:
                        await self._client.delete(*(k for k, _ in call.stage))
                    except redis.RedisError:
                        pass
            _fail(err, what, self.ended, self.where)
        return _reply(call, replies)

    async def read(self, keys: Sequence[str]) -> list[Any]:
        if self.ended:
            raise ended_error(self.where)
        return list(await self._finish(self._client.mget(keys), f"reading {len(keys)} payloads"))

    async def wait(self, key: str, seconds: float) -> bytes | None:
        if self.ended:
            raise ended_error(self.where)
        # The BLPOP runs in a task of its own that a cancellation does not touch: it
        # ends by itself within `seconds` and its connection goes back to the pool.
        # (Cancelled inside redis-py instead, the connection is dropped, and a native
        # cancellation landing as the reply arrives can be swallowed: blpop returns
        # None and the task keeps waiting, cancelled.)
        task = asyncio.ensure_future(self._waits.blpop([key], seconds))
        try:
            reply = await asyncio.shield(task)
        except asyncio.CancelledError:
            self._abandoned.add(task)
            task.add_done_callback(self._forget)
            raise
        except Exception as exc:
            _fail(exc, f"waiting on {key}", self.ended, self.where)
        return _token(reply)

    def _forget(self, task: asyncio.Future[Any]) -> None:
        self._abandoned.discard(task)
        if not task.cancelled():
            task.exception()  # (a lost token only delays another waiter by one wait)

    async def aclose(self) -> None:
        """Close for good: later requests raise ServerClosedError."""
        self.ended = True
        for task in list(self._abandoned):
            task.cancel()
        if self._abandoned:
            await asyncio.wait(list(self._abandoned))
        await self._client.aclose()
        await self._waits.aclose()
