"""Where a call goes on a Redis Cluster: the slot of aqueue's keys, and redis-py's
cluster clients taught three things.

1. An FCALL's slot without asking the server. redis-py learns the keys of a command
   with ``movablekeys`` (FCALL, FCALL_RO) by sending ``COMMAND GETKEYS`` to a node
   first: two extra round trips per call (measured: 4.4k FCALL/s instead of 10-12k,
   ``benchmarks/bench_cluster.py``), one more per FCALL in a sync pipeline. Every
   aqueue key is ``aq:{tag}:...``, so a call's slot is the CRC16 of its tag, computed
   here; the clients override the methods that look it up (``_determine_slot``
   async; ``determine_slot`` and ``_get_command_keys`` sync, whose pipelines are a
   class of their own) for FCALL/FCALL_RO and leave every other command, and all that
   follows the lookup (MOVED/ASK/TRYAGAIN handling), to redis-py. The MSET, MGET and
   DEL that travel with a call (staged payloads, fetched payloads) name aqueue keys of
   that one tag, so their slot is the first key's (``known_slot``): redis-py would
   hash every key of them (32 per batch), about a tenth of a queue's client CPU.
2. A slot-map refresh that leaves calls in flight alone (async): redis-py closes
   every connection of its client to force one (after CLUSTERDOWN, which every node
   answers while a replica is elected), failing other tasks' calls on healthy nodes.
3. A connection its server closed while it sat idle (a killed node) is reconnected
   by the task that takes it (async), which is then refused and knows its request did
   not run, instead of losing it with its outcome unknown.

Invariants:
- an FCALL's slot is that of its keys, all of which must share one slot (the
  server would refuse the call with CROSSSLOT; here it fails before anything is
  sent); an FCALL without keys goes to a random primary, as in redis-py; an
  MSET/MGET/DEL whose first key is aqueue's (``aq:{``) goes to that key's slot, and
  the server refuses it with CROSSSLOT if another key is elsewhere;
- the clients never retry a command that may have reached the server: redis-py's
  cluster retry count is 0 (``cluster_options``), because a function call is not
  idempotent; ``_faults`` retries what provably did not run;
- ``close_all`` closes every connection of the async client, whatever its state.

The overridden methods are private to redis-py (checked with 8.1.0): the tests count
the servers' ``COMMAND GETKEYS`` calls, keep a call in flight through a refresh, and
count the connections left after closing, so a redis-py that changes them fails them.
"""

from __future__ import annotations

import random
from typing import Any

import redis.asyncio.cluster
import redis.asyncio.connection
import redis.cluster
from redis.backoff import NoBackoff
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import RedisClusterException

__all__ = [
    "AsyncClusterClient",
    "SyncClusterClient",
    "SyncClusterPipeline",
    "cluster_options",
    "fcall_slot",
    "known_slot",
    "slot_of",
]

_FCALLS = frozenset({"FCALL", "FCALL_RO"})
_KEYED = frozenset({"MSET", "MGET", "DEL"})  # their first argument is a key


def slot_of(key: str | bytes) -> int:
    """The cluster slot of ``key`` (its ``{tag}``'s when it has one)."""
    return key_slot(key.encode() if isinstance(key, str) else key)


def fcall_slot(args: tuple[Any, ...]) -> int | None:
    """The slot of a command ``args`` (name first) if it is an FCALL or FCALL_RO,
    else None (redis-py decides).

    Raises:
        RedisClusterException: the call's keys are in more than one slot.
    """
    if len(args) < 3:
        return None
    name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
    if name.upper() not in _FCALLS:
        return None
    keys = args[3 : 3 + int(args[2])]
    if not keys:
        return random.randrange(REDIS_CLUSTER_HASH_SLOTS)
    slots = {slot_of(k) for k in keys}
    if len(slots) != 1:
        raise RedisClusterException(
            f"{args[0]} {args[1]!r}: all keys must be in one slot (hash tag), got {keys!r}"
        )
    return slots.pop()


def known_slot(args: tuple[Any, ...]) -> int | None:
    """The slot of a command ``args`` (name first) that aqueue knows without redis-py:
    an FCALL's (``fcall_slot``), or an MSET/MGET/DEL's whose first key is aqueue's
    (``aq:{tag}:...``, the tag that all of the command's keys share); else None.

    Raises:
        RedisClusterException: an FCALL's keys are in more than one slot.
    """
    if len(args) >= 2:
        name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
        if name.upper() in _KEYED:
            key = args[1]
            if isinstance(key, str):
                key = key.encode()
            return key_slot(key) if isinstance(key, bytes) and key.startswith(b"aq:{") else None
    return fcall_slot(args)


class _FreshConnection:
    """A mixin for redis-py's asyncio connections: one whose server closed it while
    it sat idle (its node was killed) is to be reconnected, so the task that takes it
    reconnects first, is refused, and knows its request did not run, instead of
    sending into the closed socket and losing the request with its outcome unknown.
    (redis-py checks ``should_reconnect`` on every connection a cluster node hands
    out.)"""

    _reader: Any

    def should_reconnect(self) -> bool:
        reader = self._reader
        closed = reader is not None and reader.at_eof()
        base: Any = super()
        return bool(base.should_reconnect() or closed)


class _Connection(_FreshConnection, redis.asyncio.connection.Connection):
    pass


class _TlsConnection(_FreshConnection, redis.asyncio.connection.SSLConnection):
    pass


class AsyncClusterClient(redis.asyncio.cluster.RedisCluster):
    """``redis.asyncio.RedisCluster`` that computes an FCALL's slot itself (its
    pipelines ask the client, so they do too), refreshes its slot map without
    breaking other tasks' calls, and reconnects a connection its server closed before
    using it: close it with ``close_all``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tls = self.connection_kwargs["connection_class"] is redis.asyncio.SSLConnection
        fresh = _TlsConnection if tls else _Connection
        # The nodes redis-py discovers are made from these arguments (the same dict);
        # the start nodes were made already.
        self.connection_kwargs["connection_class"] = fresh
        for node in self.startup_nodes:
            node.connection_class = fresh

    async def _determine_slot(self, command: str, *args: Any) -> int:
        slot = known_slot((command, *args))
        if slot is not None:
            return slot
        return await super()._determine_slot(command, *args)

    async def aclose(self) -> None:
        """What redis-py calls to refresh the slot map (after CLUSTERDOWN, which every
        node answers while a failed primary's replica is elected, or after repeated
        MOVED): ``refresh``. redis-py would close *every* connection, the ones other
        tasks' calls are in flight on included, and those calls, on healthy nodes too,
        would fail with their outcome unknown (measured: benchmarks/bench_cluster.py
        failover)."""
        self.refresh()

    def refresh(self) -> None:
        """Read the slot map again before the next command, and have every connection
        reconnect before its next command, in the task that takes it (one in use: once
        its command is done). The transports call it after a lost connection: a
        pipeline does not make redis-py read the map again (a single command does),
        so pipelines alone would keep going to a dead primary after its replica took
        over. Not redis-py's ``disconnect_free_connections``: a task that takes an
        idle connection while it is being closed finds its socket gone under it
        (AttributeError from deep in redis-py, measured in the failover benchmark)."""
        self._initialize = True
        for node in self.get_nodes():
            connection: Any
            for connection in node._connections:  # (redis-py marks only those in use)
                connection.mark_for_reconnect()

    async def close_all(self) -> None:
        """Close every connection (the client's end). Not ``super().aclose()``: it
        closes nothing once a refresh is pending (``_initialize``, which redis-py also
        sets after any lost connection), and the connections would leak."""
        self._initialize = True
        await self.nodes_manager.aclose()
        await self.nodes_manager.aclose("startup_nodes")


class SyncClusterClient(redis.cluster.RedisCluster):
    """``redis.cluster.RedisCluster`` that computes an FCALL's slot itself, and whose
    pipelines do. A sync pipeline looks a command up twice: its slot
    (``determine_slot``) and, first, whether it has keys at all
    (``_get_command_keys``)."""

    def determine_slot(self, *args: Any) -> int | None:
        slot = known_slot(args)
        if slot is not None:
            return slot
        found: int | None = super().determine_slot(*args)
        return found

    def _get_command_keys(self, *args: Any) -> Any:
        if fcall_slot(args) is not None:
            return args[3 : 3 + int(args[2])]
        base: Any = super()  # (redis-py's sync cluster client is not typed)
        return base._get_command_keys(*args)

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        base: Any = super()
        pipe = base.pipeline(transaction, shard_hint)
        # The sync pipeline is a class of its own that redis-py builds with a long,
        # version-dependent argument list; SyncClusterPipeline adds no state, only
        # this class's two lookups, so the built object takes it on.
        pipe.__class__ = SyncClusterPipeline
        return pipe


class SyncClusterPipeline(redis.cluster.ClusterPipeline, SyncClusterClient):
    """redis-py's sync cluster pipeline with SyncClusterClient's FCALL lookups."""


def cluster_options(socket_timeout: float, max_connections: int | None) -> dict[str, Any]:
    """redis-py options for both cluster clients: timeouts as on one server, no
    retries (see the module docstring), and ``max_connections`` per node."""
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.retry import Retry

    return {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": min(socket_timeout, 5.0),
        "max_connections": max_connections or 2**31,
        "_retry": (Retry(NoBackoff(), 0), AsyncRetry(NoBackoff(), 0)),
    }
