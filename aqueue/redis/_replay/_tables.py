"""ReplayTables: ``RedisServer.replay_table`` and ``delete_table`` (a base of
RedisServer, over its connection): the opener checks, stores or compares a table's
settings and shard count (``_open``) and returns the table object over its shards'
handles (``_sharded.TableOps``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from aqueue._queues._declare import Array, NumericDType
from aqueue._replay._limiter import MinSize, RateLimiter
from aqueue._replay._selectors import Fifo, Selector, Uniform

from .._core._connection import Connection
from .._core._transport import run
from ._open import delete_table, open_table
from ._sharded import TableOps
from ._table import RedisReplayTable

__all__ = ["ReplayTables"]


class ReplayTables:
    """``RedisServer.replay_table`` and ``delete_table`` (see the module docstring)."""

    _conn: Connection

    # -- replay tables -------------------------------------------------------------------

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
        shards: int | None = ...,
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
        shards: int | None = ...,
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
        shards: int | None = ...,
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
        shards: int | None = ...,
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
        shards: int | None = ...,
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
        shards: int | None = ...,
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
        shards: int | None = None,
    ) -> RedisReplayTable[Any]:
        """Open (creating if needed) the replay table ``name``, shared by every process
        that opens it; arguments as ``aqueue.ReplayTable`` (``seed`` seeds this client's
        random numbers only: the draws of its samples and random evictions).

        ``shards``: how many shards hold the table (None: as stored, else the number
        of primaries on a cluster, 1 on one server; ``1 <= shards <= max_size`` on
        both); what sharding keeps and changes: ``RedisReplayTable.shards``.

        Raises:
            ElementSpecError: A bad argument (as in process), a dtype AQ1 cannot carry,
                a ``shards`` that is not None or an int in ``1..max_size``, settings that
                need one shard with ``shards > 1``, or a table (or queue) of that name
                exists with other settings or another shard count (the message names
                the field, the stored and the given value).
        """
        c = self._conn
        default, owner_of = c.shard_layout()
        op = open_table(
            name,
            max_size,
            dtypes,
            shapes,
            names,
            sampler=sampler,
            remover=remover,
            max_times_sampled=max_times_sampled,
            rate_limiter=rate_limiter,
            seed=seed,
            wait_timeout=c.wait_timeout,
            lease_time=c.lease_time,
            shards=shards,
            default_shards=default,
            owner_of=owner_of,
        )
        handles = await run(op, c.live())
        return RedisReplayTable(TableOps(handles), c.live(), c.sync, c)

    async def delete_table(self, name: str) -> bool:
        """Delete replay table ``name`` with all its keys and items; True if it existed.
        Its waiters wake and fail (QueueClosedError, OutOfRangeError).

        Raises:
            ElementSpecError: ``name`` holds a queue (use ``delete_queue``).
        """
        return await run(delete_table(name), self._conn.live())
