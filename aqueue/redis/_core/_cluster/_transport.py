"""The transports (``aqueue.redis._transport``'s protocols) over a Redis Cluster:
``ClusterAsyncio`` for asyncio and ``ClusterSync`` for threads (on trio, the
single-server ``RedisThreads`` runs ``ClusterSync``'s requests in worker threads).

Every request names its keys' hash tag, so it goes to the one primary serving that
slot (``_routing``), and a multi-command ``Call`` travels as one *non-transactional*
pipeline on one connection to that node, in order:

- plain: ``FCALL fn 1 key args`` (``FCALL_RO`` for ``ro``);
- with ``stage``: ``MSET e:<ref> payload ...`` then the ``FCALL`` that admits them;
- with ``fetch`` (and ``drop``): the ``FCALL``, then ``MGET`` of the fetched keys
  (then ``DEL`` of the dropped ones); ``atomic`` is the same pipeline.

No ``MULTI``: redis-py's async cluster transaction runs every queued command in a
thread of its own, and its retry sends a whole transaction again after a lost EXEC
reply. The one thing the transaction gave on one server is lost here: a client
killed between the ``MSET`` and the ``FCALL`` leaves its staged payloads behind (and
one killed between a sample's ``FCALL`` and its ``DEL`` leaves the copies), until
the ops register those keys with their call so that a later call reaps them.

While a node fails, a request waits for the cluster (``_faults.Recovery``): one
that provably did not run is sent again, after a pause, until the replica has taken
over or ``failover_timeout`` has passed; one that may have run fails at once with
ServerConnectionError. After any lost connection both clients of the transport read
the slot map again (redis-py's async pipelines do not) and renew their connections
(redis-py drops only the idle ones of the client and node that saw the error): an
idle connection to a killed node would take the next request and lose it with its
outcome unknown, where a fresh one is refused, which proves the request did not run.
The async client also renews a connection its server closed while it sat idle
(``_routing``). (A request on a node that vanished without closing its sockets, a
network partition, still fails that way: the ops resolve it with their lease or
waiter id.)

A call that meets "Function not found" (a primary that joined later, or whose library
was flushed) loads the library on every primary that lacks it (``_loading``) and
runs again.

Invariants (as on one server, ``aqueue.redis._clients``):
- a call that was sent runs to its end even if the caller is cancelled (shielded;
  a native cancellation is re-raised after it, or re-armed after returning a ``keep``
  call's reply); the pause between two attempts is cancellable, since nothing ran;
- ``wait`` is cancellable at any time; its BLPOP finishes in a task of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from typing import Any

import anyio
import redis
from redis.exceptions import RedisClusterException

from .._clients import map_error, shielded
from .._errors import ServerConnectionError, ServerError
from .._transport import Call
from ._faults import DEFAULT_FAILOVER_TIMEOUT, RELOAD, Attempts, Outages, closed_under
from ._loading import ensure_library, ensure_library_sync
from ._routing import AsyncClusterClient, SyncClusterClient, cluster_options, slot_of

__all__ = ["ClusterAsyncio", "ClusterSync", "finish"]

_ERRORS = (redis.RedisError, RedisClusterException)


def _mapped(exc: BaseException, what: str) -> BaseException:
    """The aqueue error for a redis-py error (cluster errors included; a discovery that
    reached no node is a ServerConnectionError, as a refused connection to one server)."""
    if isinstance(exc, RedisClusterException) and _lost(exc.__cause__):
        assert exc.__cause__ is not None
        return map_error(exc.__cause__, f"{what}: {exc}")
    if isinstance(exc, RedisClusterException):
        return ServerError(f"{what}: the Redis Cluster refused the call: {exc}")
    return map_error(exc, what)


async def finish(call: Awaitable[Any], what: str, keep: bool = False) -> Any:
    """Run ``call`` to its end even when the caller is cancelled (see the module
    docstring); redis-py errors become aqueue errors caused by them."""
    try:
        return await shielded(call, keep)
    except _ERRORS as exc:
        raise _mapped(exc, what) from exc
    except AttributeError as exc:
        if not closed_under(exc):
            raise
        raise ServerConnectionError(
            f"{what}: the connection was closed before the call was sent ({exc})"
        ) from exc


def _queue(pipe: Any, call: Call) -> Any:
    """``pipe`` (a cluster pipeline, sync or async) with ``call``'s commands queued
    (raw: redis-py refuses its MSET/MGET methods in cluster pipelines, not the
    commands)."""
    if call.stage:
        pipe.execute_command("MSET", *(x for pair in call.stage for x in pair))
    pipe.execute_command("FCALL_RO" if call.ro else "FCALL", call.fn, 1, call.key, *call.args)
    if call.fetch:
        pipe.execute_command("MGET", *call.fetch)
    if call.drop:
        pipe.execute_command("DEL", *call.drop)
    return pipe


def _plain(call: Call) -> tuple[Any, ...]:
    """The command of a call without a pipeline."""
    return ("FCALL_RO" if call.ro else "FCALL", call.fn, 1, call.key, *call.args)


def _result(call: Call, replies: Sequence[Any], what: str) -> Any:
    """The call's reply from the pipeline's (the function's, with the fetched values
    if any); the first failed command's error, mapped."""
    for r in replies:
        if isinstance(r, BaseException):
            raise _mapped(r, what) from r
    at = 1 if call.stage else 0
    return (replies[at], replies[at + 1]) if call.fetch else replies[at]


def _token(reply: Any) -> bytes | None:
    """The token a BLPOP popped, or None (it timed out)."""
    return None if reply is None else bytes(reply[1])


def _piped(call: Call) -> bool:
    return bool(call.stage or call.fetch or call.drop)


def _lost(exc: BaseException | None) -> bool:
    lost = isinstance(exc, (redis.ConnectionError, redis.TimeoutError))
    return lost or (exc is not None and closed_under(exc))


class _Cluster:
    """What both transports share: the settings, the slots' outages, the rule; each
    makes its two clients (calls, and the BLPOP waits) in ``_clients``."""

    def __init__(
        self,
        url: str,
        *,
        socket_timeout: float = 10.0,
        max_connections: int | None = None,
        failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT,
        load_functions: bool = True,
    ) -> None:
        opts = cluster_options(socket_timeout, max_connections)
        self._url = url
        self._kw = {k: v for k, v in opts.items() if k != "_retry"}
        self._retry = opts["_retry"]
        self._timeout = failover_timeout
        self._load = load_functions
        self._outages = Outages()
        self._clients()

    def _clients(self) -> None:
        raise NotImplementedError

    def _attempts(self, key: str, idempotent: bool = False) -> Attempts:
        return Attempts(self._outages, key, self._timeout, load=self._load, idempotent=idempotent)

    def _answered(self, key: str) -> None:
        """A request to ``key``'s slot got its reply: the slot's outage is over."""
        if self._outages:
            self._outages.end(slot_of(key))


class ClusterAsyncio(_Cluster):
    """The AsyncTransport over a Redis Cluster, for asyncio."""

    def _clients(self) -> None:
        self.client = self._client()
        self._waits = self._client()
        self._abandoned: set[asyncio.Future[Any]] = set()

    def _client(self) -> AsyncClusterClient:
        client = AsyncClusterClient.from_url(self._url, retry=self._retry[1], **self._kw)
        assert isinstance(client, AsyncClusterClient)  # (from_url is typed for the base)
        return client

    async def start(self) -> None:
        """Discover the cluster and check aqueue's library on every primary."""
        try:
            await self._waits.initialize()
        except _ERRORS as exc:
            raise _mapped(exc, "discovering the Redis Cluster") from exc
        await self._library("connecting")

    async def _library(self, what: str) -> None:
        try:
            await ensure_library(self.client, self._load)
        except RedisClusterException as exc:
            raise _mapped(exc, f"{what}: checking aqueue's library") from exc

    def _purge(self, exc: BaseException | None) -> None:
        """After a lost connection: both clients read the slot map again and renew
        their connections."""
        if _lost(exc):
            self.client.refresh()
            self._waits.refresh()

    async def call(self, call: Call) -> Any:
        what = f"{call.fn} on {call.key}"
        attempts: Attempts | None = None
        while True:
            try:
                reply = await self._once(call, what)
            except ServerError as exc:
                attempts = attempts or self._attempts(call.key)
                step = attempts.after(exc, what)
                if step is None:
                    raise
                if step is RELOAD:
                    await self._library(what)
                    continue
                self._purge(exc.__cause__)
                await anyio.sleep(float(step))
            else:
                self._answered(call.key)
                return reply

    async def _once(self, call: Call, what: str) -> Any:
        if not _piped(call):
            return await finish(self.client.execute_command(*_plain(call)), what, call.keep)
        pipe = _queue(self.client.pipeline(transaction=False), call)
        replies = await finish(pipe.execute(raise_on_error=False), what, call.keep)
        try:
            return _result(call, replies, what)
        except ServerError:
            if call.stage:  # best effort: the function did not admit them
                with anyio.CancelScope(shield=True):
                    try:
                        await self.client.execute_command("DEL", *(k for k, _ in call.stage))
                    except _ERRORS:
                        pass
            raise

    async def read(self, keys: Sequence[str]) -> list[Any]:
        what = f"reading {len(keys)} payloads"
        attempts = self._attempts(keys[0], idempotent=True)
        while True:
            try:
                return list(await finish(self.client.execute_command("MGET", *keys), what))
            except ServerError as exc:
                step = attempts.after(exc, what)
                if step is None:
                    raise
                self._purge(exc.__cause__)
                await anyio.sleep(float(step))

    async def wait(self, key: str, seconds: float) -> bytes | None:
        # As on one server, the BLPOP runs in a task a cancellation does not touch. A
        # failed wait (its node died, or redis-py closed the connection to refresh the
        # slot map) pauses and reports a timeout: the op calls again, and that call
        # waits for the cluster or fails.
        task = asyncio.ensure_future(self._waits.blpop([key], seconds))
        try:
            reply = await asyncio.shield(task)
        except asyncio.CancelledError:
            self._abandoned.add(task)
            task.add_done_callback(self._forget)
            raise
        except _ERRORS as exc:
            what = f"waiting on {key}"
            step = self._attempts(key, idempotent=True).after(exc, what)
            if step is None:
                raise _mapped(exc, what) from exc
            self._purge(exc)
            await anyio.sleep(float(step))
            return None
        return _token(reply)

    def _forget(self, task: asyncio.Future[Any]) -> None:
        self._abandoned.discard(task)
        if not task.cancelled():
            task.exception()

    async def aclose(self) -> None:
        for task in list(self._abandoned):
            task.cancel()
        if self._abandoned:
            await asyncio.wait(list(self._abandoned))
        await self.client.close_all()
        await self._waits.close_all()


class ClusterSync(_Cluster):
    """The SyncTransport over a Redis Cluster, for threads (thread-safe). Connecting
    blocks: construct it in a worker thread."""

    def _clients(self) -> None:
        try:
            self.client = self._client()
            self._waits = self._client()
        except _ERRORS as exc:
            raise _mapped(exc, "discovering the Redis Cluster") from exc

    def _client(self) -> Any:  # (redis-py's sync cluster client is not typed)
        return SyncClusterClient.from_url(self._url, retry=self._retry[0], **self._kw)

    def start(self) -> None:
        """Check aqueue's library on every primary."""
        self._library("connecting")

    def _library(self, what: str) -> None:
        try:
            ensure_library_sync(self.client, self._load)
        except RedisClusterException as exc:
            raise _mapped(exc, f"{what}: checking aqueue's library") from exc

    def _purge(self, exc: BaseException | None) -> None:
        """After a lost connection: drop the idle connections of both clients."""
        if _lost(exc):
            for client in (self.client, self._waits):
                for node in client.get_nodes():
                    node.redis_connection.connection_pool.disconnect_free_connections()

    def call(self, call: Call) -> Any:
        what = f"{call.fn} on {call.key}"
        attempts: Attempts | None = None
        while True:
            try:
                reply = self._once(call, what)
            except ServerError as exc:
                attempts = attempts or self._attempts(call.key)
                step = attempts.after(exc, what)
                if step is None:
                    raise
                if step is RELOAD:
                    self._library(what)
                    continue
                self._purge(exc.__cause__)
                time.sleep(float(step))
            else:
                self._answered(call.key)
                return reply

    def _once(self, call: Call, what: str) -> Any:
        try:
            if not _piped(call):
                return self.client.execute_command(*_plain(call))
            pipe = _queue(self.client.pipeline(transaction=False), call)
            replies = pipe.execute(raise_on_error=False)
        except _ERRORS as exc:
            raise _mapped(exc, what) from exc
        try:
            return _result(call, replies, what)
        except ServerError:
            if call.stage:
                try:
                    self.client.execute_command("DEL", *(k for k, _ in call.stage))
                except _ERRORS:
                    pass
            raise

    def read(self, keys: Sequence[str]) -> list[Any]:
        what = f"reading {len(keys)} payloads"
        attempts = self._attempts(keys[0], idempotent=True)
        while True:
            try:
                return list(self.client.execute_command("MGET", *keys))
            except _ERRORS as exc:
                step = attempts.after(exc, what)
                if step is None:
                    raise _mapped(exc, what) from exc
                self._purge(exc)
                time.sleep(float(step))

    def wait(self, key: str, seconds: float) -> bytes | None:
        try:
            reply = self._waits.blpop([key], seconds)
        except _ERRORS as exc:
            what = f"waiting on {key}"
            step = self._attempts(key, idempotent=True).after(exc, what)
            if step is None:
                raise _mapped(exc, what) from exc
            self._purge(exc)
            time.sleep(float(step))
            return None
        return _token(reply)

    def close(self) -> None:
        self.client.close()
        self._waits.close()
