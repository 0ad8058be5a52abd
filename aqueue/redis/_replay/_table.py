"""RedisReplayTable: a replay table stored in Redis, shared by every process that opens
its name (``server.replay_table(...)``).

The operations are the in-process ``aqueue.ReplayTable``'s, with its checks, messages
and records (``aqueue._replay``'s ``TableArgs``, ``ReplaySample``,
``ReplayStatistics``): each checks its arguments (a refused call sends nothing),
checkpoints once, then runs its op (``_ops``, or the core's shared ones) with the
async driver. What needs
the server is awaited: ``await table.size()``, ``await table.statistics()``, ``await
table.is_closed()``. The thread view (``_blocking``) runs the same ops with the
sync driver.

Invariants (besides those of ``_ops`` and ``_functions.lua``):
- an insert or a sample changes the table in exactly one server call, or not at all:
  a cancelled or timed-out one inserted, evicted and sampled nothing, and moved no
  counter (it may have been registered as a waiter; leaving deregisters it);
- the object holds no state between calls but its handle's hint and random generator:
  tasks and threads may share it.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import anyio.lowlevel
import numpy as np
import numpy.typing as npt

import aqueue
from aqueue._replay._limiter import RateLimiter
from aqueue._replay._results import ReplaySample, ReplayStatistics
from aqueue._replay._selectors import Selector
from aqueue._replay._views import SampleIterator

from .._core import _shared
from .._core._shared import Producers
from .._core._transport import AsyncTransport, SyncTransport, run, run_blocking
from . import _ops as ops
from ._blocking import BlockingRedisReplayTable
from ._sharded import TableOps

__all__ = ["RedisReplayTable"]

T = TypeVar("T")
Keys = npt.NDArray[np.int64]
Found = npt.NDArray[np.bool_]


class RedisReplayTable(Generic[T]):
    """A replay table stored in Redis (``server.replay_table``); see ``aqueue.redis``
    and ``aqueue.ReplayTable`` for the semantics."""

    def __init__(
        self,
        table_ops: TableOps,
        transport: AsyncTransport,
        sync: SyncTransport,
        producers: Producers,
    ) -> None:
        self._ops = table_ops
        self._h = table_ops.h
        self._t = transport
        self._sync = sync
        self._producers = producers

    # -- properties ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The table's name: every process opening this name shares the table."""
        return self._h.name

    @property
    def max_size(self) -> int:
        """The most items the table holds."""
        return self._h.settings.max_size

    @property
    def dtypes(self) -> tuple[np.dtype[Any], ...]:
        """One numpy dtype per component."""
        return self._h.spec.dtypes

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        """One shape per component."""
        return self._h.settings.shapes

    @property
    def names(self) -> tuple[str, ...] | None:
        """Component names, or None."""
        return self._h.spec.names

    @property
    def sampler(self) -> Selector:
        """The selector samples draw with."""
        return self._h.settings.sampler

    @property
    def remover(self) -> Selector:
        """The selector that picks the item evicted at ``max_size``."""
        return self._h.settings.remover

    @property
    def max_times_sampled(self) -> int:
        """Draws after which an item leaves (0: never)."""
        return self._h.settings.max_times_sampled

    @property
    def rate_limiter(self) -> RateLimiter:
        """The rate limiter pacing inserts and samples (of every process)."""
        return self._h.settings.rate_limiter

    @property
    def shards(self) -> int:
        """How many shards hold the table, each a whole table under a hash tag
        of its own, so that on a Redis Cluster a table spreads over the primaries.
        None: as stored when the table exists; for a new one the number of primaries
        on a cluster (1 on one server, and 1 where the settings need one shard, below).
        Any ``1 <= shards <= max_size`` works on both; the count is stored, and an
        explicit other count on reopen is refused. With ``shards > 1``:

        - Uniform and Prioritized sampling stay exact over the whole table: each draw's
          shard is chosen in proportion to the shards' sizes (priority totals) read in
          the same round, then the draw is made within it; the probabilities and
          ``weights()`` are the whole table's. A sample waits while any shard it draws
          from is held back by its limiter (it never draws elsewhere instead);
        - keys name their shard (``key % shards``), and ``update_priorities``/``delete``
          route each key there; keys still increase per shard, not across the table;
        - an insert goes whole to one shard whose limiter admits it, rotating among
          them; it waits only while none admits it;
        - ``max_size`` is split evenly among the shards, and the remover evicts within
          the shard that is full;
        - the rate limiter acts per shard (Reverb's rule per server):
          ``samples_per_insert`` as given, ``min_size_to_sample``,
          ``min_diff`` and ``max_diff`` divided among the shards (their sum is the
          table's numbers). With balanced inserts the table behaves as one; with
          uneven ones the global samples/inserts ratio can drift by up to the sum of
          the shards' buffers, and a sample that draws from a shard holding fewer
          items than its part of ``min_size_to_sample`` waits for it to fill;
        - Fifo, Lifo, MinHeap and MaxHeap samplers and ``max_times_sampled`` need one
          shard (a global order or extreme, or an item retired between two draws of a
          sample) and are refused.
        """
        return self._ops.k

    @property
    def seed(self) -> int | None:
        """The seed of this client's random numbers (the draws it asks for), or None."""
        return self._h.settings.seed

    def __repr__(self) -> str:
        s = self._h.settings
        return (
            f"<RedisReplayTable '{self._h.name}' max_size={s.max_size} sampler={s.sampler!r} "
            f"remover={s.remover!r}{f' shards={self._ops.k}' if self._ops.k > 1 else ''} (Redis)>"
        )

    # -- operations ---------------------------------------------------------------------

    async def insert(self, element: Any, priority: float | None = None) -> int:
        """Insert one item: its key (see ``aqueue.ReplayTable.insert``). Waits while the
        rate limiter, counting every process's inserts and samples, holds inserts back.

        Raises:
            ElementSpecError: A bad element or priority (nothing is sent).
            QueueClosedError: The table is closed (or was closed while this waited), or
                is gone from the server.

        If cancelled, nothing was inserted, evicted or counted (see the module docstring).
        """
        comps, prio = self._h.args.element(element, priority)
        op = self._ops.insert(comps, 1, prio)
        await anyio.lowlevel.checkpoint()
        keys = await run(op, self._t)
        return int(keys[0])

    async def insert_many(self, batch: Any, priorities: Any = None) -> Keys:
        """Insert a batch of items, all or nothing: their keys (see
        ``aqueue.ReplayTable.insert_many``). The batch goes in one server call."""
        comps, k, prios = self._h.args.batch(batch, priorities)
        self._ops.batch_count(k)
        await anyio.lowlevel.checkpoint()
        if k == 0:
            return np.empty(0, dtype=np.int64)
        return await run(self._ops.insert(comps, k, prios), self._t)

    async def sample(self, n: int) -> ReplaySample[T]:
        """Draw ``n`` items (see ``aqueue.ReplayTable.sample``): waits until the limiter
        allows all n at once and the table can supply them; never fewer.

        Raises:
            ElementSpecError: ``n`` could never be served at once (nothing is sent).
            OutOfRangeError: The table is closed and cannot serve it now, or is gone.
            PayloadError: A drawn item's payload is not valid AQ1 (written around
                aqueue); the sample has happened.

        If cancelled, nothing was sampled: no counter, no ``times_sampled`` changed.
        """
        n = self._ops.sample_count(n)
        await anyio.lowlevel.checkpoint()
        sample: ReplaySample[T] = await run(self._ops.sample(n), self._t)
        return sample

    async def update_priorities(self, keys: Any, priorities: Any) -> Found:
        """Set the priorities of the items of ``keys``: for each key, whether the table
        held it (False for keys no longer held: never silently ignored)."""
        k, p = self._h.args.keys_and_priorities(keys, priorities)
        await anyio.lowlevel.checkpoint()
        return await run(self._ops.update(k, p), self._t)

    async def delete(self, keys: Any) -> Found:
        """Remove the items of ``keys``: for each key, whether the table held it. Each
        removal counts as a delete for the rate limiter."""
        k = self._h.args.keys(keys)
        await anyio.lowlevel.checkpoint()
        return await run(self._ops.delete(k), self._t)

    def samples(self, n: int) -> SampleIterator[T]:
        """An async iterator of ``sample(n)`` results; it ends when the table is closed
        and cannot serve another."""
        return SampleIterator(self, self._ops.sample_count(n))

    # -- state --------------------------------------------------------------------------

    async def size(self) -> int:
        """Items held now."""
        return (await self.statistics()).size

    async def is_closed(self) -> bool:
        """Whether the table has been closed (by any process)."""
        return (await self.statistics()).closed

    async def statistics(self) -> ReplayStatistics:
        """The table's counters now, read in one server call: counts of every process
        since the table was created; the wait times are the seconds during which at
        least one insert (sample) of any process was registered as waiting."""
        return ops.statistics(self._h, await run(self._ops.stats(), self._t))

    # -- as a sink: what runners and pipelines fill --------------------------------------

    async def enqueue(self, element: Any) -> None:
        """``insert(element)`` with the default priority, its key dropped: what a
        ``QueueRunner``'s producers and ``Pipeline.to_queue`` call.

        Raises:
            ElementSpecError: A bad element (nothing is sent).
            QueueClosedError: The table is closed (or was closed while this waited), or
                this object's producers were released (``release_producers``).
        """
        comps, prio = self._h.args.element(element, None)
        op = self._ops.insert(comps, 1, prio, sink=True)
        await anyio.lowlevel.checkpoint()
        await run(op, self._t)

    async def enqueue_many(self, batch: Any) -> None:
        """Insert the items of ``batch`` in order with the default priority,
        progressively: each server call inserts as many as the rate limiter (of every
        process) admits then, and the call waits only while it admits none, so a batch
        of any size is accepted. If cancelled (or the table is closed) meanwhile,
        exactly a prefix of the batch is in. Use ``insert_many`` for all or nothing.

        Raises:
            ElementSpecError: A bad batch (nothing is sent).
            QueueClosedError: As ``enqueue``.
        """
        comps, k = self._h.spec.batch(batch)
        await anyio.lowlevel.checkpoint()
        if k:
            await run(self._ops.insert(comps, k, None, progressive=True, sink=True), self._t)

    async def register_producer(self) -> str:
        """Register one producer of this table (counted on the server, with every
        process's) and return its id for ``producer_done``. The registration lives with
        an expiry of ``lease_time``, which the ``connect()`` context refreshes while it is
        open: a producer whose process died stops counting when its registration
        expires (if it was the last one, the table closes).

        Raises:
            QueueClosedError: The table is closed.
        """
        pid = await run(_shared.register_producer(self._h), self._t)
        self._h.producers.add(pid)
        self._producers.add_producer(self._h, pid)
        return pid

    async def producer_done(self, producer_id: str, *, clean: bool = True) -> None:
        """Producer ``producer_id`` has ended. The clean end of the last registered
        producer of every process closes the table; an unclean end (``clean=False``)
        closes it at once. Closing fails the inserts waiting then, in every process.

        Raises:
            ElementSpecError: ``producer_id`` was not registered through this object (or
                is already done); nothing is sent.
        """
        h = self._h
        if producer_id not in h.producers:
            raise aqueue.ElementSpecError(
                f"replay table '{h.name}'.producer_done: producer {producer_id!r} is not "
                f"registered through this table object (registered: {sorted(h.producers)})"
            )
        h.producers.discard(producer_id)
        self._producers.remove_producer(h, producer_id)
        await run(self._ops.producer_done(producer_id, clean), self._t)

    def release_producers(self) -> None:
        """A coordinator's stop: this object's sink inserts (``enqueue``,
        ``enqueue_many``, and the thread view's) fail with QueueClosedError from their
        next step on (a waiting one within ``wait_timeout``), so its producers end
        cleanly. The shared table is not closed (other processes may still fill it): it
        closes when the last registered producer of all processes has ended."""
        self._h.released = True

    # -- closing and the thread view ------------------------------------------------------

    def close(self) -> None:
        """Close the table for every process (one blocking server call; in async code
        prefer ``await table.aclose()``). Later and waiting inserts raise
        QueueClosedError; a sample that can be served still is, one that would wait
        raises OutOfRangeError. ``update_priorities`` and ``delete`` still work."""
        run_blocking(self._ops.close(), self._sync)

    async def aclose(self) -> None:
        """Close the table for every process (as ``close()``), awaited."""
        await run(self._ops.close(), self._t)

    def blocking(self) -> BlockingRedisReplayTable[T]:
        """A view whose blocking methods threads may call (they use the synchronous
        client), each with ``timeout=``."""
        return BlockingRedisReplayTable(self._ops, self._sync, self)
