"""RedisQueue: the awaitable operations of a queue stored in Redis.

Every operation checkpoints once, then runs its op (``_protocol``) against the
server: a function call, and while it must wait, a ``BLPOP`` on its own wake-up key
with a bounded timeout, then the call again. Elements change hands only inside the
server functions; the client never awaits between receiving elements and returning
them except for the ack, which the lease protects.

Invariants (besides those of ``_protocol``):
- an op that leaves early for any reason (cancellation of either kind, error) runs
  ``aq_leave`` shielded before re-raising, so its registration, claims and received
  elements go back; nothing is lost or duplicated (an unreachable server is the one
  exception: then the lease expires on the server, and the elements come back then);
- no operation holds state between calls: the queue object may be used by many tasks
  and by the thread view at once.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import numpy as np

import aqueue

from ._blocking import BlockingRedisQueue
from ._protocol import DONE, WAIT, Handle, Producers, PutOp, TakeOp

if TYPE_CHECKING:
    from ._transport import AsyncioTransport, SyncCalls, ThreadTransport

__all__ = ["RedisFIFOQueue", "RedisQueue", "RedisRandomShuffleQueue"]


class WaitClock:
    """Seconds during which at least one of this process's ops of one kind waited."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._since = 0.0
        self._total = 0.0

    def enter(self) -> None:
        with self._lock:
            if self._count == 0:
                self._since = time.monotonic()
            self._count += 1

    def leave(self) -> None:
        with self._lock:
            self._count -= 1
            if self._count == 0:
                self._total += time.monotonic() - self._since

    def seconds(self) -> float:
        with self._lock:
            return self._total + (time.monotonic() - self._since if self._count else 0.0)


class RedisQueue:
    """A queue stored in Redis; see ``aqueue.redis`` for the semantics."""

    def __init__(
        self,
        handle: Handle,
        transport: AsyncioTransport | ThreadTransport,
        sync_calls: SyncCalls,
        producers: Producers,
    ) -> None:
        self._h = handle
        self._t = transport
        self._sync = sync_calls
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
        """Maximum number of elements the queue holds (enqueuers wait beyond it)."""
        return self._h.capacity

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
        return self._h.mad

    @property
    def names(self) -> tuple[str, ...] | None:
        """Component names, or None for unnamed components."""
        return self._h.spec.names

    def __repr__(self) -> str:
        return f"<{type(self).__name__} '{self._h.name}' capacity={self._h.capacity} (Redis)>"

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
        await self._put(PutOp(self._h, [payload], atomic=False))

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
            await self._put(PutOp(self._h, payloads, atomic=False))

    async def _put(self, op: PutOp) -> None:
        t, h = self._t, self._h
        waiting = False
        try:
            while True:
                h.check_released()
                status = op.on_put(await t.put("aq_put", h.key, *op.put_args()))
                if status is DONE:
                    return
                if status is WAIT:
                    if not waiting:
                        waiting = True
                        self.full_clock.enter()
                    op.on_wake(await t.wait(op.wake_key, h.wait_timeout))
        except BaseException:
            await self._leave(op.leave_args())
            raise
        finally:
            if waiting:
                self.full_clock.leave()

    # -- dequeue -------------------------------------------------------------------------

    async def dequeue(self) -> Any:
        """Remove and return one element, waiting while none can be taken.

        Raises:
            OutOfRangeError: the queue is closed and empty (nothing is consumed).
            PayloadError: the element is not valid AQ1 for this queue (it is put back).
        """
        await anyio.lowlevel.checkpoint()
        return await self._take(TakeOp(self._h, "one", 1))

    async def dequeue_many(self, n: int) -> Any:
        """Remove and return exactly ``n`` elements as a batch, waiting for them.

        Raises:
            OutOfRangeError: the queue is closed and holds fewer than ``n``; nothing is
                consumed.
            ElementSpecError: ``n < 0`` or the queue has no declared shapes.
        """
        n = self._h.batch_n(n, "dequeue_many")
        await anyio.lowlevel.checkpoint()
        if n == 0:
            return self._h.spec.empty_batch()
        return await self._take(TakeOp(self._h, "many", n))

    async def dequeue_up_to(self, n: int) -> Any:
        """Like dequeue_many, but once the queue is closed return the 1..n that remain.

        As in TensorFlow, on an *open* queue this waits for all ``n`` elements.
        """
        n = self._h.batch_n(n, "dequeue_up_to")
        await anyio.lowlevel.checkpoint()
        if n == 0:
            return self._h.spec.empty_batch()
        return await self._take(TakeOp(self._h, "upto", n))

    async def dequeue_burst(self, n: int) -> Any:
        """Wait until at least one element can be taken, then take 1..n at once, as a
        batch (see ``aqueue.FIFOQueue.dequeue_burst``).

        Raises:
            OutOfRangeError: the queue is closed and empty (nothing is consumed).
            ElementSpecError: ``n < 0`` or the queue has no declared shapes.
        """
        n = self._h.batch_n(n, "dequeue_burst")
        await anyio.lowlevel.checkpoint()
        if n == 0:
            return self._h.spec.empty_batch()
        return await self._take(TakeOp(self._h, "many", 1))

    async def _take(self, op: TakeOp) -> Any:
        t, h = self._t, self._h
        waiting = False
        try:
            while True:
                reply, values = await t.take("aq_take", h.key, op.take_args(), op.fetch_keys())
                got = op.on_take(reply)
                if got is WAIT:
                    if not waiting:
                        waiting = True
                        self.empty_clock.enter()
                    await t.wait(op.wake_key, h.wait_timeout)
                elif got is not None:
                    if values is None:  # a progressive op reads its payloads now
                        values = await t.mget(op.payload_keys(got))
                    result = op.received(values)
                    if op.on_ack(await t.fcall("aq_ack", h.key, op.ack_args())):
                        return result
        except BaseException:
            await self._leave(op.leave_args())
            raise
        finally:
            if waiting:
                self.empty_clock.leave()

    async def _leave(self, args: list[Any] | None) -> None:
        """Undo an op that leaves early (shielded by the transport); best effort when
        the server is unreachable: its lease then expires there."""
        if args is None:
            return
        try:
            await self._t.fcall("aq_leave", self._h.key, args)
        except aqueue.QueueError:
            pass

    # -- state ---------------------------------------------------------------------------

    async def size(self) -> int:
        """Number of elements stored now (leased elements are not counted)."""
        return (await self.statistics()).size

    async def is_closed(self) -> bool:
        """Whether the queue has been closed (by any process)."""
        return (await self.statistics()).closed

    async def statistics(self) -> aqueue.QueueStatistics:
        """A snapshot of the queue's counters, read in one server call.

        ``size``, ``capacity``, ``closed``, ``enqueued_total``, ``dequeued_total`` and
        ``peak_size`` are the server's exact figures for all processes.
        ``tasks_waiting_enqueue``/``tasks_waiting_dequeue`` count registered waiters of
        all processes (approximate: a waiter between two retries is not counted, a
        crashed one is until its registration expires). ``time_full_s`` and
        ``time_empty_s`` are measured by this process only, for its own waiters.
        """
        h = self._h
        r = await self._t.fcall("aq_stats", h.key, [h.gen], ro=True)
        if not r:
            raise aqueue.QueueClosedError(f"queue '{h.name}' was deleted")
        v = [int(x) for x in r]
        return aqueue.QueueStatistics(
            size=v[0],
            capacity=h.capacity,
            closed=bool(v[1]),
            enqueued_total=v[3],
            dequeued_total=v[4],
            peak_size=v[5],
            tasks_waiting_enqueue=v[6],
            tasks_waiting_dequeue=v[7],
            time_full_s=self.full_clock.seconds(),
            time_empty_s=self.empty_clock.seconds(),
        )

    async def aclose(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue for every process; idempotent.

        Pending enqueues still complete as room frees, unless
        ``cancel_pending_enqueues``: then each fails with QueueClosedError (elements it
        had admitted stay). Every waiting dequeue, in every process, is woken and gets
        data or OutOfRangeError.
        """
        h = self._h
        await self._t.fcall("aq_close", h.key, [h.gen, "1" if cancel_pending_enqueues else "0"])

    # -- producers (for the QueueRunner) -------------------------------------------------

    async def register_producer(self) -> str:
        """Register one producer of this queue and return its id.

        The registration lives on the server with an expiry of ``lease_time``, which
        the ``connect()`` context refreshes while it is open. Pair every call with
        ``producer_done``. Raises QueueClosedError if the queue is closed.
        """
        import uuid

        h = self._h
        pid = uuid.uuid4().hex
        r = await self._t.fcall("aq_producer", h.key, [h.gen, "add", h.lease_ms, "1", pid])
        if r[0] != b"ok":
            raise aqueue.QueueClosedError(f"queue '{h.name}' is closed: cannot register a producer")
        self._producers.add_producer(h, pid)
        return pid

    async def producer_done(self, producer_id: str, *, clean: bool = True) -> None:
        """Remove producer ``producer_id``. A clean end of the last registered producer
        closes the queue (consumers drain it, then OutOfRangeError); ``clean=False``
        closes it at once with ``cancel_pending_enqueues=True``."""
        h = self._h
        self._producers.remove_producer(h, producer_id)
        await self._t.fcall(
            "aq_producer", h.key, [h.gen, "done", h.lease_ms, "1" if clean else "0", producer_id]
        )

    def release_producers(self) -> None:
        """A coordinator's stop: this process's enqueues on this queue object fail with
        QueueClosedError from their next step on (a waiting one within ``wait_timeout``),
        so its producers end cleanly. The shared queue is not closed: it closes when the
        last registered producer of all processes has ended."""
        self._h.released = True

    # -- iteration and the thread view ---------------------------------------------------

    def __aiter__(self) -> ElementIterator:
        return ElementIterator(self)

    def batches(self, n: int, *, allow_smaller_final_batch: bool = False) -> BatchIterator:
        """An async iterator of batches of ``n``; ends cleanly when the queue is final.

        Leftovers smaller than ``n`` stay in the queue, unless
        ``allow_smaller_final_batch`` (then they come as one short final batch).
        """
        n = self._h.batch_n(n, "batches")
        if n == 0:
            raise aqueue.ElementSpecError(f"queue '{self._h.name}'.batches: n must be >= 1, got 0")
        return BatchIterator(self, n, allow_smaller_final_batch)

    def blocking(self) -> BlockingRedisQueue:
        """A view whose blocking methods threads may call; it uses the synchronous
        client, so threads never need the event loop."""
        return BlockingRedisQueue(self._h, self._sync, self)


class RedisFIFOQueue(RedisQueue):
    """A first-in first-out queue stored in Redis (``server.fifo_queue``)."""


class RedisRandomShuffleQueue(RedisQueue):
    """A queue stored in Redis that dequeues in uniformly random order
    (``server.random_shuffle_queue``)."""

    @property
    def seed(self) -> int | None:
        """The seed of this client's random numbers, or None."""
        return self._h.seed


class ElementIterator:
    """``async for element in q``: dequeue until OutOfRangeError."""

    __slots__ = ("_queue",)

    def __init__(self, queue: RedisQueue) -> None:
        self._queue = queue

    def __aiter__(self) -> ElementIterator:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._queue.dequeue()
        except aqueue.OutOfRangeError:
            raise StopAsyncIteration from None


class BatchIterator:
    """The iterator returned by ``q.batches(n)`` (a class, not an async generator)."""

    __slots__ = ("_n", "_queue", "_smaller")

    def __init__(self, queue: RedisQueue, n: int, smaller: bool) -> None:
        self._queue = queue
        self._n = n
        self._smaller = smaller

    def __aiter__(self) -> BatchIterator:
        return self

    async def __anext__(self) -> Any:
        try:
            if self._smaller:
                return await self._queue.dequeue_up_to(self._n)
            return await self._queue.dequeue_many(self._n)
        except aqueue.OutOfRangeError:
            raise StopAsyncIteration from None
