"""Connection: one server's connections for one ``async with aqueue.redis.connect(...)``
block, whatever is opened over them: the transports, the checks made on entering (the
library, the memory policy), the producers' heartbeat, and the end of the block.

Invariants:
- it is opened once; its first call connects, so a failure names the server and why
  (``_diagnose``); a failed opening is an ended block too;
- while open, it refreshes every ``lease_time / 3`` seconds the expiry of every
  producer (of a queue or a table) registered through it and not yet ended;
- closing it closes its transports for good: every object opened over it, and the
  connection itself, raise ServerClosedError from then on (nothing reconnects); it
  never closes or deletes a queue or a table;
- with ``load_functions``, its transports load aqueue's library again where a call
  finds it missing (see ``_clients``);
- with ``cluster``, ``url`` names any node of a Redis Cluster: the transports are the
  cluster's (``_cluster``), which check the library on every primary on entering and
  route each call to the primary of its hash tag's slot; a failover is waited for at
  most ``failover_timeout`` seconds, then the call raises ServerConnectionError.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import redis

import aqueue

from ._clients import RedisAsyncio, RedisSync, RedisThreads, client_options, ended_error, map_error
from ._cluster._transport import ClusterAsyncio, ClusterSync
from ._diagnose import OWNER, connect_error, eviction, safe_url, url_problem
from ._errors import ServerConnectionError, ServerError
from ._handle import Handle
from ._library import LIBRARY_SOURCE, library_problem
from ._shared import keep_producers
from ._spec import int_arg, positive_arg
from ._transport import AsyncTransport, Call, SyncTransport, run

__all__ = ["Connection"]

_log = logging.getLogger("aqueue.redis")


class Connection:
    """One server's connections for one block (see the module docstring); the
    ``Producers`` bookkeeping of the objects opened over it."""

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
        if not isinstance(url, str):
            raise aqueue.ElementSpecError(f"{OWNER}: url must be a str, got {url!r}")
        problem = url_problem(url)
        if problem is not None:
            raise aqueue.ElementSpecError(
                f"{OWNER}: url {safe_url(url)!r} is not a Redis URL: {problem} (expected "
                "redis://[[user]:password@]host[:port][/db], rediss://... for TLS, or "
                "unix:///path/to/socket[?db=N])"
            )
        self.lease_time = positive_arg(lease_time, "lease_time", OWNER)
        self.wait_timeout = positive_arg(wait_timeout, "wait_timeout", OWNER)
        if self.wait_timeout >= self.lease_time / 2:
            raise aqueue.ElementSpecError(
                f"{OWNER}: wait_timeout must be < lease_time / 2 ({self.lease_time / 2}), "
                f"got {wait_timeout}"
            )
        timeout = max(positive_arg(socket_timeout, "socket_timeout", OWNER), wait_timeout + 1.0)
        self.max_call_bytes = int_arg(max_call_bytes, "max_call_bytes", OWNER, 1)
        self.url = safe_url(url)
        self._url = url
        self._load = bool(load_functions)
        self._opts = client_options(timeout, max_connections)
        if not isinstance(cluster, bool):
            raise aqueue.ElementSpecError(f"{OWNER}: cluster must be a bool, got {cluster!r}")
        self.cluster = cluster
        self._cluster_opts: dict[str, Any] = {
            "socket_timeout": timeout,
            "max_connections": max_connections,
            "failover_timeout": positive_arg(failover_timeout, "failover_timeout", OWNER),
            "load_functions": self._load,
        }
        self._sync: RedisSync | ClusterSync | None = None
        self._transport: AsyncTransport | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._producers: dict[str, tuple[Handle, set[str]]] = {}
        self._entered = False
        self._ended = False

    # -- the block --------------------------------------------------------------------

    async def open(self, owner: str) -> None:
        """Connect (``owner`` names this block's object in a second entry's error)."""
        if self._entered:
            raise RuntimeError(
                f"aqueue.redis: the server object {owner} was already entered; it is "
                "entered once (`async with aqueue.redis.connect(url) as server:`): call "
                "connect() again for a new block"
            )
        self._entered = True
        try:
            if self.cluster:
                await self._open_cluster()
            else:
                self._open_server()
                await self._check_library()
            await self._check_eviction()
            self._tg = anyio.create_task_group()
            await self._tg.__aenter__()
            self._tg.start_soon(self._heartbeat)
        except BaseException:
            await self._close_clients()
            raise

    def _open_server(self) -> None:
        """One server's transports (they connect on their first call)."""
        library = LIBRARY_SOURCE if self._load else None
        self._sync = RedisSync(self._url, self._opts, library)
        try:
            asyncio.get_running_loop()
            self._transport = RedisAsyncio(self._url, self._opts, library)
        except RuntimeError:  # trio (or another anyio backend): redis.asyncio cannot run
            self._transport = RedisThreads(self._sync)

    async def _open_cluster(self) -> None:
        """Discover the cluster; the library is checked (loaded) on every primary."""
        opts = self._cluster_opts
        sync = await anyio.to_thread.run_sync(lambda: ClusterSync(self._url, **opts))
        self._sync = sync
        await anyio.to_thread.run_sync(sync.start)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # trio (or another anyio backend)
            self._transport = RedisThreads(sync)
        else:
            transport = ClusterAsyncio(self._url, **opts)
            self._transport = transport
            await transport.start()

    async def close(self) -> None:
        """End the block: stop the heartbeat, close the connections for good."""
        try:
            if self._tg is not None:
                self._tg.cancel_scope.cancel()
                await self._tg.__aexit__(None, None, None)
        finally:
            self._tg = None
            await self._close_clients()

    async def _close_clients(self) -> None:
        self._ended = True
        try:
            if self._transport is not None:
                await self._transport.aclose()
        finally:
            if self._sync is not None:
                self._sync.close()

    def live(self) -> AsyncTransport:
        """The transport of the tasks (ServerClosedError once the block has ended)."""
        if self._ended:
            raise ended_error(self.where)
        if self._transport is None:
            raise RuntimeError("use the server inside `async with aqueue.redis.connect(...)`")
        return self._transport

    @property
    def sync(self) -> SyncTransport:
        """The transport of the threads (the objects' thread views)."""
        assert self._sync is not None
        return self._sync

    def shard_layout(self) -> tuple[int, Callable[[int], str] | None]:
        """What a new sharded object's layout is chosen from: the default number of
        shards (the cluster's primaries; 1 on one server) and a slot's primary (None on
        one server), from the slot map the client already holds (no round trip)."""
        sync = self._sync
        if not isinstance(sync, ClusterSync):
            return 1, None
        client = sync.client
        slots = client.nodes_manager.slots_cache

        def owner_of(slot: int) -> str:
            nodes = slots.get(slot)
            return str(nodes[0].name) if nodes else ""

        return max(1, len(client.get_primaries())), owner_of

    @property
    def where(self) -> str:
        """``host:port`` (or the socket path) of the server, for messages."""
        if isinstance(self._sync, RedisSync):
            return self._sync.where
        return f"the Redis Cluster at {self.url}"

    # -- the checks on entering -------------------------------------------------------

    async def _check_library(self) -> None:
        """The first call: it connects, so its errors say why a connection failed."""
        t = self.live()
        try:
            reply: Any = await t.call(Call("aq_version", "aq:{version}:meta", [], ro=True))
        except ServerConnectionError as exc:
            assert isinstance(self._sync, RedisSync)
            kw = self._sync.client.connection_pool.connection_kwargs
            raise connect_error(exc.__cause__ or exc, self.where, kw) from exc.__cause__
        except ServerError as exc:
            if "not loaded" not in str(exc) and "not found" not in str(exc).lower():
                cause = exc.__cause__ or exc
                raise ServerError(
                    f"{OWNER}: the server at {self.where} refused aqueue's version check: {cause}"
                ) from cause
            reply = exc
        problem = library_problem(reply)
        if problem is None:
            return
        if not self._load:
            raise ServerError(
                f"{problem}; connect once as an admin with load_functions=True (it loads "
                "aqueue.redis's function library with FUNCTION LOAD REPLACE)"
            )
        client = self._sync.client if self._sync is not None else None
        assert client is not None

        def load() -> None:
            try:
                client.function_load(LIBRARY_SOURCE, replace=True)
            except redis.RedisError as exc:
                raise map_error(exc, f"loading aqueue's Lua library ({problem})") from exc

        await anyio.to_thread.run_sync(load)

    async def _check_eviction(self) -> None:
        """Warn when the server's ``maxmemory-policy`` can evict aqueue's keys (a user
        without the INFO command, as a least-privilege actor, is not checked)."""
        sync = self._sync
        assert sync is not None

        def read() -> list[tuple[str, dict[str, Any]]]:
            if isinstance(sync, RedisSync):
                servers: list[tuple[str, Any]] = [(f"the server at {sync.where}", sync.client)]
            else:  # each primary of the cluster
                servers = [
                    (f"the primary {node.name} of {self.where}", node.redis_connection)
                    for node in sync.client.get_primaries()
                ]
            out = []
            for name, client in servers:
                try:
                    out.append((name, dict(client.info("memory"))))
                except redis.RedisError:
                    pass
            return out

        for name, info in await anyio.to_thread.run_sync(read):
            policy = str(info.get("maxmemory_policy", ""))
            problem = eviction(policy, int(info.get("maxmemory", 0)))
            if problem is not None:
                # (stacklevel: this method, open(), the server's __aenter__, the user's block)
                warnings.warn(f"{OWNER}: {name} {problem}", RuntimeWarning, 4)
                return

    # -- producers ----------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        while True:
            await anyio.sleep(self.lease_time / 3)
            for handle, pids in list(self._producers.values()):
                if not pids:
                    continue
                try:
                    await run(keep_producers(handle, pids), self.live())
                except aqueue.QueueError as exc:  # the next beat retries
                    noun = handle.product.noun
                    _log.warning(
                        "producer heartbeat for %s '%s' failed: %s", noun, handle.name, exc
                    )

    def add_producer(self, handle: Handle, pid: str) -> None:
        """Keep producer ``pid`` of ``handle``'s object alive while the block is open."""
        self._producers.setdefault(handle.key, (handle, set()))[1].add(pid)

    def remove_producer(self, handle: Handle, pid: str) -> None:
        """Stop refreshing producer ``pid`` (it has ended)."""
        entry = self._producers.get(handle.key)
        if entry is not None:
            entry[1].discard(pid)
