"""The queue interfaces that runners, the coordinator, input functions and pipelines
rely on, and the statistics record every queue reports.

``AsyncQueue`` is what a ``Pipeline`` reads from and what ``batch`` and friends take
elements from. Two backends implement it: the in-process queues (``aqueue.FIFOQueue``
and the rest) and the queues shared through a Redis server (``aqueue.redis``). Code
above the queues layer names these protocols, never a backend's class, so it works
over both.

``Sink`` is the part of it that *producers* use: what a ``QueueRunner`` fills and what
``Pipeline.to_queue`` sends into. Its members are exactly what a runner's launch, the
coordinator and a pipeline call: the name, ``enqueue``/``enqueue_many`` (and the same
two on the thread view, ``blocking()``, for producer threads), and producer
accounting. Every ``AsyncQueue`` is a sink (the protocol extends it), and so is every
replay table (``aqueue.ReplayTable``, and the protocol ``AsyncReplayTable`` in
``aqueue/_replay/_protocol.py``), whose ``enqueue`` inserts with the default priority.
Closing is not part of it: a runner ends a sink through producer accounting only.

Producer accounting is part of the interface, because "the queue closes after its
last producer" must hold across processes for a shared queue: a producer registers
(``register_producer``) before its first enqueue and reports its end
(``producer_done``); the last clean end closes the queue (consumers drain, then get
OutOfRangeError), a failed end closes it with ``cancel_pending_enqueues=True``.
``release_producers`` is a coordinator's stop: producers of *this process* waiting to
enqueue fail with QueueClosedError (an in-process queue is simply closed with
``cancel_pending_enqueues=True``, as TensorFlow's coordinator does).

``statistics()`` is awaitable on every backend: ``await q.statistics()``. In process
the call returns the ``QueueStatistics`` record itself (computed under the queue's
lock, no waiting), and the record is awaitable: awaiting it gives itself back without
suspending. On a shared queue ``statistics`` is a coroutine function (it needs the
server). Code that must not wait (a watchdog tick, a thread) uses
``local_statistics``, which gives the record when the call returned one and None
otherwise; replay tables (``aqueue/_replay/_protocol.py``) follow the same convention
with their own record, read by the same function.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

__all__ = [
    "AsyncQueue",
    "QueueView",
    "QueueStatistics",
    "Sink",
    "SinkView",
    "local_statistics",
]

T_co = TypeVar("T_co", covariant=True)
S = TypeVar("S")


@dataclass(frozen=True)
class QueueStatistics:
    """A snapshot returned by ``q.statistics()``. Counts are in elements, times in seconds."""

    size: int
    """Elements stored now (elements claimed by a waiting batch dequeue are not counted)."""
    capacity: int
    """The queue's capacity, in elements."""
    closed: bool
    """Whether ``close()`` has been called."""
    enqueued_total: int
    """Elements admitted since creation (restored claims are not counted again)."""
    dequeued_total: int
    """Elements handed to callers since creation (claims that were put back are not counted)."""
    peak_size: int
    """Largest ``size`` seen since creation, in elements."""
    tasks_waiting_enqueue: int
    """Tasks and threads blocked in an enqueue now."""
    tasks_waiting_dequeue: int
    """Tasks and threads blocked in a dequeue now."""
    time_full_s: float
    """Total seconds during which at least one enqueuer was blocked."""
    time_empty_s: float
    """Total seconds during which at least one dequeuer was blocked."""

    def __await__(self) -> Generator[Any, Any, QueueStatistics]:
        """So ``await q.statistics()`` works on every backend: in process the call
        returns the record directly, and awaiting it gives it back without suspending
        (on an ``aqueue.redis`` queue the call is a coroutine that asks the server)."""
        return self
        yield  # (unreachable: makes this a generator that never suspends)


@runtime_checkable
class SinkView(Protocol):
    """A sink's thread-side view (``sink.blocking()``): what a runner's producer threads
    call, without an event loop round trip per item. ``timeout`` is in seconds (None:
    no limit); on expiry the call raises TimeoutError and has added nothing."""

    def enqueue(self, element: Any, timeout: float | None = None) -> None:
        """Add one element, blocking while the sink holds it back (a full queue, a
        table's rate limiter)."""
        ...

    def enqueue_many(self, batch: Any, timeout: float | None = None) -> None:
        """Add the elements of ``batch`` in order: progressively (as the sink lets
        them in) without a timeout, all-or-nothing with one."""
        ...


@runtime_checkable
class Sink(Protocol):
    """What producers fill: a ``QueueRunner``'s queue, a ``Pipeline.to_queue`` target.

    Implemented by every ``AsyncQueue`` and by replay tables. The contract:

    - ``enqueue``/``enqueue_many`` add elements, waiting while the sink holds them back;
      a bad element raises ElementSpecError naming the sink, and adds nothing; a closed
      sink raises QueueClosedError. ``enqueue_many`` is progressive: a batch larger
      than what the sink lets in at once goes in as room frees, in order, and a
      cancelled call leaves exactly a prefix of it in.
    - Producer accounting: ``register_producer`` before a producer's first element,
      ``producer_done`` at its end; the clean end of the last registered producer
      closes the sink (consumers drain it, then get OutOfRangeError), an unclean end
      closes it so that waiting enqueues fail at once. ``release_producers`` is a
      coordinator's stop: this process's producers waiting to enqueue fail with
      QueueClosedError.
    """

    @property
    def name(self) -> str:
        """The sink's name, used in messages and reports."""
        ...

    async def enqueue(self, element: Any) -> None:
        """Add one element, waiting while the sink holds it back."""
        ...

    async def enqueue_many(self, batch: Any) -> None:
        """Add the elements of ``batch`` (sliced along axis 0) in order, progressively."""
        ...

    def blocking(self) -> SinkView:
        """The thread-side view."""
        ...

    async def register_producer(self) -> str:
        """Count one more producer of this sink; return its id for producer_done."""
        ...

    async def producer_done(self, producer_id: str, *, clean: bool = True) -> None:
        """Producer ``producer_id`` has ended; the last clean end closes the sink, an
        unclean one (``clean=False``) closes it so that waiting enqueues fail."""
        ...

    def release_producers(self) -> None:
        """Called by a Coordinator when it stops: this process's producers waiting to
        enqueue fail with QueueClosedError (they end cleanly)."""
        ...


@runtime_checkable
class QueueView(SinkView, Protocol[T_co]):
    """A queue's thread-side view (``q.blocking()``): blocking methods for threads that
    do not run an event loop. ``timeout`` is in seconds (None: no limit); on expiry the
    call raises TimeoutError and changes nothing."""

    def enqueue(self, element: Any, timeout: float | None = None) -> None:
        """Add one element, blocking while the queue is full."""
        ...

    def enqueue_many(self, batch: Any, timeout: float | None = None) -> None:
        """Add a batch (all-or-nothing when a timeout is given)."""
        ...

    def dequeue(self, timeout: float | None = None) -> T_co:
        """Remove and return one element."""
        ...

    def dequeue_many(self, n: int, timeout: float | None = None) -> T_co:
        """Remove and return exactly ``n`` elements as a batch."""
        ...

    def dequeue_up_to(self, n: int, timeout: float | None = None) -> T_co:
        """As dequeue_many; once the queue is closed, the 1..n that remain."""
        ...


@runtime_checkable
class AsyncQueue(Sink, Protocol[T_co]):
    """An aqueue queue as the upper layers use it (both backends implement it); a
    ``Sink`` too."""

    @property
    def name(self) -> str:
        """The queue's name, used in messages and reports."""
        ...

    @property
    def capacity(self) -> int:
        """Maximum number of elements held."""
        ...

    @property
    def dtypes(self) -> tuple[np.dtype[Any], ...]:
        """One numpy dtype per component."""
        ...

    @property
    def shapes(self) -> tuple[tuple[int | None, ...], ...] | None:
        """One shape per component, or None when shapes were not declared."""
        ...

    @property
    def names(self) -> tuple[str, ...] | None:
        """Component names, or None for unnamed components."""
        ...

    @property
    def min_after_dequeue(self) -> int:
        """Elements a dequeue leaves behind while the queue is open (0 but for a
        shuffling queue)."""
        ...

    async def enqueue(self, element: Any) -> None:
        """Add one element, waiting while the queue is full."""
        ...

    async def enqueue_many(self, batch: Any) -> None:
        """Add the elements of ``batch`` in order."""
        ...

    async def dequeue(self) -> T_co:
        """Remove and return one element (OutOfRangeError when none is left)."""
        ...

    async def dequeue_many(self, n: int) -> T_co:
        """Remove and return exactly ``n`` elements as a batch."""
        ...

    async def dequeue_up_to(self, n: int) -> T_co:
        """As dequeue_many; once the queue is closed, the 1..n that remain."""
        ...

    async def dequeue_burst(self, n: int) -> T_co:
        """Wait until at least one element can be taken, then take 1..n at once (what
        is there, up to ``n``), as a batch."""
        ...

    def __aiter__(self) -> AsyncIterator[T_co]:
        """Iterate over elements until the queue is closed and drained."""
        ...

    def batches(self, n: int, *, allow_smaller_final_batch: bool = False) -> AsyncIterator[T_co]:
        """Iterate over batches of ``n`` until the queue is closed and drained."""
        ...

    def blocking(self) -> QueueView[T_co]:
        """The thread-side view."""
        ...

    def statistics(self) -> Awaitable[QueueStatistics]:
        """The queue's counters: ``await q.statistics()`` on every backend (in process
        the call returns the record itself, which is awaitable; on a shared queue it is
        a coroutine that asks the server)."""
        ...

    async def aclose(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue for new enqueues."""
        ...

    async def register_producer(self) -> str:
        """Count one more producer of this queue; return its id for producer_done."""
        ...

    async def producer_done(self, producer_id: str, *, clean: bool = True) -> None:
        """Producer ``producer_id`` has ended; the last clean end closes the queue, an
        unclean one (``clean=False``) closes it with ``cancel_pending_enqueues=True``."""
        ...

    def release_producers(self) -> None:
        """Called by a Coordinator when it stops: this process's producers waiting to
        enqueue fail with QueueClosedError (they end cleanly)."""
        ...


def local_statistics(source: Any, record: type[S]) -> S | None:
    """``source.statistics()`` when the call returns a ``record`` itself (an in-process
    queue's ``QueueStatistics``, an in-process table's ``ReplayStatistics``); None when
    it returns something to await (a shared one: it needs its server), which is closed
    unawaited."""
    stats = source.statistics()
    if isinstance(stats, record):
        return stats
    close = getattr(stats, "close", None)  # a coroutine not awaited: no warning
    if close is not None:
        close()
    return None
