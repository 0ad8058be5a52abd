"""QueueBase: the public operations of every queue, on top of QueueCore.

Every async operation checkpoints once, then tries to complete at once (the fast paths
below), else parks as a request in QueueCore's head-of-line lists. Its ``_nowait`` twin
never waits. The invariants live in ``_core.py``.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from ._backend import checkpoint, in_event_loop
from ._core import _MANY, _ONE, _UP_TO, _WAIT, QueueCore, _fire, _Waiter
from ._errors import ElementSpecError, OutOfRangeError
from ._spec import Components
from ._stats import QueueStatistics

if TYPE_CHECKING:
    from ._blocking import BlockingQueue

__all__ = ["QueueBase"]


class QueueBase(QueueCore):
    """Shared implementation of every aqueue queue; see the subclasses for constructors."""

    # -- properties ----------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """Maximum number of elements the queue holds (enqueuers wait beyond it)."""
        return self._capacity

    @property
    def dtypes(self) -> tuple[np.dtype[Any], ...]:
        """One numpy dtype per component."""
        return self._spec.dtypes

    @property
    def shapes(self) -> tuple[tuple[int | None, ...], ...] | None:
        """One shape per component, or None when shapes were not declared."""
        return self._spec.shapes

    @property
    def names(self) -> tuple[str, ...] | None:
        """Component names, or None for unnamed components."""
        return self._spec.names

    @property
    def name(self) -> str:
        """The queue's name, used in error messages and reports."""
        return self._name

    @property
    def closed(self) -> bool:
        """Whether ``close()`` has been called."""
        return self._closed

    def size(self) -> int:
        """Number of elements stored now."""
        return self._storage.size

    def __len__(self) -> int:
        return self._storage.size

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<{type(self).__name__} '{self._name}' size={self._storage.size}/"
            f"{self._capacity} {state}>"
        )

    # -- public async API ----------------------------------------------------------------

    async def enqueue(self, element: Any) -> None:
        """Add one element, waiting while the queue is full.

        Raises:
            ElementSpecError: the element does not fit the spec (nothing is admitted).
            QueueClosedError: the queue is closed, or it was closed with
                ``cancel_pending_enqueues=True`` while this call waited.

        If cancelled, the element was not admitted.
        """
        comps = self._spec.element(element)
        await checkpoint()
        if not self._put_one_now(comps):
            await self._put(self._putter(_ONE, comps, 1), checkpointed=True)

    def _put_one_now(self, comps: Components, deferred: list[_Waiter] | None = None) -> bool:
        """Fast path of enqueue (async, nowait and thread-side): admit if there is room
        now and nobody is queued ahead; False (nothing changed) otherwise. A thread
        passes a ``deferred`` list: its wake-ups are then sent after the lock is released."""
        lock = self._lock
        lock.acquire()  # (acquire/release: half the cost of `with` here)
        if deferred is not None:
            self._deferred = deferred
        try:
            st = self._storage
            size = st.size
            if size < self._capacity and not self._closed and not self._putters:
                if self._getters:  # a waiting batch dequeue may take it directly
                    self._admit_one(comps)
                    self._admitted(1)
                    self._notify()
                    return True
                st.put_one(comps)
                self._enqueued_total += 1
                if size >= self._peak:
                    self._peak = size + 1
                return True
            return False
        finally:
            if deferred is not None:
                self._deferred = None
                lock.release()
                _fire(deferred)
            else:
                lock.release()

    async def enqueue_many(self, batch: Any) -> None:
        """Add the elements of ``batch`` (sliced along axis 0), in order.

        A batch larger than the free space is admitted progressively, as room frees, and
        the call returns once its last element is in; its elements stay contiguous. If
        the call is cancelled (or its queue is closed with ``cancel_pending_enqueues``)
        meanwhile, exactly a prefix of the batch has been admitted and stays queued.
        An empty batch is a no-op.
        """
        comps, count = self._spec.batch(batch)
        await checkpoint()
        if count == 0:
            return
        lock = self._lock  # fast path: room for the whole batch and nobody queued ahead
        lock.acquire()  # (acquire/release: half the cost of `with` here)
        try:
            st = self._storage
            if not self._closed and not self._putters and st.size + count <= self._capacity:
                if self._getters:  # a waiting batch dequeue may take rows directly
                    g = self._getters[0]
                    if g.out is not None and g.claimed + count <= g.n:
                        # It fills that batch: the only request this can make ready.
                        self._fill(g, comps, 0, count)
                        self._enqueued_total += count
                        if g.claimed == g.n and not g.notified:
                            self._wake(g)
                        return
                    self._admit_rows(comps, 0, count)
                    self._admitted(count)
                    self._notify()
                    return
                st.put_rows(comps, 0, count)
                self._admitted(count)
                return
        finally:
            lock.release()
        await self._put(self._putter(_MANY, comps, count), checkpointed=True)

    async def dequeue(self) -> Any:
        """Remove and return one element, waiting while none can be taken.

        Raises:
            OutOfRangeError: the queue is closed and empty (and nothing is pending).

        If cancelled, nothing was consumed.
        """
        await checkpoint()
        result = self._take_one_now()
        if result is _WAIT:
            return await self._get(self._getter(_ONE, 1), checkpointed=True)
        return result

    def _take_one_now(self, deferred: list[_Waiter] | None = None) -> Any:
        """Fast path of dequeue (async, nowait and thread-side): take an element if one
        can be taken now and nobody is queued ahead; ``_WAIT`` (nothing changed)
        otherwise. ``deferred`` as for ``_put_one_now``."""
        lock = self._lock
        lock.acquire()  # (acquire/release: half the cost of `with` here)
        if deferred is not None:
            self._deferred = deferred
        try:
            st = self._storage
            if not self._getters and st.size > (0 if self._closed else self._min_after):
                comps = st.take_one()
                self._dequeued_total += 1
                if self._putters:
                    self._notify()
                return comps[0] if self._single else self._spec.pack(comps)
            return _WAIT
        finally:
            if deferred is not None:
                self._deferred = None
                lock.release()
                _fire(deferred)
            else:
                lock.release()

    async def dequeue_many(self, n: int) -> Any:
        """Remove and return exactly ``n`` elements as a batch, waiting for them.

        Raises:
            OutOfRangeError: the queue is closed and holds fewer than ``n``; nothing is
                consumed (elements this call had claimed are put back in order).
            ElementSpecError: ``n < 0`` or the queue has no declared shapes.

        If cancelled, nothing was consumed.
        """
        n = self._batch_op(n, "dequeue_many")
        if n:
            w = self._park_batch_getter(_MANY, n)
            if w is not None:  # it waits: the wait is its checkpoint
                return await self._wait(w, True, self._step_get)
        await checkpoint()
        if n == 0:
            return self._spec.empty_batch()
        lock = self._lock  # fast path: n can be taken in one copy and nobody queued ahead
        lock.acquire()  # (acquire/release: half the cost of `with` here)
        try:
            st = self._storage
            if not self._getters and st.size - (0 if self._closed else self._min_after) >= n:
                comps = st.take_batch(n)
                self._dequeued_total += n
                if self._putters:
                    self._notify()
                return comps[0] if self._single else self._spec.pack(comps)
        finally:
            lock.release()
        return await self._get(self._getter(_MANY, n), checkpointed=True)

    async def dequeue_up_to(self, n: int) -> Any:
        """Like dequeue_many, but once the queue is closed return the 1..n that remain.

        As in TensorFlow, on an *open* queue this waits for all ``n`` elements; use
        ``dequeue_up_to_nowait`` to take whatever is there now.
        """
        n = self._batch_op(n, "dequeue_up_to")
        if n == 0:
            await checkpoint()
            return self._spec.empty_batch()
        w = self._park_batch_getter(_UP_TO, n)
        if w is not None:  # it waits: the wait is its checkpoint
            return await self._wait(w, True, self._step_get)
        return await self._get(self._getter(_UP_TO, n))

    # -- public sync API -----------------------------------------------------------------

    def enqueue_nowait(self, element: Any) -> None:
        """Add one element now, or raise QueueFull (or QueueClosedError)."""
        comps = self._spec.element(element)
        if not self._put_one_now(comps):
            self._put_nowait(self._putter(_ONE, comps, 1))  # raises the precise error

    def enqueue_many_nowait(self, batch: Any) -> None:
        """Add the whole batch now, or nothing and raise QueueFull (all-or-nothing)."""
        comps, count = self._spec.batch(batch)
        if count:
            self._put_nowait(self._putter(_MANY, comps, count))

    def dequeue_nowait(self) -> Any:
        """Remove one element now, or raise QueueEmpty (OutOfRangeError when final)."""
        result = self._take_one_now()
        if result is _WAIT:
            return self._get_nowait(self._getter(_ONE, 1))  # raises the precise error
        return result

    def dequeue_many_nowait(self, n: int) -> Any:
        """Remove exactly ``n`` elements now, or raise QueueEmpty (OutOfRangeError when final)."""
        n = self._batch_op(n, "dequeue_many_nowait")
        if n == 0:
            return self._spec.empty_batch()
        return self._get_nowait(self._getter(_MANY, n))

    def dequeue_up_to_nowait(self, n: int) -> Any:
        """Remove 1..n elements available now, or raise QueueEmpty (OutOfRangeError when final)."""
        n = self._batch_op(n, "dequeue_up_to_nowait")
        if n == 0:
            return self._spec.empty_batch()
        return self._get_nowait(self._getter(_UP_TO, n))

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue for new enqueues; idempotent.

        Enqueues already waiting still complete as room frees, unless
        ``cancel_pending_enqueues`` is true: then each fails at once with
        QueueClosedError (elements a pending enqueue_many had admitted stay). Remaining
        elements can be dequeued; every blocked dequeuer is woken and either gets data
        or OutOfRangeError, so nobody waits on a closed queue forever.
        """
        with self._lock:
            self._closed = True
            if cancel_pending_enqueues:
                for w in self._putters:
                    if not w.rejected:
                        w.rejected = True
                        self._wake(w)
            self._notify()

    async def aclose(self) -> None:
        """Close the queue (``close()``), then checkpoint."""
        self.close()
        await checkpoint()

    async def __aenter__(self) -> QueueBase:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def statistics(self) -> QueueStatistics:
        """A frozen snapshot of the queue's counters."""
        with self._lock:
            now = time.monotonic()
            full = self._time_full + (now - self._full_since if self._putters else 0.0)
            empty = self._time_empty + (now - self._empty_since if self._getters else 0.0)
            return QueueStatistics(
                size=self._storage.size,
                capacity=self._capacity,
                closed=self._closed,
                enqueued_total=self._enqueued_total,
                dequeued_total=self._dequeued_total,
                peak_size=self._peak,
                tasks_waiting_enqueue=len(self._putters),
                tasks_waiting_dequeue=len(self._getters),
                time_full_s=full,
                time_empty_s=empty,
            )

    # -- iteration and the thread view ---------------------------------------------------

    def __aiter__(self) -> _ElementIterator:
        return _ElementIterator(self)

    def batches(self, n: int, *, allow_smaller_final_batch: bool = False) -> _BatchIterator:
        """An async iterator of batches of ``n``; ends cleanly when the queue is final.

        Leftovers smaller than ``n`` are left in the queue, unless
        ``allow_smaller_final_batch`` is true (then they come as one short final batch).
        Iterating never closes the queue.
        """
        n = self._batch_op(n, "batches")
        if n == 0:
            raise ElementSpecError(f"queue '{self._name}'.batches: n must be >= 1, got 0")
        return _BatchIterator(self, n, allow_smaller_final_batch)

    def blocking(self) -> BlockingQueue:
        """A view whose blocking methods may be called from other threads.

        Call this inside the event loop that the queue's async users run on.
        """
        from ._blocking import BlockingQueue

        if in_event_loop():
            self._loop_thread = threading.get_ident()
        return BlockingQueue(self)


class _ElementIterator:
    """``async for element in q``: dequeue until OutOfRangeError."""

    __slots__ = ("_queue",)

    def __init__(self, queue: QueueBase) -> None:
        self._queue = queue

    def __aiter__(self) -> _ElementIterator:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._queue.dequeue()
        except OutOfRangeError:
            raise StopAsyncIteration from None


class _BatchIterator:
    """The iterator returned by ``q.batches(n)`` (a class, not an async generator)."""

    __slots__ = ("_n", "_queue", "_smaller")

    def __init__(self, queue: QueueBase, n: int, smaller: bool) -> None:
        self._queue = queue
        self._n = n
        self._smaller = smaller

    def __aiter__(self) -> _BatchIterator:
        return self

    async def __anext__(self) -> Any:
        try:
            if self._smaller:
                return await self._queue.dequeue_up_to(self._n)
            return await self._queue.dequeue_many(self._n)
        except OutOfRangeError:
            raise StopAsyncIteration from None
