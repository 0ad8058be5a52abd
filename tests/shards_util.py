"""Helpers for the tests of sharded queues: a RedisServer whose queues open with a given
shard count, so today's queue-contract bodies run over shards (or, on a cluster, pinned
to one shard), and the payload keys of every shard of a queue."""

from __future__ import annotations

from typing import Any

__all__ = ["ShardedServer", "shard_payload_keys"]


class ShardedServer:
    """Stands for a RedisServer: ``fifo_queue`` and ``random_shuffle_queue`` open with
    ``shards`` (at most what the capacity allows), so the contract bodies run over
    shards; the bodies' "shuffle" kind checks elements as a multiset: the guarantee of
    a sharded queue, which keeps no order across calls."""

    def __init__(self, server: Any, shards: int, unordered: bool = False) -> None:
        self._server = server
        self._shards = shards
        self._unordered = unordered

    async def fifo_queue(self, name: str, capacity: int, *args: Any, **kw: Any) -> Any:
        kw.setdefault("shards", min(self._shards, capacity))
        return await self._server.fifo_queue(name, capacity, *args, **kw)

    async def random_shuffle_queue(
        self, name: str, capacity: int, min_after: int, *args: Any, **kw: Any
    ) -> Any:
        kw.setdefault("shards", min(self._shards, capacity - min_after))
        return await self._server.random_shuffle_queue(name, capacity, min_after, *args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


def shard_payload_keys(server: Any, name: str) -> list[bytes]:
    """The payload keys of queue ``name`` and of its shards (``aq:{name#..}:e:*``) on
    ``server`` (a ``RedisProc``, or the cluster's ``AllNodes``)."""
    with server.client() as c:
        keys = list(c.scan_iter(match=f"aq:{{{name}}}:e:*", count=1000))
        keys += c.scan_iter(match=f"aq:{{{name}#*}}:e:*", count=1000)
        return sorted(keys)
