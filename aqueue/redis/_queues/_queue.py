"""RedisQueue: the awaitable operations of a queue stored in Redis.

Every operation checks its arguments, checkpoints once, then runs its op (``_ops``,
or the core's shared ones) with the async driver (``_core/_transport.run``) over the
server's transport: a function
call, and while it must wait, a ``BLPOP`` on its own wake-up key with a bounded
timeout, then the call again. Elements change hands only inside the server
functions; the client never awaits between receiving elements and returning them
except for the ack, which the lease protects. The thread view (``_blocking``) runs
the same ops with the sync driver.

Invariants (besides those of ``_ops``):
- an op that leaves early for any reason (cancellation of either kind, error) runs
  ``aq_leave`` shielded before re-raising, so its registration, claims and received
  elements go back; nothing is lost or duplicated (an unreachable server is the one
  exception: then the lease expires on the server, and the elements come back then);
- no operation holds state between calls: the queue object may be used by many tasks
  and by the thread view at once.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any, Generic

import anyio.lowlevel
import numpy as np

import aqueue
from aqueue._queues._declare import T

from .._core import _shared
from .._core._shared import Producers
from .._core._transport import AsyncTransport, Op, SyncTransport, WaitClock, run, run_blocking
from ._blocking import BlockingRedisQueue
from ._handle import QueueHandle
from ._ops import PutOp, TakeOp
from ._sharded_ops import ShardedTakeOp
from ._sharded_put import ShardedPutOp
from ._shards import close_all, total_stats

__all__ = ["RedisFIFOQueue", "RedisQueue", "RedisRandomShuffleQueue"]


class RedisQueue(Generic[T]):
    """A queue stored in Redis; see ``aqueue.redis`` for the semantics. Its element
    type ``T`` is inferred by ``server.fifo_queue``/``random_shuffle_queue`` as for the
    in-process queues."""

    def __init__(
        self,
        handle: QueueHandle,
        transport: AsyncTransport,
        sync: SyncTransport,
        producers: Producers,
        shards: Sequence[QueueHandle] = (),
    ) -> None:
        self._h = handle
        # Over several shards (``_shards``): every shard's handle, shard 0 (``handle``)
        # first, and where this object's next call starts (its home shard rotates).
        self._hs = list(shards) if len(shards) > 1 else []
        self._all = self._hs or [handle]  # every shard's handle (one: the queue's)
        self._turn = itertools.count(random.randrange(max(1, len(self._hs))))
        self._capacity = sum(h.capacity for h in self._all)
        self._t = transport
        self._sync = sync
        self._producers = producers
        self.full_clock = WaitClock()
        self.empty_clock = WaitClock()

    # -- properties ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The queue's name: every process opening this name shares the queue."""
        return self._h.name

    @property
    def capacity(self) -> int:
        """Maximum number of elements the queue holds (enqueuers wait beyond it); over
        several shards, the total."""
        return self._capacity

    @property
    def shards(self) -> int:
        """How many shards the queue spreads over (1: a queue without shards)."""
        return len(self._hs) or 1

    @property
    def dtypes(self) -> tuple[np.dtype[Any], ...]:
        """One numpy dtype per component."""
        return self._h.spec.dtypes

    @property
    def shapes(self) -> tuple[tuple[int | None, ...], ...] | None:
        """One shape per component, or None when shapes were not declared."""
        return self._h.spec.shapes

    @property
    def min_after_dequeue(self) -> int:
        """Elements a dequeue leaves behind while the queue is open (0 but for a
        shuffling queue)."""
        return sum(h.min_after_dequeue for h in self._all)  # (split among the shards)

    @property
    def names(self) -> tuple[str, ...] | None:
        """Component names, or None for unnamed components."""
        return self._h.spec.names

    def __repr__(self) -> str:
        shards = f" shards={len(self._hs)}" if self._hs else ""
        return f"<{type(self).__name__} '{self._h.name}' capacity={self._capacity}{shards} (Redis)>"

    # -- enqueue -------------------------------------------------------------------------

    async def enqueue(self, element: Any) -> None:
        """Add one element, waiting while the queue is full.

        Raises:
            ElementSpecError: the element does not fit the spec (nothing is sent).
            QueueClosedError: the queue is closed (or was closed with
                ``cancel_pending_enqueues=True`` while this call waited).
            ServerError, ServerConnectionError: the server refused or is unreachable.
        """
        payload = self._h.codec.encode_one(self._h.spec.element(element))
        await anyio.lowlevel.checkpoint()
        await run(self._put([payload]), self._t, self.full_clock)

    async def enqueue_many(self, batch: Any) -> None:
        """Add the elements of ``batch`` (sliced along axis 0), in order.

        A batch larger than the free room is admitted progressively. If the call is
        cancelled meanwhile, exactly a prefix of the batch has been admitted and stays
        queued. An empty batch is a no-op.
        """
        comps, count = self._h.spec.batch(batch)
        payloads = self._h.codec.encode_batch(comps, count)
        await anyio.lowlevel.checkpoint()
        if count:
            await run(self._put(payloads), self._t, self.full_clock)

    def _put(self, payloads: list[bytes]) -> Op[None]:
        if self._hs:
            return ShardedPutOp(self._hs, payloads, next(self._turn)).run()
        return PutOp(self._h, payloads, atomic=False).run()

    # -- dequeue -------------------------------------------------------------------------

    async def dequeue(self) -> T:
        """Remove and return one element, waiting while none can be taken.

        Raises:
            OutOfRangeError: the queue is closed and empty (nothing is consumed).
            PayloadError: the element is not valid AQ1 for this queue (it is put back).
        """
        await anyio.lowlevel.checkpoint()
        element: T = await run(self._take("one", 1), self._t, self.empty_clock)
        return element

    async def dequeue_many(self, n: int) -> T:
        """Remove and return exactly ``n`` elements as a batch, waiting for them.

        Raises:
            OutOfRangeError: the queue is closed and holds fewer than ``n``; nothing is
                consumed.
            ElementSpecError: ``n < 0`` or the queue has no declared shapes.
        """
        return await self._take_batch("many", n, "dequeue_many")

    async def dequeue_up_to(self, n: int) -> T:
        """Like dequeue_many, but once the queue is closed return the 1..n that remain.

        As in TensorFlow, on an *open* queue this waits for all ``n`` elements; use
        ``dequeue_burst`` to take whatever is there now.
        """
        return await self._take_batch("upto", n, "dequeue_up_to")

    async def dequeue_burst(self, n: int) -> T:
        """Wait until at least one element can be taken, then take 1..n at once, as a
        batch, in one server call (see ``aqueue.FIFOQueue.dequeue_burst``). On a shuffle
        queue, an open queue keeps ``min_after_dequeue`` elements.

        Raises:
            OutOfRangeError: the queue is closed and empty (nothing is consumed).
            ElementSpecError: ``n < 0`` or the queue has no declared shapes.
        """
        return await self._take_batch("some", n, "dequeue_burst")

    async def _take_batch(self, mode: str, n: Any, what: str) -> T:
        n = self._h.spec.batch_count(n, what)
        await anyio.lowlevel.checkpoint()
        if n == 0:
            empty: T = self._h.spec.empty_batch()
            return empty
        batch: T = await run(self._take(mode, n), self._t, self.empty_clock)
        return batch

    def _take(self, mode: str, n: int) -> Op[Any]:
        if self._hs:
            return ShardedTakeOp(self._hs, mode, n, next(self._turn)).run()
        return TakeOp(self._h, mode, n).run()

    # -- state ---------------------------------------------------------------------------

    async def size(self) -> int:
        """Number of elements stored now (leased elements are not counted)."""
        return (await self.statistics()).size

    async def is_closed(self) -> bool:
        """Whether the queue has been closed (by any process)."""
        return (await self.statistics()).closed

    async def statistics(self) -> aqueue.QueueStatistics:
        """A snapshot of the queue's counters, read in one server call per shard.

        ``size``, ``capacity``, ``closed``, ``enqueued_total``, ``dequeued_total`` and
        ``peak_size`` are the server's exact figures for all processes.
        ``tasks_waiting_enqueue``/``tasks_waiting_dequeue`` count registered waiters of
        all processes (approximate: a waiter between two retries is not counted, a
        crashed one is until its registration expires). ``time_full_s`` and
        ``time_empty_s`` are measured by this process only, for its own waiters.
        """
        v = await run(total_stats(self._all), self._t)
        return aqueue.QueueStatistics(
            size=v[0],
            capacity=self._capacity,
            closed=bool(v[1]),
            enqueued_total=v[3],
            dequeued_total=v[4],
            peak_size=v[5],
            tasks_waiting_enqueue=v[6],
            tasks_waiting_dequeue=v[7],
            time_full_s=self.full_clock.seconds(),
            time_empty_s=self.empty_clock.seconds(),
        )

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue for every process; idempotent (one blocking server call; in
        async code prefer ``await q.aclose()``).

        Pending enqueues still complete as room frees, unless
        ``cancel_pending_enqueues``: then each fails with QueueClosedError (elements it
        had admitted stay). Every waiting dequeue, in every process, is woken and gets
        data or OutOfRangeError.
        """
        run_blocking(close_all(self._all, "1" if cancel_pending_enqueues else "0"), self._sync)

    async def aclose(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue for every process (as ``close()``), awaited."""
        await run(close_all(self._all, "1" if cancel_pending_enqueues else "0"), self._t)

    # -- producers (for the QueueRunner) -------------------------------------------------

    async def register_producer(self) -> str:
        """Register one producer of this queue and return its id.

        The registration lives on the server with an expiry of ``lease_time``, which
        the ``connect()`` context refreshes while it is open. Pair every call with
        ``producer_done``. Raises QueueClosedError if the queue is closed.
        """
        pid = await run(_shared.register_producer(self._h), self._t)
        self._producers.add_producer(self._h, pid)
        return pid

    async def producer_done(self, producer_id: str, *, clean: bool = True) -> None:
        """Remove producer ``producer_id``. A clean end of the last registered producer
        closes the queue (consumers drain it, then OutOfRangeError); ``clean=False``
        closes it at once with ``cancel_pending_enqueues=True``."""
        self._producers.remove_producer(self._h, producer_id)
        await run(_shared.producer_done(self._h, producer_id, clean), self._t)
        if self._hs:  # shard 0 holds the producers: if that closed it, close the rest
            await run(total_stats(self._hs, end=True), self._t)

    def release_producers(self) -> None:
        """A coordinator's stop: this process's enqueues on this queue object fail with
        QueueClosedError from their next step on (a waiting one within ``wait_timeout``),
        so its producers end cleanly. The shared queue is not closed: it closes when the
        last registered producer of all processes has ended."""
        self._h.released = True

    # -- iteration and the thread view ---------------------------------------------------

    def __aiter__(self) -> aqueue.ElementIterator[T]:
        return aqueue.ElementIterator(self)

    def batches(
        self, n: int, *, allow_smaller_final_batch: bool = False
    ) -> aqueue.BatchIterator[T]:
        """An async iterator of batches of ``n``; ends cleanly when the queue is final.

        Leftovers smaller than ``n`` stay in the queue, unless
        ``allow_smaller_final_batch`` (then they come as one short final batch).
        """
        n = self._h.spec.batch_count(n, "batches")
        if n == 0:
            raise aqueue.ElementSpecError(f"queue '{self._h.name}'.batches: n must be >= 1, got 0")
        return aqueue.BatchIterator(self, n, allow_smaller_final_batch)

    def blocking(self) -> BlockingRedisQueue[T]:
        """A view whose blocking methods threads may call; it uses the synchronous
        client, so threads never need the event loop.

        Raises:
            RuntimeError: the queue has several shards (its thread view is not
                available yet: use the async methods).
        """
        if self._hs:
            raise RuntimeError(
                f"queue '{self._h.name}' has {len(self._hs)} shards: its thread view "
                "(blocking()) needs a queue of one shard; use the async methods"
            )
        return BlockingRedisQueue(self._h, self._sync, self)


class RedisFIFOQueue(RedisQueue[T]):
    """A first-in first-out queue stored in Redis (``server.fifo_queue``)."""


class RedisRandomShuffleQueue(RedisQueue[T]):
    """A queue stored in Redis that dequeues in uniformly random order
    (``server.random_shuffle_queue``)."""

    @property
    def seed(self) -> int | None:
        """The seed of this client's random numbers, or None."""
        return self._h.seed
